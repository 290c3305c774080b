// Schedules the ops of one grid step onto the MXUs, the VPU and the EUP (which evaluates the
// transcendental functions beside the VPU's ALUs). Ops issue in program order, one
// per cycle, from the scalar unit; each unit executes its queue in order; an op starts when its
// operands are ready, its unit is free and it has issued. Grid steps are separated by a barrier
// (the step ends when its last result is written), so a step's schedule depends only on which
// predicated ops run, and the engine caches it. The schedule also splits the step's time into
// busy and stall segments by cause.
#pragma once
#include <cstdint>
#include <vector>

#include "sim/chip_spec.h"
#include "sim/ir/kernel.h"
#include "sim/timing/result.h"

namespace tpusim {

struct ScheduledOp {
  int op = 0;
  int lane = 0;  // 0 .. mxus-1: an MXU; mxus: the VPU; mxus + 1: the EUP (transcendentals)
  int64_t start = 0, end = 0;
};

struct BodySegment {
  Cause cause = Cause::busy;
  int64_t start = 0, end = 0;
};

struct BodySchedule {
  std::vector<ScheduledOp> ops;       // one entry per unit an op occupies
  std::vector<BodySegment> segments;  // cover [0, length) without gaps
  int64_t length = 0;
  int64_t flops = 0, mxu_pass_flops = 0;
};

// `active[i]` says whether body op i runs in this grid step (its When predicate holds).
BodySchedule schedule_body(const ChipSpec& chip, const Kernel& k, const std::vector<bool>& active);

}  // namespace tpusim
