#include "sim/timing/tensor_core.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "sim/error.h"

namespace tpusim {

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
  if (k.inputs.size() > 64 || k.outputs.size() > 64)
    throw Error(fmt::format("kernel '{}': more than 64 inputs or outputs", k.name));
  // A block moves its tiles of HBM: an XLA fusion's arrays in XLA's layouts, which put size-1
  // dims out of the way (f32[.., 128, 1] is {3,4,...:T(1,128)} in the compiled programs), so a
  // per-token scalar moves its elements, not a lane-padded tile each; a Pallas kernel's block as
  // Mosaic tiles it in VMEM.
  auto block_bytes = [&](const BlockSpec& s) {
    return k.origin == Origin::xla ? hbm_tiled_bytes(s.block_shape, s.array.dtype)
                                   : tiled_bytes(s.block_shape, s.array.dtype);
  };
  for (const BlockSpec& s : k.inputs) {
    plan_.operand_labels.push_back(rec_.label("fetch " + s.array.name));
    plan_.in_bytes.push_back(block_bytes(s));
  }
  for (const BlockSpec& s : k.outputs) {
    plan_.operand_labels.push_back(rec_.label("write " + s.array.name));
    plan_.out_bytes.push_back(block_bytes(s));
  }
}

const TensorCore::StepSchedule& TensorCore::schedule(uint64_t mask) {
  auto it = plan_.schedules.find(mask);
  if (it != plan_.schedules.end()) return it->second;
  const Kernel& k = *plan_.kernel;
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

int64_t TensorCore::flat_step(const GridIndex& g) const {
  int64_t f = 0;
  for (size_t i = 0; i < g.size(); ++i) f = f * plan_.kernel->grid[i] + g[i];
  return f;
}

void TensorCore::look_ahead(Cursor& c) const {
  const Kernel& k = *plan_.kernel;
  StepPattern& p = c.pattern;
  p = StepPattern{};
  for (size_t q = 0; q < plan_.predicates.size(); ++q)
    if (plan_.predicates[q].holds(c.g, k.grid)) p.schedule |= uint64_t{1} << q;
  // The next index, lexicographically (last axis fastest) inside the core's share of the grid.
  c.next = c.g;
  for (int d = static_cast<int>(c.g.size()) - 1; d >= 0 && !p.more; --d) {
    const bool split = d == work_.split_axis;
    if (++c.next[d] < (split ? work_.hi : k.grid[d]))
      p.more = true;
    else
      c.next[d] = split ? work_.lo : 0;
  }
  // Each block index of the next step, and whether it differs from this step's.
  auto moves = [&](const IndexMap& map, const std::vector<int64_t>& now, std::vector<int64_t>& to) {
    const auto& dims = map.dims();
    to.resize(dims.size());
    bool moved = false;
    for (size_t d = 0; d < dims.size(); ++d) {
      to[d] = dims[d].eval(c.next);
      moved |= to[d] != now[d];
    }
    return moved;
  };
  if (p.more)
    for (size_t i = 0; i < k.inputs.size(); ++i)
      if (moves(k.inputs[i].index, c.in_idx[i], c.in_next[i])) p.refetch |= uint64_t{1} << i;
  for (size_t o = 0; o < k.outputs.size(); ++o)
    if (!p.more || moves(k.outputs[o].index, c.out_idx[o], c.out_next[o]))
      p.written |= uint64_t{1} << o;
}

void TensorCore::place(Cursor& c) const {
  const Kernel& k = *plan_.kernel;
  for (size_t i = 0; i < k.inputs.size(); ++i) k.inputs[i].index.eval(c.g, c.in_idx[i]);
  for (size_t o = 0; o < k.outputs.size(); ++o) k.outputs[o].index.eval(c.g, c.out_idx[o]);
  look_ahead(c);
}

void TensorCore::advance(Cursor& c) const {
  c.g.swap(c.next);
  c.in_idx.swap(c.in_next);
  c.out_idx.swap(c.out_next);
  look_ahead(c);
}

void TensorCore::wait_until(Cause c, int64_t t) {
  if (t > clock_) clock_ = t;
  account_.charge(rec_, c, clock_, work_.item, rec_.keeps_events() ? flat_step(at_.g) : -1);
}

int64_t TensorCore::transfer(size_t operand, int64_t step) {
  const size_t nin = plan_.in_bytes.size();
  const bool write = operand >= nin;
  return dma_[operand % dma_.size()]->transfer(
      clock_, write ? plan_.out_bytes[operand - nin] : plan_.in_bytes[operand], write,
      plan_.operand_labels[operand], {work_.item, step, work_.body, -1, static_cast<int>(operand)});
}

void TensorCore::begin(const CoreWork& work, KernelCounters* counters, int64_t now) {
  work_ = work;
  counters_ = counters;
  clock_ = now;
  steps_ = 0;
  const Kernel& k = *work.kernel;
  // A core running a share of a split grid runs that share of the schedule.
  const int64_t share_of = work.split_axis >= 0 ? k.grid[work.split_axis] : 1;
  const int64_t share = work.split_axis >= 0 ? work.hi - work.lo : 1;
  floor_ = now + k.vliw_floor_cycles * share / share_of;
  prepare(k);
  const size_t nin = k.inputs.size(), nout = k.outputs.size();
  at_.g.assign(k.grid.size(), 0);
  if (work.split_axis >= 0) at_.g[work.split_axis] = work.lo;
  at_.in_idx.resize(nin);
  at_.in_next.resize(nin);
  at_.out_idx.resize(nout);
  at_.out_next.resize(nout);
  place(at_);
  patterns_[0] = at_.pattern;
  in_ready_.assign(nin, 0);
  in_next_ready_.assign(nin, 0);
  out_blocks_.assign(nout, 0);
  out_new_block_.assign(nout, 1);
  out_slot_free_.resize(nout);
  for (size_t o = 0; o < nout; ++o) out_slot_free_[o].assign(k.outputs[o].buffer_count, 0);
  if (work.loop_iteration) {  // the loop's own cost: no grid step of it
    clock_ += chip_.while_loop_overhead_cycles;
    account_.charge(rec_, Cause::loop_overhead, clock_, work_.item, -1);
  }
  if (k.carried_group > 0) {  // scalar work before the first grid step
    clock_ += k.carried_group * chip_.async_collective_setup_cycles_per_device;
    account_.charge(rec_, Cause::step_overhead, clock_, work_.item, -1);
  }
  point_ = Point::first_fetch;
}

void TensorCore::step_top() {
  wait_until(Cause::step_overhead, clock_ + chip_.grid_step_overhead_cycles);
  int64_t inputs_ready = 0;
  for (int64_t t : in_ready_) inputs_ready = std::max(inputs_ready, t);
  wait_until(Cause::dma_wait, inputs_ready);
  point_ = Point::prefetch;
}

void TensorCore::resume() {
  const Kernel& k = *plan_.kernel;
  const size_t nin = k.inputs.size(), nout = k.outputs.size();
  const StepPattern& p = at_.pattern;
  // Grid steps name timeline events only.
  const bool timeline = rec_.keeps_events();
  const int64_t step = timeline ? flat_step(at_.g) : -1;
  const int64_t next_step = timeline && p.more ? flat_step(at_.next) : -1;
  switch (point_) {
    case Point::first_fetch:
      for (size_t i = 0; i < nin; ++i) in_ready_[i] = transfer(i, step);
      step_top();
      return;

    case Point::prefetch: {
      for (size_t i = 0; i < nin; ++i) {
        in_next_ready_[i] = in_ready_[i];
        if ((p.refetch >> i & 1) && k.inputs[i].buffer_count >= 2)
          in_next_ready_[i] = transfer(i, next_step);
      }
      for (size_t o = 0; o < nout; ++o)
        if (out_new_block_[o]) {
          const auto& slots = out_slot_free_[o];
          wait_until(Cause::dma_wait, slots[out_blocks_[o] % slots.size()]);
        }
      const StepSchedule& s = schedule(p.schedule);
      const BodySchedule& body = s.body;
      const int64_t t0 = clock_;
      if (timeline) {
        for (const ScheduledOp& op : body.ops)
          rec_.busy(lanes_[op.lane], t0 + op.start, t0 + op.end, plan_.op_labels[op.op],
                    {work_.item, step, work_.body, static_cast<int>(op.op), -1});
        for (const BodySegment& seg : body.segments)
          account_.charge(rec_, seg.cause, t0 + seg.end, work_.item, step);
      } else {
        for (const auto& [lane, cycles] : s.lane_busy) rec_.add_busy(lanes_[lane], cycles);
        account_.add(s.cause_cycles, t0 + body.length);
      }
      counters_->flops += body.flops;
      counters_->mxu_pass_flops += body.mxu_pass_flops;
      clock_ = t0 + body.length;
      point_ = Point::write_back;
      return;
    }

    case Point::write_back:
      for (size_t o = 0; o < nout; ++o) {
        out_new_block_[o] = p.written >> o & 1;
        if (!out_new_block_[o]) continue;
        auto& slots = out_slot_free_[o];
        slots[out_blocks_[o]++ % slots.size()] = transfer(nin + o, step);
      }
      if (!p.more) {
        int64_t drained = 0;
        for (const auto& slots : out_slot_free_)
          for (int64_t t : slots) drained = std::max(drained, t);
        wait_until(Cause::dma_wait, drained);
        wait_until(Cause::vliw_schedule, floor_);
        point_ = Point::done;
        return;
      }
      for (size_t i = 0; i < nin; ++i)
        if ((p.refetch >> i & 1) && k.inputs[i].buffer_count < 2)
          in_next_ready_[i] = transfer(i, next_step);
      advance(at_);
      in_ready_.swap(in_next_ready_);
      patterns_[++steps_ % kPatternHistory] = at_.pattern;
      step_top();
      return;

    case Point::done:
      return;
  }
}

void TensorCore::state(int64_t t, std::vector<int64_t>& out) const {
  out.push_back(static_cast<int64_t>(point_));
  if (point_ == Point::done) return;  // finished: nothing of it moves any more
  out.push_back(clock_ - t);
  // Times at or before the core's clock no longer matter: they all count as "ready".
  auto after = [&](int64_t v) { return std::max<int64_t>(0, v - clock_); };
  for (size_t i = 0; i < in_ready_.size(); ++i) {
    out.push_back(after(in_ready_[i]));
    out.push_back(after(in_next_ready_[i]));
  }
  for (size_t o = 0; o < out_slot_free_.size(); ++o) {
    const auto& slots = out_slot_free_[o];
    for (size_t j = 0; j < slots.size(); ++j)
      out.push_back(after(slots[(out_blocks_[o] + j) % slots.size()]));
    out.push_back(out_new_block_[o]);
  }
  const StepPattern& p = at_.pattern;
  out.insert(out.end(), {static_cast<int64_t>(p.schedule), static_cast<int64_t>(p.refetch),
                         static_cast<int64_t>(p.written), p.more});
}

void TensorCore::counters(std::vector<int64_t>& out) const {
  out.insert(out.end(), account_.time.begin(), account_.time.end());
  out.insert(out.end(), out_blocks_.begin(), out_blocks_.end());
  out.push_back(steps_);
}

int64_t TensorCore::uniform_run(const Cursor& c) const {
  const Kernel& k = *plan_.kernel;
  const int last = static_cast<int>(c.g.size()) - 1;
  if (last < 0) return 0;
  const int64_t y = c.g[last];
  const int64_t end = last == work_.split_axis ? work_.hi : k.grid[last];
  // The first index after y whose step may differ from the one before it; the last index of the
  // row differs (its next step wraps).
  int64_t first_change = end - 1;
  auto may_change_at = [&](int64_t from, int64_t to) {
    for (int64_t v = from; v <= to; ++v)
      if (v > y && v < first_change) first_change = v;
  };
  for (const When& q : plan_.predicates) {
    const bool on_axis = q.axis == last, on_other = q.other == last;
    if (!on_axis && !on_other) continue;
    if (on_axis && on_other) continue;  // compares the axis with itself: constant
    if (q.kind == When::at_or_below || q.kind == When::on_diagonal) {
      // y >= a switches at a, a >= y at a + 1, y == a at both.
      const int64_t a = c.g[on_axis ? q.other : q.axis];
      may_change_at(a, a + 1);
    } else {  // first / last (of one axis or both): index 0 and the axis's last index
      may_change_at(0, 1);
      may_change_at(k.grid[last] - 1, k.grid[last]);
    }
  }
  // A block index is affine in y between clamp switches; the step's refetch and write-back
  // compare it at y and y + 1, so each switch point and its neighbours may change the pattern.
  auto switches = [&](const IndexMap& map) {
    for (const AffineExpr& e : map.dims()) {
      if (e.min_axis < 0 && e.max_axis < 0) continue;
      // The expression along the row: base + slope * y.
      int64_t base = e.offset, slope = 0;
      for (size_t d = 0; d < e.coeff.size() && d < c.g.size(); ++d) {
        if (static_cast<int>(d) == last)
          slope += e.coeff[d];
        else
          base += e.coeff[d] * c.g[d];
      }
      for (int clamp : {e.min_axis, e.max_axis}) {
        if (clamp < 0) continue;
        // base + slope * v against the clamp: g[clamp] (constant) or v itself (the last axis).
        const int64_t rel_slope = clamp == last ? slope - 1 : slope;
        const int64_t rel_base = clamp == last ? base : base - c.g[clamp];
        if (rel_slope == 0) continue;
        // They cross at y* = -rel_base / rel_slope: the steps whose y or y + 1 is beside it.
        const int64_t num = -rel_base, q = num / rel_slope;
        const bool exact = num % rel_slope == 0, negative = (num < 0) != (rel_slope < 0);
        const int64_t below = exact || !negative ? q : q - 1, above = exact ? q : below + 1;
        may_change_at(below - 1, above + 1);
      }
    }
  };
  for (const BlockSpec& b : k.inputs) switches(b.index);
  for (const BlockSpec& b : k.outputs) switches(b.index);
  return std::max<int64_t>(0, first_change - 1 - y);
}

bool TensorCore::last_patterns(int64_t period, std::vector<StepPattern>& out) const {
  if (period < 1 || period > kPatternHistory || steps_ < period) return false;
  out.clear();
  for (int64_t j = 1; j <= period; ++j)
    out.push_back(patterns_[(steps_ - period + j) % kPatternHistory]);
  return true;
}

int64_t TensorCore::repeating_periods(const std::vector<StepPattern>& period_patterns,
                                      int64_t max_periods) {
  const int64_t period = static_cast<int64_t>(period_patterns.size());
  if (period < 1) return 0;
  auto expected = [&](int64_t walked) -> const StepPattern& {
    return period_patterns[walked % period];
  };
  bool uniform = true;  // the period repeats one pattern: runs of it can be jumped over
  for (int64_t j = 1; j < period; ++j) uniform = uniform && expected(j) == expected(0);
  ahead_ = at_;
  boundary_ = at_.g;  // the grid index at the end of the last whole period walked
  int64_t periods = 0, walked = 0;
  int64_t max_walk;  // max_periods whole periods in steps; "no limit" is INT64_MAX
  if (__builtin_mul_overflow(max_periods, period, &max_walk))
    max_walk = std::numeric_limits<int64_t>::max();
  const int last = static_cast<int>(at_.g.size()) - 1;
  while (periods < max_periods && ahead_.pattern.more) {
    advance(ahead_);
    if (!(ahead_.pattern == expected(walked++))) break;
    if (uniform && last >= 0) {
      // Along the rest of a uniform run every step repeats this one: move to its last step.
      int64_t run = std::min(uniform_run(ahead_), max_walk - walked);
      run -= (walked + run) % period;
      if (run > 0) {
        ahead_.g[last] += run;
        walked += run;
        place(ahead_);
      }
    }
    if (walked % period == 0) {
      periods = walked / period;
      boundary_ = ahead_.g;
    }
  }
  if (walked != periods * period) {  // stopped inside a period: back to its start
    ahead_.g = boundary_;
    place(ahead_);
  }
  return periods;
}

void TensorCore::skip(int64_t periods, int64_t period, int64_t cycles, const int64_t* deltas) {
  at_ = ahead_;
  if (rec_.keeps_events())
    rec_.fast_forwarded(account_.scalar_unit, clock_, clock_ + cycles,
                        fmt::format("fast-forwarded: {} grid steps ({} periods of {})",
                                    periods * period, periods, period),
                        work_.item);
  clock_ += cycles;
  for (int c = 0; c < kNumCauses; ++c) account_.time[c] += periods * deltas[c];
  account_.cursor = clock_;
  for (int64_t& t : in_ready_) t += cycles;
  for (int64_t& t : in_next_ready_) t += cycles;
  for (size_t o = 0; o < out_slot_free_.size(); ++o) {
    auto& slots = out_slot_free_[o];
    const int64_t n = static_cast<int64_t>(slots.size()), blocks = periods * deltas[kNumCauses + o];
    // Slot (out_blocks + j) % n moves to (out_blocks + blocks + j) % n: a rotation by blocks.
    std::rotate(slots.begin(), slots.end() - blocks % n, slots.end());
    for (int64_t& t : slots) t += cycles;
    out_blocks_[o] += blocks;
  }
  steps_ += periods * period;
  patterns_[steps_ % kPatternHistory] = at_.pattern;
}

}  // namespace tpusim
