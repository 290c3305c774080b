// One TensorCore: the in-order scalar unit that walks a kernel's grid, issues the BlockSpec DMAs
// (fetch a block only when its index changes, prefetch the next step's blocks while this step
// computes, write an output block back when its index changes or the grid ends) and runs each
// step's body on the MXUs and the VPU (body_schedule.h).
//
// Time: a core runs ahead of SystemC time on its own clock (TLM's temporal decoupling). It stops
// only where it reaches HBM, its transfer points: the first fetches, the prefetch after a step's
// inputs have arrived, and the write-backs (and single-buffered refetches) after its body. The
// engine resumes the core whose next transfer point is earliest (core_runner.h), so the shared
// HBM pipe serves requests in time order; the DMA requests carry the core's offset from SystemC
// time in their TLM delay.
#pragma once
#include <array>
#include <memory>
#include <systemc>
#include <unordered_map>
#include <vector>

#include "sim/chip_spec.h"
#include "sim/ir/kernel.h"
#include "sim/timing/body_schedule.h"
#include "sim/timing/memory_system.h"
#include "sim/timing/recorder.h"

namespace tpusim {

// A share of one kernel call for one core: grid axis `split_axis` restricted to [lo, hi).
struct CoreWork {
  const Kernel* kernel = nullptr;
  int item = -1;
  int body = 0;  // the kernel's position in its item
  bool loop_iteration =
      false;  // the first kernel of a while-loop iteration: pays the loop overhead
  int split_axis = -1;
  int64_t lo = 0, hi = 0;
};

struct KernelCounters {
  int64_t flops = 0, mxu_pass_flops = 0;
};

// What a grid step does apart from its timing: the body schedule (a bit per distinct predicate
// that holds), the inputs it fetches for the next step, the outputs it writes back, and whether
// a step follows. Two steps with equal patterns started from equal states take equal time.
struct StepPattern {
  uint64_t schedule = 0, refetch = 0, written = 0;
  bool more = false;
  bool operator==(const StepPattern&) const = default;
};

class TensorCore : public sc_core::sc_module {
 public:
  // Where a core stands between two of the engine's resumptions.
  enum class Point : uint8_t { first_fetch, prefetch, write_back, done };

  TensorCore(sc_core::sc_module_name name, int id, const ChipSpec& chip, Recorder& rec, Hbm& hbm);

  // Starts `work` at cycle `now` (paying the loop overhead if it begins a loop iteration); the
  // core then stands at its first transfer point.
  void begin(const CoreWork& work, KernelCounters* counters, int64_t now);
  Point point() const { return point_; }
  int64_t steps_begun() const { return steps_; }
  // The cycle of the next transfer point (the end, once done).
  int64_t clock() const { return clock_; }
  // Issues the transfers of the current point, then runs locally to the next point.
  void resume();
  CoreAccount& account() { return account_; }

  // For the fast-forward (steady_state.h), at a transfer point: the core's state relative to
  // cycle `t`, its counters, how many periods of `period` steps ahead repeat the last period's
  // patterns, and the jump over them.
  void state(int64_t t, std::vector<int64_t>& out) const;
  void counters(std::vector<int64_t>& out) const;
  size_t counter_count() const { return kNumCauses + out_blocks_.size() + 1; }
  // The patterns of the last `period` steps, oldest first (false if they are not all kept).
  bool last_patterns(int64_t period, std::vector<StepPattern>& out) const;
  // How many periods ahead (up to `max_periods`) repeat `period_patterns` step by step, the first
  // step after the current one repeating period_patterns[0].
  int64_t repeating_periods(const std::vector<StepPattern>& period_patterns, int64_t max_periods);
  void skip(int64_t periods, int64_t period, int64_t cycles, const int64_t* counter_deltas);
  static constexpr int64_t kPatternHistory = 64;

 private:
  // A step's body schedule with its totals, so a step without a timeline is charged in O(units).
  struct StepSchedule {
    BodySchedule body;
    std::array<int64_t, kNumCauses> cause_cycles{};
    std::vector<std::pair<int, int64_t>> lane_busy;  // (lane, busy cycles)
  };
  // What the core keeps of the kernel it runs: its distinct op predicates, the schedule of each
  // combination of them that occurs, the timeline labels.
  struct KernelPlan {
    const Kernel* kernel = nullptr;
    std::vector<When> predicates;
    std::vector<int> op_predicate;  // per body op: index into `predicates`, -1 for always
    std::unordered_map<uint64_t, StepSchedule> schedules;
    std::vector<int> op_labels, operand_labels;
    std::vector<int64_t> in_bytes, out_bytes;
  };
  // A position in the core's share of the grid: this step's and the next step's grid and block
  // indices, and the pattern of this step.
  struct Cursor {
    GridIndex g, next;
    std::vector<std::vector<int64_t>> in_idx, in_next, out_idx, out_next;
    StepPattern pattern;
  };

  void prepare(const Kernel& k);
  const StepSchedule& schedule(uint64_t mask);
  // Fills `c.next`, the next block indices and `c.pattern` from `c.g`.
  void look_ahead(Cursor& c) const;
  // How many steps after `c`'s, along the last grid axis, certainly repeat its pattern (from
  // where the op predicates and the index maps' clamps can switch).
  int64_t uniform_run(const Cursor& c) const;
  // Fills `c`'s block indices at `c.g` and looks ahead from there.
  void place(Cursor& c) const;
  // Moves `c` to the next step (c.pattern.more must hold) and looks ahead from there.
  void advance(Cursor& c) const;
  void wait_until(Cause c, int64_t t);
  int64_t transfer(size_t operand, int64_t step);
  // From the top of a step (its overhead) to the prefetch point.
  void step_top();
  int64_t flat_step(const GridIndex& g) const;

  int id_;
  const ChipSpec& chip_;
  Recorder& rec_;
  std::vector<std::unique_ptr<DmaQueue>> dma_;
  std::vector<int> lanes_;  // recorder units: MXU 0..n-1, then the VPU and the EUP
  CoreAccount account_;
  KernelPlan plan_;

  // The kernel call in progress.
  CoreWork work_;
  KernelCounters* counters_ = nullptr;
  Point point_ = Point::done;
  int64_t clock_ = 0;  // cycles; never behind SystemC time
  int64_t floor_ = 0;  // the call may not end before this (the compiled schedule's length)
  int64_t steps_ = 0;  // steps begun
  Cursor at_;
  std::vector<int64_t> in_ready_, in_next_ready_, out_blocks_;
  std::vector<std::vector<int64_t>> out_slot_free_;
  std::vector<char> out_new_block_;
  std::array<StepPattern, kPatternHistory> patterns_{};  // by steps_ modulo the size
  Cursor ahead_;  // repeating_periods' walk, which skip() then takes over
  GridIndex boundary_;
};

}  // namespace tpusim
