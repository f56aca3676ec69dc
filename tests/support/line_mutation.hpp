// Random damage to one text line, for tests that feed readers lines a writer never makes: each
// edit replaces, deletes or inserts one character drawn from `alphabet` at a random place.
#pragma once

#include <cstddef>
#include <random>
#include <string>
#include <string_view>

namespace fraglab::testing {

// Applies 1..max_edits edits to `line`.
inline void mutate_line(std::string& line, std::mt19937_64& rng, std::string_view alphabet, int max_edits) {
  for (int edits = 1 + static_cast<int>(rng() % static_cast<unsigned>(max_edits)); edits > 0; --edits) {
    const std::size_t at = rng() % (line.size() + 1);
    const char c = alphabet[rng() % alphabet.size()];
    switch (rng() % 3) {
      case 0:
        if (at < line.size()) line[at] = c;
        break;
      case 1:
        if (at < line.size()) line.erase(at, 1);
        break;
      default:
        line.insert(at, 1, c);
        break;
    }
  }
}

}  // namespace fraglab::testing
