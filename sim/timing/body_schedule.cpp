#include "sim/timing/body_schedule.h"

#include <algorithm>
#include <numeric>

#include "sim/timing/unit_models.h"

namespace tpusim {

BodySchedule schedule_body(const ChipSpec& chip, const Kernel& k, const std::vector<bool>& active) {
  const int nmxu = chip.mxus_per_core;
  BodySchedule s;
  std::vector<int64_t> value_ready(k.values.size(), 0);
  // A dot's results leave the MXUs a vreg at a time: a VPU consumer can start on the first one
  // (`first_ready`) and finishes its last share after the last one (`value_ready`).
  std::vector<int64_t> first_ready(k.values.size(), 0);
  std::vector<int64_t> stream_tiles(k.values.size(), 1);
  std::vector<bool> from_dot(k.values.size(), false);
  std::vector<int64_t> mxu_free(nmxu, 0);
  int64_t vpu_free = 0, eup_free = 0;
  int64_t issue = 0;

  struct OpTiming {
    int64_t start = 0, ready = 0;
    bool is_dot = false;
    bool awaits_dot = false;  // the operand it waited for longest comes from the MXUs
  };
  std::vector<OpTiming> t(k.body.size());
  std::vector<int> order(nmxu);

  for (int i = 0; i < static_cast<int>(k.body.size()); ++i) {
    if (!active[i]) continue;
    const Op& op = k.body[i];
    const int64_t issued = issue++;
    const bool dot = op.kind == OpKind::dot;
    int64_t operands = 0;
    bool awaits_dot = false;
    for (ValueId v : op.inputs) {
      const int64_t r = dot ? value_ready[v] : first_ready[v];
      if (r > operands) operands = r, awaits_dot = from_dot[v];
    }
    // Writing into an existing buffer orders this op after the previous write to it.
    if (k.values[op.output].kind != ValueKind::temp)
      operands = std::max(operands, value_ready[op.output]);

    OpTiming& ti = t[i];
    ti.awaits_dot = awaits_dot;
    int64_t produced_first = 0, tiles = 1;
    if (dot) {
      const DotShape d = k.dot_shape(op);
      const int passes = k.mxu_passes(op);
      const bool int8 =
          k.values[op.inputs[0]].dtype == DType::s8 && k.values[op.inputs[1]].dtype == DType::s8;
      const MxuWork w = mxu_work(chip, d, passes, int8);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return mxu_free[a] < mxu_free[b]; });
      int64_t unit_free = 0;
      for (int j = 0; j < w.mxus; ++j) unit_free = std::max(unit_free, mxu_free[order[j]]);
      ti.start = std::max({issued, operands, unit_free});
      const int64_t end = ti.start + w.cycles;
      for (int j = 0; j < w.mxus; ++j) {
        mxu_free[order[j]] = end;
        s.ops.push_back({i, order[j], ti.start, end});
      }
      ti.ready = end + w.latency;
      ti.is_dot = true;
      // Results pop out one 8-row vreg per 8 streamed rows, so consumers follow at that grain.
      tiles = std::max<int64_t>(1, w.cycles / kSublanes);
      produced_first = ti.start + kSublanes + w.latency;
      s.flops += d.flops();
      s.mxu_pass_flops += d.flops() * passes;
    } else {
      const int64_t c = vpu_cycles(chip, k, op);
      if (c == 0) {  // a view: its result is its operand, available when the operand is
        int64_t ready = 0, first = 0, tiles_in = 1;
        bool dot_in = false;
        for (ValueId v : op.inputs) {
          ready = std::max(ready, value_ready[v]);
          first = std::max(first, first_ready[v]);
          tiles_in = std::max(tiles_in, stream_tiles[v]);
          dot_in = dot_in || from_dot[v];
        }
        value_ready[op.output] = ready;
        first_ready[op.output] = first;
        stream_tiles[op.output] = tiles_in;
        from_dot[op.output] = dot_in;
        ti.ready = ready;
        ti.is_dot = dot_in;
        continue;
      }
      const bool eup = op.kind == OpKind::transcendental;
      int64_t& unit_free = eup ? eup_free : vpu_free;
      ti.start = std::max({issued, operands, unit_free});
      int64_t end = ti.start + c;
      for (ValueId v : op.inputs)  // the last tile's share of the work follows the last tile
        end = std::max(end, value_ready[v] + (c + stream_tiles[v] - 1) / stream_tiles[v]);
      unit_free = end;
      s.ops.push_back(
          {i, nmxu + (eup ? 1 : 0), end - c, end});  // busy cycles, as late as they can be
      ti.ready = end + chip.vpu_latency_cycles +
                 (op.latency == Latency::xla_row_solve_step ? chip.row_solve_step_cycles() : 0);
      produced_first = ti.ready;
    }
    value_ready[op.output] = ti.ready;
    first_ready[op.output] = produced_first;
    stream_tiles[op.output] = tiles;
    from_dot[op.output] = dot;
    s.length = std::max(s.length, ti.ready);
  }

  // Busy = some unit works; the tail after the last unit finishes is the drain of the last result.
  std::vector<std::pair<int64_t, int64_t>> busy;
  busy.reserve(s.ops.size());
  for (const ScheduledOp& o : s.ops) busy.emplace_back(o.start, o.end);
  std::sort(busy.begin(), busy.end());
  // Ops issue one per cycle and every op occupies a unit, so a gap between busy periods means
  // the next op waits for an operand in flight. An MXU op waiting is a dependent chain; a vector
  // op waiting for MXU results is the array draining (and so is the tail after the last dot).
  std::vector<std::pair<int64_t, int>> starts;
  starts.reserve(s.ops.size());
  for (const ScheduledOp& o : s.ops) starts.emplace_back(o.start, o.op);
  std::sort(starts.begin(), starts.end());
  auto gap_cause = [&](int64_t gap_end) {
    auto it = std::lower_bound(starts.begin(), starts.end(), std::pair<int64_t, int>{gap_end, -1});
    const OpTiming& w = t[it->second];
    return !w.is_dot && w.awaits_dot ? Cause::mxu_fill_drain : Cause::dependency;
  };
  int64_t cursor = 0;
  for (const auto& [b, e] : busy) {
    if (b > cursor) s.segments.push_back({gap_cause(b), cursor, b});
    if (e > cursor) {
      const int64_t from = std::max(cursor, b);
      if (!s.segments.empty() && s.segments.back().cause == Cause::busy &&
          s.segments.back().end == from)
        s.segments.back().end = e;
      else
        s.segments.push_back({Cause::busy, from, e});
      cursor = e;
    }
  }
  if (s.length > cursor) {
    int last = -1;
    for (int i = 0; i < static_cast<int>(k.body.size()); ++i)
      if (active[i] && (last < 0 || t[i].ready >= t[last].ready)) last = i;
    s.segments.push_back(
        {t[last].is_dot ? Cause::mxu_fill_drain : Cause::dependency, cursor, s.length});
  }
  return s;
}

}  // namespace tpusim
