// The layout of a recorded timeline, shared by the SVG writer (app/timeline_svg) and the GUI
// (gui/timeline_view): one colour table, lanes (one per unit with events, in unit order) with a
// per-lane index into the events, boxes that merge sub-pixel events per lane in integer cycles,
// and the ruler's ticks. Drawing a window visits only the events that can reach it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/timing/result.h"

namespace tpusim {

struct Rgb {
  uint8_t r, g, b;
};
Rgb cause_colour(Cause c);
Rgb unit_colour(UnitKind k);
// A busy event in its unit's colour, a stall in its cause's.
Rgb event_colour(const RunResult& r, const TimelineEvent& e);

struct LaneIndex {
  size_t begin = 0, end = 0;  // the unit's events in RunResult::events
  int64_t longest = 0;        // the longest of them, in cycles
};

struct TimelineLanes {
  std::vector<int> lane_of;       // per unit: its lane, -1 without events
  std::vector<int> unit_of;       // per lane: its unit
  std::vector<LaneIndex> events;  // per unit
  // Indices in RunResult::events of the spans the engine jumped over (kFastForwardedSpan).
  std::vector<size_t> fast_forwarded;
  int count() const { return static_cast<int>(unit_of.size()); }
};
// Events must be sorted by unit, then start (as the recorder leaves them).
TimelineLanes layout_lanes(const RunResult& r);

// The unit's events that can overlap [from, to]: [first, last).
std::pair<const TimelineEvent*, const TimelineEvent*> lane_events(const RunResult& r,
                                                                  const TimelineLanes& lanes,
                                                                  int unit, int64_t from,
                                                                  int64_t to);

// One drawn box: an event, or a run of merged sub-pixel events of one lane.
struct TimelineBox {
  int lane = 0;
  int64_t start = 0, end = 0;
  const TimelineEvent* first = nullptr;  // colour and title come from it
  int events = 1;
};
// Visits the boxes overlapping [from, to], lane by lane. Events narrower than `pixel` cycles
// join the previous box of their lane while the gap is at most a pixel and the box stays under
// three pixels, so a long run stays readable and cheap to draw.
void for_each_box(const RunResult& r, const TimelineLanes& lanes, int64_t from, int64_t to,
                  int64_t pixel, const std::function<void(const TimelineBox&)>& draw);

// Ruler ticks in microseconds over [from_us, to_us]: at most `max_ticks` at a 1-2-5 step.
std::vector<double> ruler_ticks_us(double from_us, double to_us, int max_ticks);

// A tick's label in the largest unit (ns, us, ms, s) in which the step is at least a tenth, with
// the decimals the step needs: "250 ns", "1.5 us", "1.2 ms", "12 ms".
std::string ruler_label(double t_us, double step_us);

}  // namespace tpusim
