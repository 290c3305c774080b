#include "app/timeline_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tpusim {

Rgb cause_colour(Cause c) {
  switch (c) {
    case Cause::busy:
      return {76, 120, 168};
    case Cause::dma_wait:
      return {228, 87, 86};
    case Cause::dependency:
      return {245, 133, 24};
    case Cause::mxu_fill_drain:
      return {238, 202, 59};
    case Cause::step_overhead:
      return {157, 117, 93};
    case Cause::loop_overhead:
      return {186, 176, 172};
    case Cause::collective:
      return {178, 121, 162};
    case Cause::dispatch:
      return {121, 112, 110};
    case Cause::idle:
      return {90, 90, 90};
    case Cause::vliw_schedule:
      return {114, 183, 178};
  }
  return {0, 0, 0};
}

Rgb unit_colour(UnitKind k) {
  switch (k) {
    case UnitKind::mxu:
      return {76, 120, 168};
    case UnitKind::vpu:
    case UnitKind::eup:
      return {84, 162, 75};
    case UnitKind::dma:
      return {242, 166, 90};
    case UnitKind::hbm:
      return {140, 140, 140};
    case UnitKind::ici:
      return {178, 121, 162};
    case UnitKind::scalar:
      return {157, 117, 93};
  }
  return {0, 0, 0};
}

Rgb event_colour(const RunResult& r, const TimelineEvent& e) {
  if (e.op == kFastForwardedSpan) return {70, 150, 170};
  return e.cause == Cause::busy ? unit_colour(r.units[e.unit].kind) : cause_colour(e.cause);
}

TimelineLanes layout_lanes(const RunResult& r) {
  TimelineLanes l;
  l.lane_of.assign(r.units.size(), -1);
  l.events.resize(r.units.size());
  for (size_t i = 0; i < r.events.size(); ++i) {
    const TimelineEvent& e = r.events[i];
    LaneIndex& x = l.events[e.unit];
    if (x.end == 0) x.begin = i;
    x.end = i + 1;
    x.longest = std::max(x.longest, e.end - e.start);
    if (e.op == kFastForwardedSpan) l.fast_forwarded.push_back(i);
  }
  for (size_t u = 0; u < r.units.size(); ++u)
    if (l.events[u].end > 0) {
      l.lane_of[u] = l.count();
      l.unit_of.push_back(static_cast<int>(u));
    }
  return l;
}

std::pair<const TimelineEvent*, const TimelineEvent*> lane_events(const RunResult& r,
                                                                  const TimelineLanes& lanes,
                                                                  int unit, int64_t from,
                                                                  int64_t to) {
  const LaneIndex& x = lanes.events[unit];
  const TimelineEvent *begin = r.events.data() + x.begin, *end = r.events.data() + x.end;
  // The first event that can reach the window starts at most `longest` before it.
  const TimelineEvent* first = std::lower_bound(
      begin, end, from - x.longest, [](const TimelineEvent& e, int64_t t) { return e.start < t; });
  const TimelineEvent* last = std::upper_bound(
      first, end, to, [](int64_t t, const TimelineEvent& e) { return t < e.start; });
  return {first, last};
}

void for_each_box(const RunResult& r, const TimelineLanes& lanes, int64_t from, int64_t to,
                  int64_t pixel, const std::function<void(const TimelineBox&)>& draw) {
  for (int lane = 0; lane < lanes.count(); ++lane) {
    TimelineBox box;
    box.first = nullptr;
    const auto [first, last] = lane_events(r, lanes, lanes.unit_of[lane], from, to);
    for (const TimelineEvent* e = first; e != last; ++e) {
      if (e->end < from) continue;
      const bool narrow = e->end - e->start < pixel;
      if (box.first && narrow && e->start - box.end <= pixel && e->end - box.start < 3 * pixel) {
        box.end = std::max(box.end, e->end);
        ++box.events;
        continue;
      }
      if (box.first) draw(box);
      box = {lane, e->start, e->end, e, 1};
    }
    if (box.first) draw(box);
  }
}

std::vector<double> ruler_ticks_us(double from_us, double to_us, int max_ticks) {
  const double span = to_us - from_us;
  double step = std::pow(10.0, std::floor(std::log10(std::max(span, 1e-9) / max_ticks)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (span / (step * m) <= max_ticks) {
      step *= m;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(from_us / step) * step; t <= to_us + 1e-9 * step; t += step)
    ticks.push_back(t);
  return ticks;
}

std::string ruler_label(double t_us, double step_us) {
  struct Unit {
    const char* name;
    double per_us;
  };
  // The largest unit in which the step is at least a tenth: at most one decimal.
  const Unit unit = step_us >= 1e5   ? Unit{"s", 1e-6}
                    : step_us >= 1e2 ? Unit{"ms", 1e-3}
                    : step_us >= 0.1 ? Unit{"us", 1}
                                     : Unit{"ns", 1e3};
  const double step = step_us * unit.per_us;
  const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  const double value = t_us * unit.per_us;
  if (std::abs(value) < 0.5 * step) return fmt::format("0 {}", unit.name);  // not "-0.0"
  return fmt::format("{:.{}f} {}", value, decimals, unit.name);
}

}  // namespace tpusim
