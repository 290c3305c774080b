// The GUI's unit of size: sizes are set at Dear ImGui's default 13-pixel font and grow with the
// font (--font-scale, Ctrl+= and Ctrl+-).
#pragma once
#include <imgui.h>

namespace tpusim::gui {

inline float em() { return ImGui::GetFontSize() / 13.0f; }

}  // namespace tpusim::gui
