// Draws a recorded timeline with ImGui's draw lists: one lane per unit, a time ruler, ops coloured
// by unit and stalls by cause (with a legend), wheel zoom anchored at the cursor, drag to pan, and
// a tooltip for the event under the mouse. Times stay int64 cycles; events narrower than a pixel
// are merged per lane (never across gaps wider than a pixel) so 1e5+ events draw quickly.
#pragma once
#include <imgui.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/ir/program.h"
#include "sim/timing/result.h"

namespace tpusim::gui {

struct TimelineState {
  int64_t from = 0, to = 0;  // visible cycles; to <= from: fit `fit_cycles` (or the whole run)
  int64_t fit_cycles = 0;    // e.g. the longer of two compared runs, so both share one axis
  int64_t selected_step = -1;
};

// The colour of a stall cause (busy: the unit's own colour), shared with the totals' bar.
ImU32 cause_colour(Cause c);

// Where each unit's events sit in RunResult::events (sorted by unit, then start) and the longest
// of them, so a zoomed-in frame binary-searches its window instead of scanning every event.
struct LaneIndex {
  size_t begin = 0, end = 0;
  int64_t longest = 0;
};
std::vector<LaneIndex> index_lanes(const RunResult& r);

// The shapes behind an event, for its tooltip: an op's operands and result, or the block a DMA
// moves ("" when the program does not say).
std::string event_shapes(const Program& p, int item, const std::string& label);

// `id` keeps two timelines in one window apart (ImGui widget ids); `program` (optional) is what
// ran, for the shapes in tooltips.
void draw_timeline(const RunResult& r, const std::vector<LaneIndex>& lanes, TimelineState& state,
                   const char* id = "timeline", const Program* program = nullptr);

}  // namespace tpusim::gui
