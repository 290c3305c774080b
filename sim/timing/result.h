// What a simulation produces: totals, per-unit busy time, the critical TensorCore's time split into
// busy and stall causes (which add up exactly to the total), per-kernel statistics and, when asked
// for, the timeline (one event per op, transfer or stall).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/ir/kernel.h"
#include "sim/ir/validate.h"
#include "sim/timing/huge_page_allocator.h"

namespace tpusim {

enum class Cause : uint8_t {
  busy,            // an MXU or the VPU is doing throughput work
  dma_wait,        // waiting for an input block to arrive or an output slot to drain
  dependency,      // an op waits for an operand still in flight (a dependent chain)
  mxu_fill_drain,  // the step waits for the last MXU results to drain out of the array
  step_overhead,   // scalar work between grid steps (index maps, DMA issue, semaphores)
  loop_overhead,   // per-iteration cost of an XLA while loop
  collective,      // waiting for a collective on ICI/DCN
  dispatch,        // host dispatch of the program
  idle,            // the other TensorCore of a megacore chip is still working
  vliw_schedule,   // the compiled VLIW schedule is longer than the modelled units' work
};
inline constexpr int kNumCauses = 10;
std::string_view name(Cause c);

enum class UnitKind : uint8_t { scalar, mxu, vpu, eup, dma, hbm, ici };
std::string_view name(UnitKind k);  // "scalar", "mxu", ...

struct UnitInfo {
  std::string name;  // "tc0.mxu1", "hbm", ...
  UnitKind kind;
  int core = -1;
};

// TimelineEvent::op of a span the engine did not simulate step by step: grid periods the
// fast-forward jumped over, or a kernel call replayed from its first call (its label says which).
inline constexpr int32_t kFastForwardedSpan = -2;

struct TimelineEvent {
  int64_t start = 0, end = 0;  // cycles
  int64_t step = -1;           // flat grid step index, -1 if not a grid step
  int32_t unit = 0;            // index into RunResult::units
  int32_t label = 0;           // index into RunResult::labels
  int32_t item = -1;           // program item
  int32_t op = -1;             // a body op: its index in the kernel's body (or kFastForwardedSpan)
  int16_t body = -1;           // the kernel's position in its item (0 for a call, j in a loop)
  int16_t operand = -1;        // a DMA: its BlockSpec, the kernel's inputs then its outputs
  Cause cause = Cause::busy;
};

using Timeline = std::vector<TimelineEvent, HugePageAllocator<TimelineEvent>>;

struct KernelStats {
  std::string name;
  Origin origin = Origin::pallas;
  std::vector<int64_t> grid;
  int64_t calls = 0;
  int64_t cycles = 0;  // summed over calls, on the critical core
  int64_t flops = 0, mxu_pass_flops = 0;
  int64_t hbm_read_bytes = 0, hbm_write_bytes = 0;
  VmemUsage vmem;
  int64_t vmem_limit_bytes = 0;
  std::array<int64_t, kNumCauses> time{};  // critical core, summed over calls
};

// One program item as it ran.
struct ItemResult {
  std::string name;
  std::string stage;      // its stage label (or its name)
  int kernel = -1;        // index into RunResult::kernels of its (first) kernel, -1 if none
  int64_t start = 0;      // the cycle it started
  int64_t cycles = 0;     // from its start to its end
  std::vector<int> deps;  // the items it waited for (ProgramItem::deps)
};

struct RunResult {
  std::string chip;
  double clock_hz = 0;
  double peak_flops = 0;
  int64_t cycles = 0;
  double time_s = 0;
  int64_t flops = 0;           // algorithmic: 2*M*K*N per dot executed
  int64_t mxu_pass_flops = 0;  // as issued to the MXUs, counting every precision pass
  int64_t hbm_read_bytes = 0, hbm_write_bytes = 0;
  int64_t vmem_peak_bytes = 0;
  int64_t grid_steps = 0;            // every grid step of every kernel call
  int64_t fast_forwarded_steps = 0;  // of them: jumped over or replayed instead of simulated
  std::vector<UnitInfo> units;
  std::vector<int64_t> unit_busy;          // cycles, per unit
  std::array<int64_t, kNumCauses> time{};  // TensorCore 0: sums exactly to `cycles`
  std::vector<KernelStats> kernels;        // one per distinct kernel, in program order
  std::vector<ItemResult> items;           // per program item, in program order
  std::vector<std::string> labels;
  Timeline events;  // empty unless recording was requested

  int64_t hbm_bytes() const { return hbm_read_bytes + hbm_write_bytes; }
};

}  // namespace tpusim
