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
  for (TimelineEvent& e : events_)
    if (e.cause == Cause::busy) e.label += kNumCauses;
  std::stable_sort(events_.begin(), events_.end(),
                   [](const TimelineEvent& a, const TimelineEvent& b) {
                     return a.unit != b.unit ? a.unit < b.unit : a.start < b.start;
                   });
  r.events = std::move(events_);
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
