// Steady-state fast-forward. Long grids repeat a few step patterns thousands of times (the inner
// axis of a matmul, the key blocks of an attention row). Each time core 0 stands at a prefetch
// point, the engine's state relative to that moment (every core's clock, pending transfers,
// output slots and step pattern; the HBM pipe) is recorded. When it equals a record made a
// period earlier, the state evolves the same way for as long as the step patterns ahead repeat
// that period's patterns: the cores check how many periods do, and all of them jump over those
// periods at once, adding the period's counters (time by cause, busy time per unit, bytes, FLOPs,
// output blocks) once per period skipped. Periods seen are remembered by their state, so a later
// row of the grid that reaches one jumps on its first observation. The jump is exact (the HBM
// pipe keeps its fractional cycles in fixed point, so every timing is a shift-invariant integer);
// `tests/app/golden_test.cpp` holds every kernel and scenario within 0.1% of the full simulation. A
// timeline keeps the steps simulated and marks each jump with one span on the core's scalar lane
// (TimelineEvent::op = kFastForwardedSpan).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sim/timing/memory_system.h"
#include "sim/timing/recorder.h"
#include "sim/timing/tensor_core.h"

namespace tpusim {

class SteadyState {
 public:
  SteadyState(Recorder& rec, Hbm& hbm) : rec_(rec), hbm_(hbm) {}

  // A new kernel call on `cores` (core 0 first), whose FLOPs go to `counters`.
  void begin(std::vector<TensorCore*> cores, KernelCounters* counters, int64_t dma_latency);
  // Core 0 stands at a prefetch point (the other cores at theirs).
  void observe();
  int64_t skipped_steps() const { return skipped_steps_; }

 private:
  struct Record {
    uint64_t hash = 0;
    std::vector<int64_t> state;     // relative to `t`
    std::vector<int64_t> counters;  // absolute: per core, then per unit, bytes, FLOPs
    std::vector<int64_t> steps;     // per core
    int64_t t = 0;
  };
  static constexpr size_t kHistory = 16;  // records compared: periods of up to 16 observations

  // A period seen to repeat: from `state`, each core's steps follow its patterns, and every
  // period adds `delta` to the counters and `cycles` to the clocks. A later row of a grid that
  // reaches the same state jumps on its first observation instead of its second.
  struct Period {
    std::vector<int64_t> state, delta;
    std::vector<std::vector<StepPattern>> patterns;  // per core (empty: the core is done)
    int64_t cycles = 0;
  };
  static constexpr size_t kKnownPeriods = 256;

  void record(Record& r) const;
  // Jumps as far as every core's steps repeat `p` (false if not one period).
  bool try_period(const Period& p);
  void jump(const Period& p, int64_t periods);

  Recorder& rec_;
  Hbm& hbm_;
  std::vector<TensorCore*> cores_;
  KernelCounters* kernel_counters_ = nullptr;
  int64_t dma_latency_ = 0;
  // The last records (a ring: their vectors are reused), the newest at `newest_`.
  std::vector<Record> ring_;
  size_t newest_ = 0, held_ = 0;
  std::vector<int64_t> found_;
  std::unordered_map<uint64_t, Period> known_;  // by the hash of their state
  Period candidate_;
  int64_t skipped_steps_ = 0;
};

}  // namespace tpusim
