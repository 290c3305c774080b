// Reading a whole input file as text. Every reader goes through it, so a path that names a
// directory, a pipe or a device, or a file that cannot be read, is one tpusim::Error naming the
// path (libstdc++'s filebuf throws std::ios_base::failure reading a directory; found by
// scripts/fuzz.sh on a scenario whose `compiled:` named "..").
#pragma once
#include <string>

namespace tpusim {

// Throws unless `path` is a regular file (read_text_file: and its bytes could be read).
void check_regular_file(const std::string& path);
std::string read_text_file(const std::string& path);

}  // namespace tpusim
