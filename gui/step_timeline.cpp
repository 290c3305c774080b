#include "gui/step_timeline.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>

#include "app/timeline_layout.h"
#include "gui/em.h"
#include "gui/timeline_view.h"

namespace tpusim::gui {
namespace {

float label_width() { return 170 * em(); }
float lane_height() { return 18 * em(); }
float ruler_height() { return 22 * em(); }
constexpr int kRulerTicks = 8;
constexpr const char* kExposedTrack = "exposed collectives";

// Where a lane goes: dispatch, forward, recompute, backward, collectives, optimizer.
int lane_rank(const TraceSpan& s) {
  if (s.track == kExposedTrack) return 4;
  if (s.pass == "fwd") return 1;
  if (s.pass == "remat") return 2;
  if (s.pass == "bwd") return 3;
  return s.name == "host dispatch" ? 0 : 5;
}

ImU32 span_colour(const TraceSpan& s, bool odd) {
  const int shade = odd ? 20 : 0;  // neighbouring layers in one lane stay apart
  if (s.track == kExposedTrack) return im_colour(cause_colour(Cause::collective));
  if (s.pass == "fwd") return IM_COL32(70 + shade, 120 + shade, 190 + shade, 255);
  if (s.pass == "remat") return IM_COL32(190 + shade, 135 + shade, 60 + shade, 255);
  if (s.pass == "bwd") return IM_COL32(70 + shade, 150 + shade, 95 + shade, 255);
  return im_colour(cause_colour(s.name == "host dispatch" ? Cause::dispatch : Cause::idle));
}

// Screen geometry: seconds to x.
struct Frame {
  ImVec2 origin;
  float width = 0, plot_w = 0;
  double from = 0, span = 1;
  float x_of(double t) const {
    return origin.x + label_width() + static_cast<float>((t - from) / span * plot_w);
  }
  float lane_y(int lane) const { return origin.y + ruler_height() + lane * lane_height(); }
};

void zoom(double step_s, double at, double factor, StepTimelineState& st) {
  const double span = st.to_s - st.from_s, pivot = st.from_s + at * span;
  const double new_span = std::clamp(span * factor, step_s * 1e-6, step_s * 2);
  st.from_s = pivot - at * new_span;
  st.to_s = st.from_s + new_span;
}

void zoom_and_pan(double step_s, const Frame& f, bool hovered, StepTimelineState& st) {
  const ViewInput in = view_input(f.origin.x + label_width(), f.plot_w, hovered);
  if (in.reset) {
    st.from_s = st.to_s = 0;  // the whole step
    return;
  }
  if (in.zoom != 1) zoom(step_s, in.at, in.zoom, st);
  const double shift = in.pan * (st.to_s - st.from_s);
  st.from_s += shift;
  st.to_s += shift;
}

void ruler(ImDrawList* dl, const Frame& f, float height) {
  const std::vector<double> ticks =
      ruler_ticks_us(f.from * 1e6, (f.from + f.span) * 1e6, kRulerTicks);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : f.span * 1e6;
  for (double t : ticks) {
    const float x = f.x_of(t * 1e-6);
    dl->AddLine(ImVec2(x, f.origin.y + ruler_height() - 6), ImVec2(x, f.origin.y + height),
                IM_COL32(60, 60, 64, 255));
    dl->AddText(ImVec2(x + 2, f.origin.y + 2), IM_COL32(200, 200, 200, 255),
                ruler_label(t, step).c_str());
  }
}

void span_tooltip(const TraceSpan& s) {
  ImGui::BeginTooltip();
  ImGui::TextUnformatted(s.name.c_str());
  ImGui::Text("%.3f .. %.3f ms (%.3f ms)", s.start_s * 1e3, (s.start_s + s.duration_s) * 1e3,
              s.duration_s * 1e3);
  if (!s.part.empty() && s.track != kExposedTrack && !s.part.starts_with("measured"))
    ImGui::TextUnformatted("click: its kernels below (one layer of the kind, as simulated)");
  else if (s.track == kExposedTrack)
    ImGui::TextUnformatted("collectives are costed analytically, not simulated kernel by kernel");
  ImGui::EndTooltip();
}

}  // namespace

std::string step_lane(const TraceSpan& s) {
  if (s.track == kExposedTrack)
    return s.name.find("(DCN)") != std::string::npos ? "DCN all-reduce (exposed)"
                                                     : "ICI collectives (exposed)";
  if (s.pass == "fwd") return s.part + " forward";
  if (s.pass == "remat") return s.part + " recompute";
  if (s.pass == "bwd") return s.part + " backward";
  return s.part.empty() ? s.name : s.part;  // a measured profile's lanes are named by their part
}

std::vector<std::string> step_lanes(const std::vector<TraceSpan>& spans) {
  std::vector<std::pair<int, std::string>> lanes;  // rank, name; in order of first appearance
  for (const TraceSpan& s : spans) {
    const std::string lane = step_lane(s);
    if (std::none_of(lanes.begin(), lanes.end(), [&](const auto& l) { return l.second == lane; }))
      lanes.emplace_back(lane_rank(s), lane);
  }
  std::stable_sort(lanes.begin(), lanes.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (auto& l : lanes) out.push_back(std::move(l.second));
  return out;
}

StageWindow stage_window(const RunResult& r, const TraceSpan& s) {
  StageWindow w;
  if (s.part.empty() || s.pass.empty()) return w;
  const std::string prefix = s.part + " / " + s.pass;
  for (const ItemResult& item : r.items) {
    if (!item.stage.starts_with(prefix)) continue;
    w.from = w.items ? std::min(w.from, item.start) : item.start;
    w.to = std::max(w.to, item.start + item.cycles);
    ++w.items;
  }
  return w;
}

int draw_step_timeline(const std::vector<TraceSpan>& spans, StepTimelineState& st) {
  if (spans.empty()) return -1;
  const double step_s = spans.back().start_s + spans.back().duration_s;
  if (st.to_s <= st.from_s) st.from_s = 0, st.to_s = std::max(step_s, st.fit_s);
  const std::vector<std::string> lanes = step_lanes(spans);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  Frame f;
  f.origin = ImGui::GetCursorScreenPos();
  f.width = std::max(200.0f, ImGui::GetContentRegionAvail().x);
  f.plot_w = f.width - label_width();
  const float height = ruler_height() + lanes.size() * lane_height();
  ImGui::InvisibleButton("step timeline", ImVec2(f.width, height));
  const bool hovered = ImGui::IsItemHovered();
  f.from = st.from_s, f.span = std::max(1e-12, st.to_s - st.from_s);
  zoom_and_pan(step_s, f, hovered, st);
  f.from = st.from_s, f.span = std::max(1e-12, st.to_s - st.from_s);

  dl->AddRectFilled(f.origin, ImVec2(f.origin.x + f.width, f.origin.y + height),
                    IM_COL32(25, 25, 28, 255));
  ruler(dl, f, height);
  for (size_t l = 0; l < lanes.size(); ++l)
    dl->AddText(ImVec2(f.origin.x + 4, f.lane_y(static_cast<int>(l)) + 2),
                IM_COL32(220, 220, 220, 255), lanes[l].c_str());
  const float left = f.origin.x + label_width(), right = f.origin.x + f.width;
  int hovered_span = -1;
  std::vector<int> drawn_in_lane(lanes.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    const TraceSpan& s = spans[i];
    const int lane =
        static_cast<int>(std::find(lanes.begin(), lanes.end(), step_lane(s)) - lanes.begin());
    const bool odd = drawn_in_lane[lane]++ % 2;
    const float x0 = std::max(f.x_of(s.start_s), left),
                x1 = std::min(f.x_of(s.start_s + s.duration_s), right);
    if (x1 < left || x0 > right) continue;
    const float y = f.lane_y(lane);
    const bool selected = static_cast<int>(i) == st.selected;
    const NamedBox box{x0,
                       x1,
                       y,
                       lane_height(),
                       selected ? IM_COL32(255, 255, 255, 255) : span_colour(s, odd),
                       selected ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255),
                       2};
    if (draw_named_box(dl, box, s.name) && hovered) hovered_span = static_cast<int>(i);
  }
  if (hovered_span < 0) return -1;
  span_tooltip(spans[hovered_span]);
  // A click, not the end of a drag.
  const bool clicked = ImGui::IsMouseReleased(ImGuiMouseButton_Left) &&
                       ImGui::GetIO().MouseDragMaxDistanceSqr[ImGuiMouseButton_Left] < 16;
  if (!clicked) return -1;
  st.selected = hovered_span;
  return hovered_span;
}

}  // namespace tpusim::gui
