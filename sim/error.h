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

}  // namespace tpusim
