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

// How much of a user-given name or path an error message quotes.
inline constexpr size_t kMaxQuoted = 80;

// A user-given name as an error message quotes it: at most kMaxQuoted characters, the rest
// counted, so that a 300-byte name does not drown the message.
inline std::string shortened(const std::string& text) {
  if (text.size() <= kMaxQuoted) return text;
  return text.substr(0, kMaxQuoted) + "... (" + std::to_string(text.size()) + " bytes)";
}

// A file path keeps its end instead: the file's own name is what tells the user which one it is,
// and a deep build folder must not cut it off.
inline std::string shortened_path(const std::string& path) {
  if (path.size() <= kMaxQuoted) return path;
  return "..." + path.substr(path.size() - kMaxQuoted);
}

}  // namespace tpusim
