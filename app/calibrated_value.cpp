#include "app/calibrated_value.h"

#include <fmt/format.h>

#include <cstdint>
#include <regex>

#include "sim/error.h"
#include "sim/text_file.h"

namespace tpusim {
namespace {

std::string double_quoted(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

}  // namespace

std::string chip_file_with(const std::string& path, const std::vector<CalibratedValue>& values) {
  std::string s = read_text_file(path);
  for (const CalibratedValue& v : values) {
    const std::regex block("(^|\\n)" + v.key + ":\\n  value: [^\\n]*\\n  [a-z]+: [^\\n]*\\n");
    if (!std::regex_search(s, block))
      throw Error(
          fmt::format("{}: no '{}' block of a value and a provenance to update", path, v.key));
    // The shortest text that reads back as the same double.
    const std::string value =
        v.integer ? fmt::format("{}", static_cast<int64_t>(v.value)) : fmt::format("{}", v.value);
    s = std::regex_replace(
        s, block,
        fmt::format("$1{}:\n  value: {}\n  calibrated: {}\n", v.key, value, double_quoted(v.how)),
        std::regex_constants::format_first_only);
  }
  return s;
}

}  // namespace tpusim
