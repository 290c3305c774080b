#include "sim/timing/tensor_core.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/error.h"
#include "sim/timing/sc_time.h"

namespace tpusim {
namespace {

int64_t flat_index(const Kernel& k, const GridIndex& g) {
  int64_t f = 0;
  for (size_t i = 0; i < g.size(); ++i) f = f * k.grid[i] + g[i];
  return f;
}

// Advances `g` lexicographically (last axis fastest) inside the core's share of the grid.
bool next_index(const Kernel& k, const CoreWork& w, GridIndex& g) {
  for (int d = static_cast<int>(g.size()) - 1; d >= 0; --d) {
    const int64_t lo = d == w.split_axis ? w.lo : 0;
    const int64_t hi = d == w.split_axis ? w.hi : k.grid[d];
    if (++g[d] < hi) return true;
    g[d] = lo;
  }
  return false;
}

}  // namespace

TensorCore::TensorCore(sc_core::sc_module_name name, int id, const ChipSpec& chip, Recorder& rec,
                       Hbm& hbm)
    : sc_module(name), id_(id), chip_(chip), rec_(rec) {
  account_.scalar_unit = rec.add_unit(fmt::format("tc{}.scalar", id), UnitKind::scalar, id);
  for (int m = 0; m < chip.mxus_per_core; ++m)
    lanes_.push_back(rec.add_unit(fmt::format("tc{}.mxu{}", id, m), UnitKind::mxu, id));
  lanes_.push_back(rec.add_unit(fmt::format("tc{}.vpu", id), UnitKind::vpu, id));
  lanes_.push_back(rec.add_unit(fmt::format("tc{}.eup", id), UnitKind::eup, id));
  for (int q = 0; q < chip.dma_queues; ++q) {
    dma_.push_back(std::make_unique<DmaQueue>(fmt::format("dma{}", q).c_str(), chip, rec, id, q));
    dma_.back()->socket.bind(hbm.socket);
  }
  SC_THREAD(run);
}

void TensorCore::start(const CoreWork& work, KernelCounters* counters, sc_core::sc_event* all_done,
                       int* remaining) {
  work_ = work;
  counters_ = counters;
  all_done_ = all_done;
  remaining_ = remaining;
  start_event_.notify(sc_core::SC_ZERO_TIME);
}

void TensorCore::run() {
  for (;;) {
    wait(start_event_);
    clock_ = now_cycles();
    alone_ = work_.alone;
    if (work_.loop_iteration)
      wait_until(Cause::loop_overhead, clock_ + chip_.while_loop_overhead_cycles, work_.item, -1);
    run_grid(work_);
    alone_ = false;
    sync();
    if (--*remaining_ == 0) all_done_->notify(sc_core::SC_ZERO_TIME);
  }
}

void TensorCore::sync() {
  const int64_t now = now_cycles();
  if (clock_ > now) wait(cycles(clock_ - now));
}

void TensorCore::wait_until(Cause c, int64_t t, int item, int64_t step) {
  if (t > clock_) clock_ = t;
  if (!alone_) sync();
  account_.charge(rec_, c, clock_, item, step);
}

void TensorCore::prepare(const Kernel& k) {
  if (plan_.kernel == &k) return;
  plan_ = KernelPlan{};
  plan_.kernel = &k;
  for (const Op& op : k.body) {
    int index = -1;
    if (op.when.kind != When::always) {
      for (size_t p = 0; p < plan_.predicates.size() && index < 0; ++p) {
        const When& q = plan_.predicates[p];
        if (q.kind == op.when.kind && q.axis == op.when.axis && q.other == op.when.other)
          index = static_cast<int>(p);
      }
      if (index < 0) {
        if (plan_.predicates.size() == 64)
          throw Error(fmt::format("kernel '{}': more than 64 distinct op predicates", k.name));
        plan_.predicates.push_back(op.when);
        index = static_cast<int>(plan_.predicates.size() - 1);
      }
    }
    plan_.op_predicate.push_back(index);
    plan_.op_labels.push_back(rec_.label(op.name));
  }
  for (const BlockSpec& s : k.inputs)
    plan_.operand_labels.push_back(rec_.label("fetch " + s.array.name));
  for (const BlockSpec& s : k.outputs)
    plan_.operand_labels.push_back(rec_.label("write " + s.array.name));
}

const TensorCore::StepSchedule& TensorCore::schedule_for(const GridIndex& g) {
  const Kernel& k = *plan_.kernel;
  uint64_t mask = 0;
  for (size_t p = 0; p < plan_.predicates.size(); ++p)
    if (plan_.predicates[p].holds(g, k.grid)) mask |= uint64_t{1} << p;
  auto it = plan_.schedules.find(mask);
  if (it != plan_.schedules.end()) return it->second;
  std::vector<bool> active(k.body.size());
  for (size_t i = 0; i < k.body.size(); ++i)
    active[i] = plan_.op_predicate[i] < 0 || (mask >> plan_.op_predicate[i] & 1);
  StepSchedule s;
  s.body = schedule_body(chip_, k, active);
  for (const BodySegment& seg : s.body.segments)
    s.cause_cycles[static_cast<int>(seg.cause)] += seg.end - seg.start;
  std::vector<int64_t> lane(lanes_.size(), 0);
  for (const ScheduledOp& op : s.body.ops) lane[op.lane] += op.end - op.start;
  for (size_t l = 0; l < lane.size(); ++l)
    if (lane[l] > 0) s.lane_busy.emplace_back(static_cast<int>(l), lane[l]);
  return plan_.schedules.emplace(mask, std::move(s)).first->second;
}

void TensorCore::run_grid(const CoreWork& w) {
  const Kernel& k = *w.kernel;
  prepare(k);
  const size_t nin = k.inputs.size(), nout = k.outputs.size();
  const int queues = static_cast<int>(dma_.size());
  auto queue_of = [&](size_t operand) { return dma_[operand % queues].get(); };
  const bool timeline = rec_.keeps_events();

  std::vector<int64_t> in_bytes(nin), out_bytes(nout);
  for (size_t i = 0; i < nin; ++i)
    in_bytes[i] = tiled_bytes(k.inputs[i].block_shape, k.inputs[i].array.dtype);
  for (size_t o = 0; o < nout; ++o)
    out_bytes[o] = tiled_bytes(k.outputs[o].block_shape, k.outputs[o].array.dtype);

  GridIndex g(k.grid.size(), 0), next;
  if (w.split_axis >= 0) g[w.split_axis] = w.lo;

  std::vector<std::vector<int64_t>> in_idx(nin), in_next(nin), out_idx(nout), out_next(nout);
  std::vector<int64_t> in_ready(nin), in_next_ready(nin);
  std::vector<std::vector<int64_t>> out_slot_free(nout);
  std::vector<int64_t> out_blocks(nout, 0);
  std::vector<char> out_new_block(nout, 1), refetch(nin, 0);
  for (size_t o = 0; o < nout; ++o) out_slot_free[o].assign(k.outputs[o].buffer_count, 0);

  // Events name the item, the kernel's place in it, the grid step and the op or the BlockSpec.
  auto dma = [&w](size_t operand, int64_t at_step) {
    return EventTag{w.item, at_step, w.body, -1, static_cast<int>(operand)};
  };
  auto transfer = [&](size_t operand, bool write, int64_t at_step) {
    if (!alone_) sync();
    return queue_of(operand)->transfer(clock_, write ? out_bytes[operand - nin] : in_bytes[operand],
                                       write, plan_.operand_labels[operand], dma(operand, at_step));
  };
  int64_t step = flat_index(k, g);
  for (size_t i = 0; i < nin; ++i) {
    k.inputs[i].index.eval(g, in_idx[i]);
    in_ready[i] = transfer(i, false, step);
  }
  for (size_t o = 0; o < nout; ++o) k.outputs[o].index.eval(g, out_idx[o]);

  for (bool more = true; more;) {
    step = flat_index(k, g);
    wait_until(Cause::step_overhead, clock_ + chip_.grid_step_overhead_cycles, w.item, step);
    int64_t inputs_ready = 0;
    for (int64_t t : in_ready) inputs_ready = std::max(inputs_ready, t);
    wait_until(Cause::dma_wait, inputs_ready, w.item, step);

    next = g;
    more = next_index(k, w, next);
    const int64_t next_step = more ? flat_index(k, next) : -1;
    for (size_t i = 0; i < nin; ++i) {
      refetch[i] = false;
      if (!more) continue;
      k.inputs[i].index.eval(next, in_next[i]);
      refetch[i] = in_next[i] != in_idx[i];
      in_next_ready[i] = in_ready[i];
      if (refetch[i] && k.inputs[i].buffer_count >= 2)
        in_next_ready[i] = transfer(i, false, next_step);
    }
    for (size_t o = 0; o < nout; ++o)
      if (out_new_block[o]) {
        const auto& slots = out_slot_free[o];
        wait_until(Cause::dma_wait, slots[out_blocks[o] % slots.size()], w.item, step);
      }

    const StepSchedule& s = schedule_for(g);
    const BodySchedule& body = s.body;
    const int64_t t0 = clock_;
    if (timeline) {
      for (const ScheduledOp& op : body.ops)
        rec_.busy(lanes_[op.lane], t0 + op.start, t0 + op.end, plan_.op_labels[op.op],
                  {w.item, step, w.body, static_cast<int>(op.op), -1});
      for (const BodySegment& seg : body.segments)
        account_.charge(rec_, seg.cause, t0 + seg.end, w.item, step);
    } else {
      for (const auto& [lane, cycles] : s.lane_busy) rec_.add_busy(lanes_[lane], cycles);
      account_.add(s.cause_cycles, t0 + body.length);
    }
    counters_->flops += body.flops;
    counters_->mxu_pass_flops += body.mxu_pass_flops;
    clock_ = t0 + body.length;
    if (!alone_) sync();

    for (size_t o = 0; o < nout; ++o) {
      if (more) k.outputs[o].index.eval(next, out_next[o]);
      const bool done_with_block = !more || out_next[o] != out_idx[o];
      out_new_block[o] = done_with_block;
      if (!done_with_block) continue;
      auto& slots = out_slot_free[o];
      slots[out_blocks[o]++ % slots.size()] = transfer(nin + o, true, step);
    }
    for (size_t i = 0; i < nin && more; ++i)
      if (refetch[i] && k.inputs[i].buffer_count < 2)
        in_next_ready[i] = transfer(i, false, next_step);
    if (!more) break;
    g.swap(next);
    in_idx.swap(in_next);
    in_ready.swap(in_next_ready);
    out_idx.swap(out_next);
  }
  int64_t drained = 0;
  for (const auto& slots : out_slot_free)
    for (int64_t t : slots) drained = std::max(drained, t);
  wait_until(Cause::dma_wait, drained, w.item, step);
}

}  // namespace tpusim
