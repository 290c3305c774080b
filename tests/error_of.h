// The message of the tpusim::Error `f` throws, or "" when it throws none.
#pragma once
#include <functional>
#include <string>

#include "sim/error.h"

namespace tpusim::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tpusim::testing
