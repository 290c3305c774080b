#include "gui/timeline_view.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace tpusim::gui {
namespace {

ImU32 unit_colour(UnitKind k) {
  switch (k) {
    case UnitKind::mxu:
      return IM_COL32(76, 120, 168, 255);
    case UnitKind::vpu:
      return IM_COL32(84, 162, 75, 255);
    case UnitKind::dma:
      return IM_COL32(242, 166, 90, 255);
    case UnitKind::hbm:
      return IM_COL32(140, 140, 140, 255);
    case UnitKind::ici:
      return IM_COL32(178, 121, 162, 255);
    case UnitKind::scalar:
      return IM_COL32(157, 117, 93, 255);
  }
  return IM_COL32_WHITE;
}

std::string shape_text(const Value& v) {
  return to_string(v.shape) + " " + std::string(name(v.dtype));
}

std::string kernel_shapes(const Kernel& k, const std::string& label) {
  for (const Op& op : k.body)
    if (op.name == label) {
      std::string in;
      for (ValueId v : op.inputs) in += (in.empty() ? "" : ", ") + shape_text(k.values.at(v));
      return (in.empty() ? "" : in + " -> ") + shape_text(k.values.at(op.output));
    }
  // DMA labels: "fetch" an input block, "write" an output block.
  for (const auto& [verb, specs] :
       {std::pair{"fetch ", &k.inputs}, std::pair{"write ", &k.outputs}})
    if (label.rfind(verb, 0) == 0)
      for (const BlockSpec& s : *specs)
        if (s.array.name == label.substr(6))
          return "block " + to_string(s.block_shape) + " of " + to_string(s.array.shape) + " " +
                 std::string(name(s.array.dtype));
  return "";
}

}  // namespace

ImU32 cause_colour(Cause c) {
  switch (c) {
    case Cause::busy:
      return IM_COL32(76, 120, 168, 255);
    case Cause::dma_wait:
      return IM_COL32(228, 87, 86, 255);
    case Cause::dependency:
      return IM_COL32(245, 133, 24, 255);
    case Cause::mxu_fill_drain:
      return IM_COL32(238, 202, 59, 255);
    case Cause::step_overhead:
      return IM_COL32(157, 117, 93, 255);
    case Cause::loop_overhead:
      return IM_COL32(186, 176, 172, 255);
    case Cause::collective:
      return IM_COL32(178, 121, 162, 255);
    case Cause::dispatch:
      return IM_COL32(121, 112, 110, 255);
    case Cause::idle:
      return IM_COL32(90, 90, 90, 255);
  }
  return IM_COL32_WHITE;
}

std::string event_shapes(const Program& p, int item, const std::string& label) {
  if (item < 0 || item >= static_cast<int>(p.items.size())) return "";
  const ProgramItem& it = p.items[item];
  if (const auto* call = std::get_if<KernelCall>(&it.what))
    return kernel_shapes(*call->kernel, label);
  if (const auto* loop = std::get_if<Loop>(&it.what))
    for (const auto& k : loop->body)
      if (std::string s = kernel_shapes(*k, label); !s.empty()) return s;
  if (const auto* c = std::get_if<Collective>(&it.what))
    return std::to_string(c->bytes) + " B over " + c->axis.name + " (" +
           std::to_string(c->axis.size) + " chips)";
  return "";
}

std::vector<LaneIndex> index_lanes(const RunResult& r) {
  std::vector<LaneIndex> lanes(r.units.size());
  for (size_t i = 0; i < r.events.size(); ++i) {
    const TimelineEvent& e = r.events[i];
    LaneIndex& l = lanes[e.unit];
    if (l.end == 0) l.begin = i;
    l.end = i + 1;
    l.longest = std::max(l.longest, e.end - e.start);
  }
  return lanes;
}

void draw_timeline(const RunResult& r, const std::vector<LaneIndex>& index, TimelineState& st,
                   const char* id, const Program* program) {
  if (st.to <= st.from)
    st.from = 0, st.to = std::max<int64_t>(1, std::max(st.fit_cycles, r.cycles));
  // Lanes: units with events, grouped as the engine numbered them.
  std::vector<int> lane_of(r.units.size(), -1);
  for (const TimelineEvent& e : r.events) lane_of[e.unit] = 0;
  int lanes = 0;
  for (size_t u = 0; u < r.units.size(); ++u)
    if (lane_of[u] == 0) lane_of[u] = lanes++;

  const float label_w = 90, lane_h = 20, ruler_h = 22;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float width = std::max(100.0f, ImGui::GetContentRegionAvail().x);
  const float plot_w = width - label_w;
  const float height = ruler_h + lanes * lane_h;
  ImGui::InvisibleButton(id, ImVec2(width, std::max(height, 40.0f)));
  const bool hovered = ImGui::IsItemHovered();
  const int64_t span = std::max<int64_t>(1, st.to - st.from);
  auto x_of = [&](int64_t c) {
    return origin.x + label_w + static_cast<float>(double(c - st.from) / span * plot_w);
  };
  const ImGuiIO& io = ImGui::GetIO();

  // Zoom at the cursor with the wheel; pan by dragging.
  if (hovered && io.MouseWheel != 0) {
    const double at = std::clamp((io.MousePos.x - origin.x - label_w) / plot_w, 0.0f, 1.0f);
    const int64_t pivot = st.from + static_cast<int64_t>(at * span);
    const double factor = io.MouseWheel > 0 ? 0.8 : 1.25;
    const int64_t new_span = std::clamp<int64_t>(static_cast<int64_t>(span * factor), 16,
                                                 std::max<int64_t>(16, r.cycles * 2));
    st.from = pivot - static_cast<int64_t>(at * new_span);
    st.to = st.from + new_span;
  }
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f)) {
    const int64_t shift = static_cast<int64_t>(-io.MouseDelta.x / plot_w * span);
    st.from += shift;
    st.to += shift;
  }

  // Ruler in microseconds at a 1-2-5 step.
  const double us_per_cycle = 1e6 / r.clock_hz, span_us = span * us_per_cycle;
  double step = std::pow(10.0, std::floor(std::log10(std::max(span_us, 1e-9) / 8)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (span_us / (step * m) <= 8) {
      step *= m;
      break;
    }
  dl->AddRectFilled(origin, ImVec2(origin.x + width, origin.y + height), IM_COL32(25, 25, 28, 255));
  for (double t = std::ceil(st.from * us_per_cycle / step) * step; t <= st.to * us_per_cycle;
       t += step) {
    const float x = x_of(static_cast<int64_t>(t / us_per_cycle));
    dl->AddLine(ImVec2(x, origin.y + ruler_h - 6), ImVec2(x, origin.y + height),
                IM_COL32(60, 60, 64, 255));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g us", t);
    dl->AddText(ImVec2(x + 2, origin.y + 2), IM_COL32(200, 200, 200, 255), buf);
  }

  // Events, merged per lane while sub-pixel and touching (int64 arithmetic throughout).
  const TimelineEvent* hover = nullptr;
  const int64_t pixel = std::max<int64_t>(1, span / static_cast<int64_t>(std::max(1.0f, plot_w)));
  for (size_t u = 0; u < r.units.size(); ++u) {
    if (lane_of[u] < 0) continue;
    const float y = origin.y + ruler_h + lane_of[u] * lane_h;
    dl->AddText(ImVec2(origin.x + 4, y + 3), IM_COL32(220, 220, 220, 255), r.units[u].name.c_str());
  }
  int64_t run_start = -1, run_end = -1;
  int run_unit = -1;
  ImU32 run_colour = 0;
  auto flush = [&] {
    if (run_unit < 0) return;
    const float y = origin.y + ruler_h + lane_of[run_unit] * lane_h;
    const float x0 = std::max(x_of(run_start), origin.x + label_w),
                x1 = std::min(x_of(run_end), origin.x + width);
    if (x1 >= x0)
      dl->AddRectFilled(ImVec2(x0, y + 3), ImVec2(std::max(x1, x0 + 1), y + lane_h - 3),
                        run_colour);
    run_unit = -1;
  };
  for (size_t u = 0; u < index.size(); ++u) {
    if (index[u].end == 0) continue;
    // The first event that can reach the window starts at most `longest` before it.
    const auto first = std::lower_bound(
        r.events.begin() + index[u].begin, r.events.begin() + index[u].end,
        st.from - index[u].longest, [](const TimelineEvent& e, int64_t t) { return e.start < t; });
    for (auto it = first; it != r.events.begin() + index[u].end && it->start <= st.to; ++it) {
      const TimelineEvent& e = *it;
      if (e.end < st.from) continue;
      ImU32 colour =
          e.cause == Cause::busy ? unit_colour(r.units[e.unit].kind) : cause_colour(e.cause);
      if (st.selected_step >= 0 && e.step == st.selected_step)
        colour = IM_COL32(255, 255, 255, 255);
      const bool narrow = e.end - e.start < pixel;
      if (run_unit == e.unit && narrow && e.start - run_end <= pixel &&
          e.end - run_start < 3 * pixel) {
        run_end = std::max(run_end, e.end);
      } else {
        flush();
        run_unit = e.unit, run_start = e.start, run_end = e.end, run_colour = colour;
      }
      if (hovered) {
        const float y = origin.y + ruler_h + lane_of[e.unit] * lane_h;
        if (io.MousePos.y >= y && io.MousePos.y < y + lane_h &&
            io.MousePos.x >= x_of(e.start) - 1 && io.MousePos.x <= x_of(e.end) + 1)
          hover = &e;
      }
    }
  }
  flush();
  if (hover) {
    ImGui::BeginTooltip();
    ImGui::Text("%s", r.labels[hover->label].c_str());
    ImGui::Text("unit %s", r.units[hover->unit].name.c_str());
    if (hover->item >= 0) ImGui::Text("item %s", r.item_names[hover->item].c_str());
    if (program && hover->cause == Cause::busy)
      if (const std::string s = event_shapes(*program, hover->item, r.labels[hover->label]);
          !s.empty())
        ImGui::Text("shapes %s", s.c_str());
    if (hover->step >= 0) ImGui::Text("grid step %lld", static_cast<long long>(hover->step));
    ImGui::Text("%.3f .. %.3f us (%lld cycles)", hover->start * us_per_cycle,
                hover->end * us_per_cycle, static_cast<long long>(hover->end - hover->start));
    if (hover->cause != Cause::busy)
      ImGui::Text("stall: %s", std::string(name(hover->cause)).c_str());
    ImGui::EndTooltip();
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Right)) st.selected_step = hover->step;
  }
  // Legend.
  for (int c = 1; c < kNumCauses; ++c) {
    ImGui::ColorButton(std::string(name(static_cast<Cause>(c))).c_str(),
                       ImGui::ColorConvertU32ToFloat4(cause_colour(static_cast<Cause>(c))),
                       ImGuiColorEditFlags_NoTooltip, ImVec2(12, 12));
    ImGui::SameLine();
    ImGui::TextUnformatted(std::string(name(static_cast<Cause>(c))).c_str());
    ImGui::SameLine();
  }
  ImGui::NewLine();
}

}  // namespace tpusim::gui
