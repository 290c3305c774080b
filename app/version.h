// The tool's version and the git revision it was built from, for `tpusim --version` and the
// "tool" object every JSON output carries (so a result names what made it).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace tpusim {

std::string version_text();  // "tpusim 0.1 (git 1a2b3c4d5e6f)"
nlohmann::json tool_json();  // {"name": "tpusim", "version": "0.1", "revision": "1a2b3c4d5e6f"}

}  // namespace tpusim
