// tpusim::Error: the one exception type user-facing code throws. Its message is a single line
// that names what is wrong (file:line:column and key for input files, buffers and limits for VMEM).
#pragma once
#include <stdexcept>
#include <string>

namespace tpusim {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A kernel that needs more VMEM than its limit: callers that know which setting sized the
// kernel (a scenario's knobs, or its scoped VMEM limit) point the user there.
class VmemError : public Error {
 public:
  using Error::Error;
};

}  // namespace tpusim
