// `compare --anatomy`'s table: the host_resident column appears only when some run keeps blocks
// on the host (gemini's offloaded chunks), so that its parts can be seen to add up to
// reserved + host_resident - requested. Anatomies written by hand.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fraglab/report.hpp"

namespace fraglab {
namespace {

ReplayResult run_with(const std::string& policy, Bytes host_resident) {
  ReplayResult r;
  r.policy = policy;
  Anatomy a;
  a.event = 9;
  a.reserved = 8 * MiB;
  a.requested = 7 * MiB + 512 * KiB;
  a.cached_free_usable = 4 * MiB + 512 * KiB;
  a.host_resident = host_resident;
  r.anatomy_at_peak = a;
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

TEST(AnatomyTable, HostResidentColumnOnlyWhenARunKeepsBlocksOnTheHost) {
  std::vector<std::string> without = lines_of(anatomy_table({run_with("pytorch", 0)}));
  ASSERT_EQ(without.size(), 3u);
  EXPECT_EQ(without[0].find("reserved - requested = rounding"), without[0].find(": ") + 2) << without[0];
  without.erase(without.begin());  // the title
  EXPECT_EQ(without[0].find("host_resident"), std::string::npos) << without[0];
  EXPECT_EQ(without[0].substr(without[0].size() - 5), "other");
  EXPECT_EQ(without[1].substr(without[1].size() - 3), "0 B");
  EXPECT_EQ(without[0].size(), without[1].size()) << "every column as wide as its header";

  std::vector<std::string> with =
      lines_of(anatomy_table({run_with("pytorch", 0), run_with("gemini:placement:auto", 4 * MiB)}));
  ASSERT_EQ(with.size(), 4u);
  EXPECT_NE(with[0].find(": reserved + host_resident - requested = rounding"), std::string::npos) << with[0];
  with.erase(with.begin());
  EXPECT_EQ(with[0].substr(with[0].size() - 13), "host_resident") << with[0];
  // Every row ends with its host-resident bytes, right-aligned under the header.
  EXPECT_EQ(with[1].substr(with[1].size() - 15), "            0 B") << with[1];
  EXPECT_EQ(with[2].substr(with[2].size() - 15), "       4.00 MiB") << with[2];
  EXPECT_EQ(with[0].size(), with[2].size());
}

}  // namespace
}  // namespace fraglab
