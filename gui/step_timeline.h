// The training step's timeline in the GUI: a scenario's predicted structure (app/step_structure.h)
// with a lane per layer kind and pass (forward, recompute, backward), the exposed collectives on
// their links (ICI, DCN), the optimizer and the host's dispatch. Names sit inside boxes where
// they fit; wheel or W/S zoom at the cursor, drag or A/D pan, R shows the whole step. Clicking a
// simulated part's span selects it: the window then shows that pass's kernels, as simulated for
// one layer of the kind, on the kernel timeline under it (the drill-down).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "app/chrome_trace.h"
#include "sim/timing/result.h"

namespace tpusim::gui {

struct StepTimelineState {
  double from_s = 0, to_s = 0;  // visible seconds; to_s <= from_s: the whole step
  double fit_s = 0;             // the whole step at least this long (a longer compared one)
  int selected = -1;            // the selected span
};

// The lane a span is drawn in ("gdn layer forward", "ICI collectives (exposed)", "optimizer").
std::string step_lane(const TraceSpan& s);
// The lanes in drawing order: dispatch, forward, recompute, backward, collectives, optimizer;
// within one of these in the order the spans first reach them.
std::vector<std::string> step_lanes(const std::vector<TraceSpan>& spans);

// The cycles [from, to) of `r`'s items whose stage is `s`'s part and pass ("gdn layer / remat:
// ..."), and how many there are; {0, 0, 0} when `s` stands for nothing simulated.
struct StageWindow {
  int64_t from = 0, to = 0;
  int items = 0;
};
StageWindow stage_window(const RunResult& r, const TraceSpan& s);

// Draws the lanes; returns the index of the span clicked this frame, or -1.
int draw_step_timeline(const std::vector<TraceSpan>& spans, StepTimelineState& st);

}  // namespace tpusim::gui
