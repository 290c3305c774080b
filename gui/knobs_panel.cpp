#include <imgui.h>

#include <algorithm>

#include "gui/em.h"
#include "gui/panels.h"

namespace tpusim::gui {
namespace {

constexpr float kKnobWidth = 150;  // leaves the label room within the 330 px panel

// A knob's widget; its help text is the tooltip. Returns true when the value changed.
bool knob_widget(const kernels::Knob& k, kernels::KnobValues& v) {
  bool changed = false;
  ImGui::SetNextItemWidth(kKnobWidth * em());
  if (k.type == kernels::Knob::Type::integer) {
    int64_t x = v.integer(k.name);
    const int64_t step = 1, step_fast = 64;
    if (ImGui::InputScalar(k.name.c_str(), ImGuiDataType_S64, &x, &step, &step_fast)) {
      v.set(k.name, std::clamp(x, k.min, k.max));
      changed = true;
    }
  } else {
    const std::string& current = v.choice(k.name);
    if (ImGui::BeginCombo(k.name.c_str(), current.c_str())) {
      for (const std::string& c : k.choices)
        if (ImGui::Selectable(c.c_str(), c == current)) {
          v.set(k.name, c);
          changed = true;
        }
      ImGui::EndCombo();
    }
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", k.help.c_str());
  return changed;
}

// A combo over the catalog's kernels; `none` adds a first entry meaning no kernel (-1).
bool kernel_combo(const char* label, int& kernel, const char* none = nullptr) {
  const auto& entries = kernels::catalog();
  const char* preview = kernel >= 0 ? entries.at(kernel).name.c_str() : none;
  bool changed = false;
  ImGui::SetNextItemWidth(kKnobWidth * em());
  if (ImGui::BeginCombo(label, preview)) {
    if (none && ImGui::Selectable(none, kernel < 0)) {
      kernel = -1;
      changed = true;
    }
    for (int i = 0; i < static_cast<int>(entries.size()); ++i) {
      if (ImGui::Selectable(entries[i].name.c_str(), i == kernel)) {
        kernel = i;
        changed = true;
      }
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", entries[i].help.c_str());
    }
    ImGui::EndCombo();
  }
  return changed;
}

bool kernel_knobs(const char* id, KernelChoice& k) {
  bool changed = false;
  ImGui::PushID(id);
  for (const kernels::Knob& knob : k.entry().knobs) changed |= knob_widget(knob, k.knobs);
  ImGui::PopID();
  return changed;
}

}  // namespace

bool knobs_panel(Knobs& k, const std::vector<std::string>& chips) {
  const Knobs before = k;
  int kernel = k.main.kernel;
  if (kernel_combo("kernel", kernel)) k.main = switch_kernel(kernel, k.main.knobs);
  ImGui::SetNextItemWidth(kKnobWidth * em());
  if (ImGui::BeginCombo("chip", k.chip.c_str())) {
    for (const std::string& c : chips)
      if (ImGui::Selectable(c.c_str(), c == k.chip)) k.chip = c;
    ImGui::EndCombo();
  }
  // "compare with": none or any kernel (the same one at other knobs), on one time axis.
  int compare = k.compare ? k.compare->kernel : -1;
  if (kernel_combo("compare with", compare, "(none)")) {
    if (compare < 0)
      k.compare.reset();
    else
      k.compare = switch_kernel(compare, (k.compare ? k.compare->knobs : k.main.knobs));
  }
  kernel_knobs("main", k.main);
  if (k.compare) {
    ImGui::Separator();
    ImGui::Text("compared: %s", k.compare->entry().name.c_str());
    // On another chip: both drawn on one time axis (each in its own clock's cycles).
    ImGui::SetNextItemWidth(kKnobWidth * em());
    if (ImGui::BeginCombo("on chip",
                          k.compare_chip.empty() ? "(the same)" : k.compare_chip.c_str())) {
      if (ImGui::Selectable("(the same)", k.compare_chip.empty())) k.compare_chip.clear();
      for (const std::string& c : chips)
        if (ImGui::Selectable(c.c_str(), c == k.compare_chip)) k.compare_chip = c;
      ImGui::EndCombo();
    }
    kernel_knobs("compare", *k.compare);
  }
  return !(before == k);
}

}  // namespace tpusim::gui
