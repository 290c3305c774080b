#include "gui/timeline_view.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gui/em.h"

namespace tpusim::gui {
namespace {

float label_width() { return 90 * em(); }
float lane_height() { return 20 * em(); }
float ruler_height() { return 22 * em(); }
constexpr int kRulerTicks = 8;

std::string shape_text(const Value& v) {
  return to_string(v.shape) + " " + std::string(name(v.dtype));
}

const Kernel* kernel_of(const Program& p, const TimelineEvent& e) {
  if (e.item < 0 || e.item >= static_cast<int>(p.items.size()) || e.body < 0) return nullptr;
  const ProgramItem& it = p.items[e.item];
  if (const auto* call = std::get_if<KernelCall>(&it.what)) return call->kernel.get();
  if (const auto* loop = std::get_if<Loop>(&it.what))
    if (e.body < static_cast<int>(loop->body.size())) return loop->body[e.body].get();
  return nullptr;
}

// Screen geometry of one timeline: cycles to x.
struct Frame {
  ImVec2 origin;
  float width, plot_w;
  int64_t from, span;
  float x_of(int64_t c) const {
    return origin.x + label_width() + static_cast<float>(double(c - from) / span * plot_w);
  }
  int item_rows = 0;      // the program's own rows above the units' lanes
  int measured_row = -1;  // among them, the measured profile's ops
  float item_y(int row) const { return origin.y + ruler_height() + row * lane_height(); }
  float lane_y(int lane) const { return item_y(item_rows + lane); }
};

bool is_collective(const ItemResult& item) { return item.kernel < 0; }

// Rows for the program's items: its kernel calls and loops, then its collectives if it has any.
int item_rows(const RunResult& r) {
  if (r.items.empty()) return 0;
  return std::any_of(r.items.begin(), r.items.end(), is_collective) ? 2 : 1;
}

// The program's items as named boxes (a name shown where it fits); returns the hovered item.
const ItemResult* draw_items(ImDrawList* dl, const RunResult& r, const Frame& f,
                             const std::string& stage) {
  const char* names[] = {"program", "collectives"};
  const int program_rows = f.measured_row >= 0 ? f.measured_row : f.item_rows;
  for (int row = 0; row < program_rows; ++row)
    dl->AddText(ImVec2(f.origin.x + 4, f.item_y(row) + 3), IM_COL32(220, 220, 220, 255),
                names[row]);
  const ItemResult* hovered = nullptr;
  const float left = f.origin.x + label_width(), right = f.origin.x + f.width;
  for (size_t i = 0; i < r.items.size(); ++i) {
    const ItemResult& item = r.items[i];
    const int row = is_collective(item) ? 1 : 0;
    const float x0 = std::max(f.x_of(item.start), left),
                x1 = std::min(f.x_of(item.start + item.cycles), right);
    if (x1 < left || x0 > right || x1 < x0) continue;
    const float y = f.item_y(row);
    const ImU32 colour = !item.stage.starts_with(stage) ? IM_COL32(55, 55, 60, 255)
                         : row == 1                     ? im_colour(cause_colour(Cause::collective))
                         : i % 2                        ? IM_COL32(70, 90, 130, 255)
                                                        : IM_COL32(90, 115, 160, 255);
    if (draw_named_box(dl, {x0, x1, y, lane_height(), colour}, item.name)) hovered = &item;
  }
  return hovered;
}

// Within this error a measured op is drawn green, beyond it orange; unmatched ops grey.
constexpr double kCloseOpErrorPct = 25;

// The measured profile's ops in their row; returns the one under the mouse.
const MeasuredSpan* draw_measured(ImDrawList* dl, const RunResult& r, const Frame& f,
                                  const std::vector<MeasuredSpan>& spans) {
  const float y = f.item_y(f.measured_row);
  dl->AddText(ImVec2(f.origin.x + 4, y + 3), IM_COL32(220, 220, 220, 255), "measured");
  const float left = f.origin.x + label_width(), right = f.origin.x + f.width;
  const MeasuredSpan* hovered = nullptr;
  for (const MeasuredSpan& s : spans) {
    const float x0 = std::max(f.x_of(static_cast<int64_t>(s.start_s * r.clock_hz)), left),
                x1 = std::min(f.x_of(static_cast<int64_t>((s.start_s + s.duration_s) * r.clock_hz)),
                              right);
    if (x1 < left || x0 > right) continue;
    const ImU32 colour = !s.matched ? IM_COL32(110, 110, 115, 255)
                         : std::abs(s.error_pct()) <= kCloseOpErrorPct
                             ? IM_COL32(90, 170, 100, 255)
                             : IM_COL32(215, 120, 60, 255);
    if (draw_named_box(dl, {x0, x1, y, lane_height(), colour}, s.name)) hovered = &s;
  }
  return hovered;
}

void measured_tooltip(const MeasuredSpan& s) {
  ImGui::BeginTooltip();
  ImGui::Text("%s (measured)", s.name.c_str());
  ImGui::Text("measured %.3f us", s.duration_s * 1e6);
  if (s.matched)
    ImGui::Text("predicted %.3f us (%+.1f%%)", s.predicted_s * 1e6, s.error_pct());
  else
    ImGui::TextUnformatted("not in the simulated program");
  ImGui::EndTooltip();
}

void item_tooltip(const RunResult& r, const ItemResult& item) {
  const double us_per_cycle = 1e6 / r.clock_hz;
  ImGui::BeginTooltip();
  ImGui::Text("%s", item.name.c_str());
  if (item.stage != item.name) ImGui::Text("stage %s", item.stage.c_str());
  ImGui::Text("%.3f .. %.3f us (%.3f us)", item.start * us_per_cycle,
              (item.start + item.cycles) * us_per_cycle, item.cycles * us_per_cycle);
  if (item.kernel >= 0) ImGui::TextUnformatted("click: its grid steps");
  ImGui::EndTooltip();
}

// Zooms by `factor` keeping the point at fraction `at` of the plot where it is.
void zoom(const RunResult& r, const Frame& f, double at, double factor, TimelineState& st) {
  const int64_t pivot = st.from + static_cast<int64_t>(at * f.span);
  const int64_t new_span = std::clamp<int64_t>(static_cast<int64_t>(f.span * factor), 16,
                                               std::max<int64_t>(16, r.cycles * 2));
  st.from = pivot - static_cast<int64_t>(at * new_span);
  st.to = st.from + new_span;
}

void zoom_and_pan(const RunResult& r, const Frame& f, bool hovered, TimelineState& st) {
  const ViewInput in = view_input(f.origin.x + label_width(), f.plot_w, hovered);
  if (in.reset) {
    st.from = st.to = 0;  // fit again
    return;
  }
  if (in.zoom != 1) zoom(r, f, in.at, in.zoom, st);
  const int64_t shift = static_cast<int64_t>(in.pan * (st.to - st.from));
  st.from += shift;
  st.to += shift;
}

void ruler(ImDrawList* dl, const RunResult& r, const Frame& f, float height) {
  const double us_per_cycle = 1e6 / r.clock_hz;
  const double from_us = f.from * us_per_cycle, to_us = (f.from + f.span) * us_per_cycle;
  const std::vector<double> ticks = ruler_ticks_us(from_us, to_us, kRulerTicks);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : to_us - from_us;
  for (double t : ticks) {
    const float x = f.x_of(static_cast<int64_t>(t / us_per_cycle));
    dl->AddLine(ImVec2(x, f.origin.y + ruler_height() - 6), ImVec2(x, f.origin.y + height),
                IM_COL32(60, 60, 64, 255));
    dl->AddText(ImVec2(x + 2, f.origin.y + 2), IM_COL32(200, 200, 200, 255),
                ruler_label(t, step).c_str());
  }
}

// Which of the run's labels contain `find`, ignoring case (empty when nothing is searched).
std::vector<bool> matching_labels(const RunResult& r, const char* find) {
  std::vector<bool> match;
  if (!find[0]) return match;
  std::string want(find);
  std::transform(want.begin(), want.end(), want.begin(), ::tolower);
  for (std::string label : r.labels) {
    std::transform(label.begin(), label.end(), label.begin(), ::tolower);
    match.push_back(label.find(want) != std::string::npos);
  }
  return match;
}

// Centres the view on the first match that starts after the view's centre (wrapping around).
void centre_on_next(const RunResult& r, const std::vector<bool>& match, TimelineState& st) {
  const int64_t span = st.to - st.from, centre = st.from + span / 2;
  const TimelineEvent *after = nullptr, *first = nullptr;  // events are kept per unit, not sorted
  for (const TimelineEvent& e : r.events) {
    if (!match[e.label]) continue;
    if (!first || e.start < first->start) first = &e;
    if (e.start > centre && (!after || e.start < after->start)) after = &e;
  }
  const TimelineEvent* next = after ? after : first;
  if (!next) return;
  st.from = next->start - span / 2;
  st.to = st.from + span;
}

// The event under the mouse: binary search in the hovered lane only.
const TimelineEvent* hovered_event(const RunResult& r, const TimelineLanes& lanes, const Frame& f) {
  const ImVec2 m = ImGui::GetIO().MousePos;
  const int lane = static_cast<int>((m.y - f.lane_y(0)) / lane_height());
  if (m.y < f.lane_y(0) || lane >= lanes.count()) return nullptr;
  const auto [first, last] = lane_events(r, lanes, lanes.unit_of[lane], f.from, f.from + f.span);
  for (const TimelineEvent* e = first; e != last; ++e)
    if (m.x >= f.x_of(e->start) - 1 && m.x <= f.x_of(e->end) + 1) return e;
  return nullptr;
}

void tooltip(const RunResult& r, const TimelineEvent& e, const Program* program) {
  const double us_per_cycle = 1e6 / r.clock_hz;
  ImGui::BeginTooltip();
  ImGui::Text("%s", r.labels[e.label].c_str());
  ImGui::Text("unit %s", r.units[e.unit].name.c_str());
  if (e.item >= 0) ImGui::Text("item %s", r.items[e.item].name.c_str());
  if (program)
    if (const std::string s = event_shapes(*program, e); !s.empty())
      ImGui::Text("shapes %s", s.c_str());
  if (e.step >= 0) ImGui::Text("grid step %lld", static_cast<long long>(e.step));
  ImGui::Text("%.3f .. %.3f us (%lld cycles)", e.start * us_per_cycle, e.end * us_per_cycle,
              static_cast<long long>(e.end - e.start));
  if (e.cause != Cause::busy) ImGui::Text("stall: %s", std::string(name(e.cause)).c_str());
  ImGui::EndTooltip();
}

// The critical paths as arrows between the ends and starts of their ops, with the ops outlined;
// left out when the view holds more edges than can be told apart.
void draw_paths(ImDrawList* dl, const RunResult& r, const TimelineLanes& lanes, const Frame& f,
                const std::vector<CriticalPath>& paths) {
  constexpr size_t kMaxEdges = 4000;
  const ImU32 colour = IM_COL32(255, 255, 255, 230);
  const int64_t to = f.from + f.span;
  auto centre = [&](const TimelineEvent& e) {
    return f.lane_y(lanes.lane_of[e.unit]) + lane_height() / 2;
  };
  std::vector<const PathEdge*> shown;
  for (const CriticalPath& path : paths)
    for (const PathEdge& edge : path.edges)
      if (r.events[edge.from].end <= to && r.events[edge.to].start >= f.from)
        shown.push_back(&edge);
  if (shown.size() > kMaxEdges) return;
  for (const PathEdge* edge : shown) {
    const TimelineEvent &a = r.events[edge->from], &b = r.events[edge->to];
    const ImVec2 p0(f.x_of(a.end), centre(a)), p1(f.x_of(b.start), centre(b));
    if (std::abs(p1.x - p0.x) + std::abs(p1.y - p0.y) < 4) continue;  // within a pixel or two
    dl->AddLine(p0, p1, colour, edge->data ? 1.5f : 1.0f);
    const float dir = p1.x >= p0.x ? 1.0f : -1.0f;  // an arrowhead pointing along the edge
    dl->AddTriangleFilled(p1, ImVec2(p1.x - 5 * dir, p1.y - 3), ImVec2(p1.x - 5 * dir, p1.y + 3),
                          colour);
  }
  for (const CriticalPath& path : paths)
    for (size_t i : path.events) {
      const TimelineEvent& e = r.events[i];
      if (e.end < f.from || e.start > to) continue;
      const float y = f.lane_y(lanes.lane_of[e.unit]);
      if (f.x_of(e.end) - f.x_of(e.start) < 3) continue;  // too narrow to outline
      dl->AddRect(ImVec2(f.x_of(e.start), y + 2), ImVec2(f.x_of(e.end) + 1, y + lane_height() - 2),
                  colour);
    }
}

void legend() {
  ImGui::TextUnformatted("busy:");
  ImGui::SameLine();
  const std::pair<UnitKind, const char*> units[] = {
      {UnitKind::mxu, "mxu"}, {UnitKind::vpu, "vpu, eup"},  {UnitKind::dma, "dma"},
      {UnitKind::hbm, "hbm"}, {UnitKind::scalar, "scalar"}, {UnitKind::ici, "ici"}};
  for (const auto& [kind, label] : units) {
    ImGui::ColorButton(label, ImGui::ColorConvertU32ToFloat4(im_colour(unit_colour(kind))),
                       ImGuiColorEditFlags_NoTooltip, ImVec2(12, 12));
    ImGui::SameLine();
    ImGui::TextUnformatted(label);
    ImGui::SameLine();
  }
  ImGui::TextUnformatted("  stalls:");
  ImGui::SameLine();
  for (int c = 1; c < kNumCauses; ++c) {
    const auto cause = static_cast<Cause>(c);
    ImGui::ColorButton(std::string(name(cause)).c_str(),
                       ImGui::ColorConvertU32ToFloat4(im_colour(cause_colour(cause))),
                       ImGuiColorEditFlags_NoTooltip, ImVec2(12, 12));
    ImGui::SameLine();
    ImGui::TextUnformatted(std::string(name(cause)).c_str());
    ImGui::SameLine();
  }
  ImGui::ColorButton("fast-forwarded", ImGui::ColorConvertU32ToFloat4(IM_COL32(70, 150, 170, 255)),
                     ImGuiColorEditFlags_NoTooltip, ImVec2(12, 12));
  ImGui::SameLine();
  ImGui::TextUnformatted("fast-forwarded (repeats)");
  ImGui::NewLine();
}

// The tooltip of the event or item under the mouse; right-click an op to highlight its grid step,
// click a kernel's box to fit the view to it.
void hover_and_click(const RunResult& r, const TimelineLanes& lanes, const Frame& f, bool hovered,
                     const ItemResult* hovered_item, const Program* program, TimelineState& st) {
  if (const TimelineEvent* e = hovered ? hovered_event(r, lanes, f) : nullptr) {
    tooltip(r, *e, program);
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Right)) st.selected_step = e->step;
  } else if (hovered && hovered_item) {
    item_tooltip(r, *hovered_item);
    // A click, not the end of a drag: the kernel's grid steps fill the view.
    if (ImGui::IsMouseReleased(ImGuiMouseButton_Left) &&
        ImGui::GetIO().MouseDragMaxDistanceSqr[ImGuiMouseButton_Left] < 16) {
      st.opened_item = static_cast<int>(hovered_item - r.items.data());
      const int64_t margin = std::max<int64_t>(1, hovered_item->cycles / 50);
      st.from = hovered_item->start - margin;
      st.to = hovered_item->start + hovered_item->cycles + margin;
    }
  }
}

}  // namespace

ImU32 im_colour(Rgb c) { return IM_COL32(c.r, c.g, c.b, 255); }

bool draw_named_box(ImDrawList* dl, const NamedBox& b, const std::string& name) {
  dl->AddRectFilled(ImVec2(b.x0, b.y + 2), ImVec2(std::max(b.x1, b.x0 + 1), b.y + b.height - 2),
                    b.fill);
  if (ImGui::CalcTextSize(name.c_str()).x + 6 < b.x1 - b.x0)
    dl->AddText(ImVec2(b.x0 + 3, b.y + b.text_dy), b.text, name.c_str());
  const ImVec2 m = ImGui::GetIO().MousePos;
  return m.y >= b.y && m.y < b.y + b.height && m.x >= b.x0 - 1 && m.x <= b.x1 + 1;
}

ViewInput view_input(float plot_left, float plot_w, bool hovered) {
  const ImGuiIO& io = ImGui::GetIO();
  ViewInput in;
  in.at = std::clamp((io.MousePos.x - plot_left) / plot_w, 0.0f, 1.0f);
  if (hovered && io.MouseWheel != 0) in.zoom = io.MouseWheel > 0 ? 0.8 : 1.25;
  if (hovered && !io.WantTextInput) {
    // Dear ImGui 1.86 indexes keys by the backend's codes; GLFW's for letters are their
    // upper-case ASCII, so these are physical keys, as in Perfetto.
    if (ImGui::IsKeyPressed('W')) in.zoom = 0.8;
    if (ImGui::IsKeyPressed('S')) in.zoom = 1.25;
    if (ImGui::IsKeyPressed('A')) in.pan -= 0.2;
    if (ImGui::IsKeyPressed('D')) in.pan += 0.2;
    in.reset = ImGui::IsKeyPressed('R');
  }
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f))
    in.pan -= io.MouseDelta.x / plot_w;
  return in;
}

std::string event_shapes(const Program& p, const TimelineEvent& e) {
  if (e.cause != Cause::busy || e.item < 0 || e.item >= static_cast<int>(p.items.size())) return "";
  if (const auto* c = std::get_if<Collective>(&p.items[e.item].what))
    return std::to_string(c->bytes) + " B over " + c->axis.name + " (" +
           std::to_string(c->axis.size) + " chips)";
  const Kernel* k = kernel_of(p, e);
  if (!k) return "";
  if (e.op >= 0 && e.op < static_cast<int>(k->body.size())) {
    const Op& op = k->body[e.op];
    std::string in;
    for (ValueId v : op.inputs) in += (in.empty() ? "" : ", ") + shape_text(k->values.at(v));
    return (in.empty() ? "" : in + " -> ") + shape_text(k->values.at(op.output));
  }
  const int nin = static_cast<int>(k->inputs.size());
  if (e.operand >= 0 && e.operand < nin + static_cast<int>(k->outputs.size())) {
    const BlockSpec& s = e.operand < nin ? k->inputs[e.operand] : k->outputs[e.operand - nin];
    return "block " + to_string(s.block_shape) + " of " + to_string(s.array.shape) + " " +
           std::string(name(s.array.dtype));
  }
  return "";
}

void draw_timeline(const RunResult& r, const TimelineLanes& lanes, TimelineState& st,
                   const char* id, const TimelineExtras& extras) {
  const Program* program = extras.program;
  if (st.to <= st.from)
    st.from = 0, st.to = std::max<int64_t>(1, std::max(st.fit_cycles, r.cycles));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  Frame f;
  f.origin = ImGui::GetCursorScreenPos();
  f.width = std::max(100.0f, ImGui::GetContentRegionAvail().x);
  f.plot_w = f.width - label_width();
  f.item_rows = item_rows(r);
  if (extras.measured) f.measured_row = f.item_rows++;
  const float height = ruler_height() + (f.item_rows + lanes.count()) * lane_height();
  ImGui::InvisibleButton(id, ImVec2(f.width, std::max(height, 40.0f)));
  const bool hovered = ImGui::IsItemHovered();
  f.from = st.from;
  f.span = std::max<int64_t>(1, st.to - st.from);
  zoom_and_pan(r, f, hovered, st);
  if (st.find_next && st.find[0]) centre_on_next(r, matching_labels(r, st.find), st);
  f.from = st.from;
  f.span = std::max<int64_t>(1, st.to - st.from);

  dl->AddRectFilled(f.origin, ImVec2(f.origin.x + f.width, f.origin.y + height),
                    IM_COL32(25, 25, 28, 255));
  ruler(dl, r, f, height);
  const ItemResult* hovered_item = draw_items(dl, r, f, st.stage);
  for (int lane = 0; lane < lanes.count(); ++lane)
    dl->AddText(ImVec2(f.origin.x + 4, f.lane_y(lane) + 3), IM_COL32(220, 220, 220, 255),
                r.units[lanes.unit_of[lane]].name.c_str());
  const int64_t pixel =
      std::max<int64_t>(1, f.span / static_cast<int64_t>(std::max(1.0f, f.plot_w)));
  const std::vector<bool> match = matching_labels(r, st.find);
  for_each_box(r, lanes, st.from, st.to, pixel, [&](const TimelineBox& b) {
    const TimelineEvent& e = *b.first;
    ImU32 colour = st.selected_step >= 0 && e.step == st.selected_step
                       ? IM_COL32(255, 255, 255, 255)
                       : im_colour(event_colour(r, e));
    if (!match.empty() && !match[e.label]) colour = IM_COL32(55, 55, 60, 255);  // not found
    const float y = f.lane_y(b.lane);
    const float x0 = std::max(f.x_of(b.start), f.origin.x + label_width()),
                x1 = std::min(f.x_of(b.end), f.origin.x + f.width);
    if (x1 >= x0)
      dl->AddRectFilled(ImVec2(x0, y + 3), ImVec2(std::max(x1, x0 + 1), y + lane_height() - 3),
                        colour);
  });
  // A span the engine jumped over (its steps repeat the ones before it) is a band across the
  // lanes of its core and the shared ones.
  for (size_t i : lanes.fast_forwarded) {
    const TimelineEvent& e = r.events[i];
    if (e.end < st.from || e.start > st.to) continue;
    const float x0 = std::max(f.x_of(e.start), f.origin.x + label_width()),
                x1 = std::min(f.x_of(e.end), f.origin.x + f.width);
    const int core = r.units[e.unit].core;
    for (int lane = 0; lane < lanes.count(); ++lane) {
      const int c = r.units[lanes.unit_of[lane]].core;
      if (c != core && c >= 0) continue;
      const float y = f.lane_y(lane);
      dl->AddRectFilled(ImVec2(x0, y + 3), ImVec2(std::max(x1, x0 + 1), y + lane_height() - 3),
                        IM_COL32(70, 150, 170, 140));
    }
    if (x1 - x0 > 140)
      dl->AddText(ImVec2(x0 + 4, f.lane_y(lanes.lane_of[e.unit]) + 3), IM_COL32(255, 255, 255, 255),
                  "fast-forwarded");
  }
  const MeasuredSpan* hovered_measured =
      extras.measured ? draw_measured(dl, r, f, *extras.measured) : nullptr;
  if (const auto* paths = extras.paths; paths && st.show_path) {
    dl->PushClipRect(ImVec2(f.origin.x + label_width(), f.origin.y),
                     ImVec2(f.origin.x + f.width, f.origin.y + height), true);
    draw_paths(dl, r, lanes, f, *paths);
    dl->PopClipRect();
  }
  if (hovered && hovered_measured)
    measured_tooltip(*hovered_measured);
  else
    hover_and_click(r, lanes, f, hovered, hovered_item, program, st);
  legend();
}

}  // namespace tpusim::gui
