// Draws a recorded timeline with ImGui's draw lists: one lane per unit, a time ruler, ops coloured
// by unit and stalls by cause (with a legend), wheel zoom anchored at the cursor, drag to pan, and
// a tooltip for the event under the mouse. Times stay int64 cycles; events narrower than a pixel
// are merged per lane (never across gaps wider than a pixel) so 1e5+ events draw quickly.
#pragma once
#include <cstdint>

#include "sim/timing/result.h"

namespace tpusim::gui {

struct TimelineState {
  int64_t from = 0, to = 0;  // visible cycles; to <= from: fit the whole run
  int64_t selected_step = -1;
};

void draw_timeline(const RunResult& r, TimelineState& state);

}  // namespace tpusim::gui
