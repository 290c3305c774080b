// The engine's observer: units report busy intervals and stalls here. It always keeps per-unit
// busy totals; it keeps timeline events only when recording was requested.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/timing/result.h"

namespace tpusim {

// What a busy interval belongs to (TimelineEvent's fields of the same names).
struct EventTag {
  int item = -1;
  int64_t step = -1;
  int body = -1, op = -1, operand = -1;
};

class Recorder {
 public:
  explicit Recorder(bool keep_events) : keep_events_(keep_events) {}

  int add_unit(std::string name, UnitKind kind, int core) {
    units_.push_back({std::move(name), kind, core});
    busy_.push_back(0);
    events_.emplace_back();
    return static_cast<int>(units_.size() - 1);
  }
  int label(std::string_view text) {
    auto it = label_ids_.find(std::string(text));
    if (it != label_ids_.end()) return it->second;
    labels_.emplace_back(text);
    const int id = static_cast<int>(labels_.size() - 1);
    label_ids_.emplace(labels_.back(), id);
    return id;
  }
  void busy(int unit, int64_t start, int64_t end, int label, const EventTag& tag) {
    busy_[unit] += end - start;
    if (keep_events_)
      events_[unit].push_back({.start = start,
                               .end = end,
                               .step = tag.step,
                               .unit = unit,
                               .label = label,
                               .item = tag.item,
                               .op = tag.op,
                               .body = static_cast<int16_t>(tag.body),
                               .operand = static_cast<int16_t>(tag.operand),
                               .cause = Cause::busy});
  }
  // A span the engine jumped over, on `unit` (a core's scalar unit): no busy time of its own.
  void fast_forwarded(int unit, int64_t start, int64_t end, std::string_view what, int item) {
    if (keep_events_ && end > start)
      events_[unit].push_back({.start = start,
                               .end = end,
                               .unit = unit,
                               .label = label(what),
                               .item = item,
                               .op = kFastForwardedSpan,
                               .cause = Cause::busy});
  }
  // Busy time without a timeline event (the caller does not record one).
  void add_busy(int unit, int64_t cycles) { busy_[unit] += cycles; }
  bool keeps_events() const { return keep_events_; }
  const std::vector<int64_t>& busy_totals() const { return busy_; }
  void stall(int unit, Cause cause, int64_t start, int64_t end, int item, int64_t step) {
    if (keep_events_ && end > start)
      events_[unit].push_back({.start = start,
                               .end = end,
                               .step = step,
                               .unit = unit,
                               .label = static_cast<int32_t>(cause),
                               .item = item,
                               .cause = cause});
  }

  size_t event_count() const {
    size_t n = 0;
    for (const Timeline& t : events_) n += t.size();
    return n;
  }
  // Events reported so far, per unit: a mark to take a kernel call's events from.
  std::vector<size_t> event_marks() const;
  // The events reported since `marks`, shifted to start at `t0`; busy events and spans get
  // labels indexing `labels` (their text) instead of this recorder's ids.
  void events_since(const std::vector<size_t>& marks, int64_t t0,
                    std::vector<TimelineEvent>& events, std::vector<std::string>& labels) const;
  // Events taken by events_since (in this run or another) reported again from `t0`, as part of
  // program item `item` and loop-body position `body`.
  void replay_events(const std::vector<TimelineEvent>& events,
                     const std::vector<std::string>& labels, int64_t t0, int item, int body);

  void move_into(RunResult& r);

 private:
  bool keep_events_;
  std::vector<UnitInfo> units_;
  std::vector<int64_t> busy_;
  std::vector<std::string> labels_;
  std::unordered_map<std::string, int> label_ids_;
  // Per unit, in the order reported: each unit reports in time order, so the timeline is their
  // concatenation without a global sort.
  std::vector<Timeline> events_;
};

// Where a TensorCore's time goes. `cursor` follows the core's SystemC time; every advance is
// charged to exactly one cause, so the causes sum to the elapsed time.
struct CoreAccount {
  int64_t cursor = 0;
  std::array<int64_t, kNumCauses> time{};
  int scalar_unit = 0;

  void charge(Recorder& rec, Cause c, int64_t until, int item = -1, int64_t step = -1) {
    if (until <= cursor) return;
    time[static_cast<int>(c)] += until - cursor;
    if (c != Cause::busy) rec.stall(scalar_unit, c, cursor, until, item, step);
    cursor = until;
  }
  // Charges [cursor, until) split by cause as `cycles` gives it (their sum: until - cursor),
  // without timeline events.
  void add(const std::array<int64_t, kNumCauses>& cycles, int64_t until) {
    for (int c = 0; c < kNumCauses; ++c) time[c] += cycles[c];
    cursor = until;
  }
};

}  // namespace tpusim
