// One TensorCore: the in-order scalar unit that walks a kernel's grid, issues the BlockSpec DMAs
// (fetch a block only when its index changes, prefetch the next step's blocks while this step
// computes, write an output block back when its index changes or the grid ends) and runs each
// step's body on the MXUs and the VPU (body_schedule.h).
//
// Time: a core alone on the chip runs ahead of SystemC time with a local clock (TLM's temporal
// decoupling) and synchronises once per kernel call, since nothing else can observe it meanwhile;
// its DMA requests carry the offset in their TLM delay. When both cores of a megacore chip share
// a kernel, each waits in SystemC time before it reaches HBM, so the pipe serves their requests in
// time order.
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
  bool alone = true;  // no other core runs at the same time (the core may run ahead)
};

struct KernelCounters {
  int64_t flops = 0, mxu_pass_flops = 0;
};

class TensorCore : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(TensorCore);
  TensorCore(sc_core::sc_module_name name, int id, const ChipSpec& chip, Recorder& rec, Hbm& hbm);

  // Starts `work` at the current time; when the core has finished it, it decrements
  // `*remaining` and notifies `all_done` once that reaches zero.
  void start(const CoreWork& work, KernelCounters* counters, sc_core::sc_event* all_done,
             int* remaining);
  CoreAccount& account() { return account_; }

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
  };

  void run();
  void run_grid(const CoreWork& w);
  // Advances the core's clock to `t` (if later), charging the time to `c`.
  void wait_until(Cause c, int64_t t, int item, int64_t step);
  // In SystemC time up to the core's clock (always, when the core shares the chip).
  void sync();
  void prepare(const Kernel& k);
  const StepSchedule& schedule_for(const GridIndex& g);

  int id_;
  const ChipSpec& chip_;
  Recorder& rec_;
  std::vector<std::unique_ptr<DmaQueue>> dma_;
  std::vector<int> lanes_;  // recorder units: MXU 0..n-1, then the VPU and the EUP
  CoreAccount account_;
  int64_t clock_ = 0;  // the core's local time, cycles; never behind SystemC time
  bool alone_ = true;

  sc_core::sc_event start_event_;
  CoreWork work_;
  KernelCounters* counters_ = nullptr;
  sc_core::sc_event* all_done_ = nullptr;
  int* remaining_ = nullptr;

  KernelPlan plan_;
};

}  // namespace tpusim
