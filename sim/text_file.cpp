#include "sim/text_file.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "sim/error.h"

namespace tpusim {

void check_regular_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    throw Error(fmt::format(
        "{}: cannot open file{}", shortened_path(path),
        ec && ec != std::errc::no_such_file_or_directory ? " (" + ec.message() + ")" : ""));
  if (!std::filesystem::is_regular_file(status))
    throw Error(fmt::format("{}: not a regular file (a directory, a pipe or a device?)",
                            shortened_path(path)));
}

std::string read_text_file(const std::string& path) {
  check_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open file", shortened_path(path)));
  try {
    in.exceptions(std::ios::badbit);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure& e) {
    throw Error(fmt::format("{}: cannot read file ({})", shortened_path(path), e.what()));
  }
}

}  // namespace tpusim
