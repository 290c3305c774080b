// Draws a recorded timeline with ImGui's draw lists, in the layout the SVG writer uses too
// (app/timeline_layout.h: lanes, colours, merged sub-pixel boxes, ruler): wheel zoom anchored at
// the cursor, drag to pan, a tooltip for the event under the mouse (found by binary search in its
// lane), right-click to highlight a grid step, a click on a kernel's box in the program lane to
// show its grid steps (the view fits the kernel).
#pragma once
#include <imgui.h>

#include <cstdint>
#include <string>

#include "app/critical_path.h"
#include "app/profile_compare.h"
#include "app/timeline_layout.h"
#include "sim/ir/program.h"
#include "sim/timing/result.h"

namespace tpusim::gui {

struct TimelineState {
  int64_t from = 0, to = 0;  // visible cycles; to <= from: fit `fit_cycles` (or the whole run)
  int64_t fit_cycles = 0;    // e.g. the longer of two compared runs, so both share one axis
  int64_t selected_step = -1;
  char find[64] = {};      // ops whose label contains it (any case) stay bright, others dim
  bool find_next = false;  // centre the view on the next match after the view's centre
  int opened_item = -1;    // the last program item clicked: the view shows its grid steps
  std::string stage;       // items of stages that do not start with it are dim ("": none)
  bool show_path = false;  // draw the critical paths given to draw_timeline
};

ImU32 im_colour(Rgb c);

// A box of a timeline's row: [x0, x1] filled within the row [y, y + height) (at least a pixel
// wide), its name inside when it fits (text `text_dy` below the row's top). Returns whether the
// mouse is over it.
struct NamedBox {
  float x0, x1, y, height;
  ImU32 fill, text = IM_COL32(255, 255, 255, 255);
  float text_dy = 3;
};
bool draw_named_box(ImDrawList* dl, const NamedBox& b, const std::string& name);

// What the user asked of a timeline's view this frame, as in Perfetto: the wheel or W/S zoom at
// the cursor, A/D pan by a fifth of the view, dragging pans, R shows the whole run again. Call it
// right after the timeline's InvisibleButton (dragging is that item's).
struct ViewInput {
  double at = 0;       // the cursor's place in the plot, 0 (left) .. 1 (right)
  double zoom = 1;     // the new span over the old, at `at`
  double pan = 0;      // the shift, as a share of the span
  bool reset = false;  // fit the whole run
};
ViewInput view_input(float plot_left, float plot_w, bool hovered);

// The shapes behind an event of a run of `p`, for its tooltip: an op's operands and result, or
// the block a DMA moves ("" when the program does not say).
std::string event_shapes(const Program& p, const TimelineEvent& e);

// What a timeline may show besides the run (each optional): `program` is what ran, for the shapes
// in tooltips; `paths` the critical paths of its kernel calls (app/critical_path.h), drawn when
// state.show_path as arrows from op to op across grid steps; `measured` a profile's ops on the
// same axis (app/profile_compare.h), a "measured" row under the program's, coloured by the
// prediction's error, which the tooltip gives.
struct TimelineExtras {
  const Program* program = nullptr;
  const std::vector<CriticalPath>* paths = nullptr;
  const std::vector<MeasuredSpan>* measured = nullptr;
};

// `id` keeps two timelines in one window apart (ImGui widget ids).
void draw_timeline(const RunResult& r, const TimelineLanes& lanes, TimelineState& state,
                   const char* id = "timeline", const TimelineExtras& extras = {});

}  // namespace tpusim::gui
