// A whole text file, inflated when it is gzip-compressed (profiles, compiled HLO).
#pragma once
#include <string>

namespace tpusim {

// The file's text; a plain file is read as is. Throws Error naming the file if it cannot be
// opened or decompressed.
std::string read_maybe_gzipped(const std::string& path);

}  // namespace tpusim
