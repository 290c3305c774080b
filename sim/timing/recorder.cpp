#include "sim/timing/recorder.h"

#include <algorithm>

namespace tpusim {

std::vector<size_t> Recorder::event_marks() const {
  std::vector<size_t> marks;
  for (const Timeline& unit : events_) marks.push_back(unit.size());
  return marks;
}

void Recorder::events_since(const std::vector<size_t>& marks, int64_t t0,
                            std::vector<TimelineEvent>& events,
                            std::vector<std::string>& labels) const {
  std::unordered_map<int, int> local;  // this recorder's label id -> index into `labels`
  for (size_t u = 0; u < events_.size(); ++u)
    for (size_t i = marks[u]; i < events_[u].size(); ++i) {
      TimelineEvent e = events_[u][i];
      e.start -= t0;
      e.end -= t0;
      if (e.cause == Cause::busy) {  // a stall's label is its cause
        auto [it, fresh] = local.emplace(e.label, static_cast<int>(labels.size()));
        if (fresh) labels.push_back(labels_[e.label]);
        e.label = it->second;
      }
      events.push_back(e);
    }
}

void Recorder::replay_events(const std::vector<TimelineEvent>& events,
                             const std::vector<std::string>& labels, int64_t t0, int item,
                             int body) {
  if (!keep_events_) return;
  std::vector<int> ids;
  for (const std::string& text : labels) ids.push_back(label(text));
  for (TimelineEvent e : events) {
    e.start += t0;
    e.end += t0;
    if (e.cause == Cause::busy) e.label = ids[e.label];
    if (e.item >= 0) e.item = item;
    if (e.body >= 0) e.body = static_cast<int16_t>(body);
    events_[e.unit].push_back(e);
  }
}

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
    case Cause::vliw_schedule:
      return "vliw_schedule";
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
