#include "sim/timing/recorder.h"

#include <algorithm>

namespace tpusim {

void Recorder::move_into(RunResult& r) {
  r.units = std::move(units_);
  r.unit_busy = std::move(busy_);
  r.labels = std::move(labels_);
  // Stalls carry their cause as the label: give causes the first label ids.
  std::vector<std::string> labels;
  for (int c = 0; c < kNumCauses; ++c) labels.emplace_back(name(static_cast<Cause>(c)));
  for (auto& l : r.labels) labels.push_back(std::move(l));
  r.labels = std::move(labels);
  size_t total = 0;
  for (const auto& unit : events_) total += unit.size();
  r.events.clear();
  r.events.reserve(total);
  for (auto& unit : events_) {
    auto by_start = [](const TimelineEvent& a, const TimelineEvent& b) {
      return a.start < b.start;
    };
    if (!std::is_sorted(unit.begin(), unit.end(), by_start))
      std::stable_sort(unit.begin(), unit.end(), by_start);
    for (TimelineEvent& e : unit)
      if (e.cause == Cause::busy) e.label += kNumCauses;
    r.events.insert(r.events.end(), unit.begin(), unit.end());
    Timeline().swap(unit);  // freed as it goes: one copy of the timeline at most
  }
}

std::string_view name(Cause c) {
  switch (c) {
    case Cause::busy:
      return "busy";
    case Cause::dma_wait:
      return "dma_wait";
    case Cause::dependency:
      return "dependency";
    case Cause::mxu_fill_drain:
      return "mxu_fill_drain";
    case Cause::step_overhead:
      return "step_overhead";
    case Cause::loop_overhead:
      return "loop_overhead";
    case Cause::collective:
      return "collective";
    case Cause::dispatch:
      return "dispatch";
    case Cause::idle:
      return "idle";
  }
  return "?";
}

std::string_view name(UnitKind k) {
  switch (k) {
    case UnitKind::scalar:
      return "scalar";
    case UnitKind::mxu:
      return "mxu";
    case UnitKind::vpu:
      return "vpu";
    case UnitKind::eup:
      return "eup";
    case UnitKind::dma:
      return "dma";
    case UnitKind::hbm:
      return "hbm";
    case UnitKind::ici:
      return "ici";
  }
  return "?";
}

}  // namespace tpusim
