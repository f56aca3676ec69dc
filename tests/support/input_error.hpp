// The message of the InputError a call throws, for tests of one-line errors.
#pragma once

#include <functional>
#include <string>

#include "fraglab/types.hpp"

namespace fraglab::testing {

// The InputError's text, or "(no error)" when `f` returns normally.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace fraglab::testing
