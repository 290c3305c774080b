#include <imgui.h>

#include <algorithm>

#include "gui/em.h"
#include "gui/panels.h"

namespace tpusim::gui {

bool open_scenario_popup(const char* id, std::filesystem::path& dir, std::string& file) {
  namespace fs = std::filesystem;
  bool picked = false;
  if (!ImGui::BeginPopup(id)) return false;
  ImGui::TextUnformatted(dir.string().c_str());
  ImGui::BeginChild("files", ImVec2(520 * em(), 360 * em()), true);
  if (ImGui::Selectable("../")) dir = dir.parent_path();
  std::vector<fs::directory_entry> entries;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() || e.path().extension() == ".yaml") entries.push_back(e);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return std::pair(!a.is_directory(), a.path().filename()) <
           std::pair(!b.is_directory(), b.path().filename());
  });
  if (ec) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", ec.message().c_str());
  for (const auto& e : entries) {
    const std::string name = e.path().filename().string() + (e.is_directory() ? "/" : "");
    if (!ImGui::Selectable(name.c_str())) continue;
    if (e.is_directory()) {
      dir = e.path();
    } else {
      file = e.path().string();
      picked = true;
      ImGui::CloseCurrentPopup();
    }
  }
  ImGui::EndChild();
  ImGui::EndPopup();
  return picked;
}

}  // namespace tpusim::gui
