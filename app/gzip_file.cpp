#include "app/gzip_file.h"

#include <fmt/format.h>
#include <zlib.h>

#include <memory>

#include "sim/error.h"
#include "sim/text_file.h"

namespace tpusim {

std::string read_maybe_gzipped(const std::string& path) {
  check_regular_file(path);
  // zlib's gzread reads a file without the gzip header as it is.
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  if (!f) throw Error(fmt::format("{}: cannot open it", path));
  std::string text;
  char buffer[1 << 16];
  for (int n; (n = gzread(f.get(), buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  int err = 0;
  if (const char* m = gzerror(f.get(), &err); err != Z_OK && err != Z_STREAM_END)
    throw Error(fmt::format("{}: cannot decompress it: {}", path, m));
  return text;
}

}  // namespace tpusim
