// One TensorCore: the in-order scalar unit that walks a kernel's grid, issues the BlockSpec DMAs
// (fetch a block only when its index changes, prefetch the next step's blocks while this step
// computes, write an output block back when its index changes or the grid ends) and runs each
// step's body on the MXUs and the VPU (body_schedule.h).
#pragma once
#include <map>
#include <memory>
#include <systemc>
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
  void run();
  void run_grid(const CoreWork& w);
  void wait_until(Cause c, int64_t t, int item, int64_t step);
  const BodySchedule& body_for(const Kernel& k, const GridIndex& g);

  int id_;
  const ChipSpec& chip_;
  Recorder& rec_;
  std::vector<std::unique_ptr<DmaQueue>> dma_;
  std::vector<int> lanes_;  // recorder units: MXU 0..n-1, then the VPU and the EUP
  CoreAccount account_;

  sc_core::sc_event start_event_;
  CoreWork work_;
  KernelCounters* counters_ = nullptr;
  sc_core::sc_event* all_done_ = nullptr;
  int* remaining_ = nullptr;

  // Per-kernel caches: body schedules by predicate mask, op labels.
  const Kernel* cached_kernel_ = nullptr;
  std::map<std::vector<bool>, BodySchedule> schedules_;
  std::vector<int> op_labels_, operand_labels_;
  std::vector<bool> active_;
};

}  // namespace tpusim
