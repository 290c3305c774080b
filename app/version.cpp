#include "app/version.h"

#include <fmt/format.h>

#include "tpusim_version.h"

namespace tpusim {

std::string version_text() {
  return fmt::format("tpusim {} (git {})", TPUSIM_VERSION, TPUSIM_REVISION);
}

nlohmann::json tool_json() {
  return {{"name", "tpusim"}, {"version", TPUSIM_VERSION}, {"revision", TPUSIM_REVISION}};
}

}  // namespace tpusim
