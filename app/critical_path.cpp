#include "app/critical_path.h"

#include <fmt/format.h>

#include <algorithm>
#include <variant>

namespace tpusim {
namespace {

// For each body op, the ops (earlier in program order) whose outputs it reads: the last writer
// of each operand before it, or none when the operand comes from outside the step.
std::vector<std::vector<int>> producers(const Kernel& k) {
  std::vector<std::vector<int>> out(k.body.size());
  for (size_t i = 0; i < k.body.size(); ++i)
    for (ValueId v : k.body[i].inputs)
      for (int j = static_cast<int>(i) - 1; j >= 0; --j)
        if (k.body[j].output == v) {
          out[i].push_back(j);
          break;
        }
  return out;
}

using StepOps = std::map<int, size_t>;  // body op -> its event (the one ending last)

// The chain of one grid step, walked back from the op that ends last; in time order.
std::vector<PathEdge> step_chain(const RunResult& r, const StepOps& ops,
                                 const std::vector<std::vector<int>>& prod, size_t* first,
                                 size_t* last) {
  size_t cur = ops.begin()->second;
  // Each unit's ops by end, to find the one that held a unit last before a given cycle.
  std::map<int32_t, std::vector<size_t>> by_unit;
  for (const auto& [op, e] : ops) {
    if (r.events[e].end > r.events[cur].end) cur = e;
    by_unit[r.events[e].unit].push_back(e);
  }
  for (auto& [unit, events] : by_unit)
    std::sort(events.begin(), events.end(),
              [&](size_t a, size_t b) { return r.events[a].end < r.events[b].end; });
  *last = cur;
  std::vector<PathEdge> chain;
  for (;;) {
    const TimelineEvent& c = r.events[cur];
    size_t best = SIZE_MAX;
    int64_t best_end = -1;
    bool data = true;
    for (int j : prod[c.op])
      if (const auto it = ops.find(j); it != ops.end()) {
        const TimelineEvent& pe = r.events[it->second];
        if (pe.end <= c.start && pe.start < c.start && pe.end > best_end)
          best = it->second, best_end = pe.end;
      }
    // The op that held the unit, if it freed it later: the last to end by the op's start.
    const std::vector<size_t>& unit = by_unit.at(c.unit);
    auto held = std::upper_bound(unit.begin(), unit.end(), c.start,
                                 [&](int64_t t, size_t e) { return t < r.events[e].end; });
    while (held != unit.begin()) {
      const size_t e = *--held;
      const TimelineEvent& u = r.events[e];
      if (e == cur || u.start >= c.start) continue;
      if (u.end > best_end) best = e, best_end = u.end, data = false;
      break;
    }
    if (best == SIZE_MAX) break;
    chain.push_back({best, cur, data});
    cur = best;
  }
  *first = cur;
  std::reverse(chain.begin(), chain.end());
  return chain;
}

// Splits the gaps between the path's ops by the stalls the core recorded there.
void split_gaps(const RunResult& r, int core, CriticalPath& path) {
  std::vector<const TimelineEvent*> stalls;
  for (const TimelineEvent& e : r.events)
    if (r.units[e.unit].core == core && r.units[e.unit].kind == UnitKind::scalar &&
        (e.cause != Cause::busy || e.op == kFastForwardedSpan))
      stalls.push_back(&e);
  for (size_t i = 0; i < path.events.size(); ++i) {
    const TimelineEvent& e = r.events[path.events[i]];
    path.cycles[std::string(name(r.units[e.unit].kind))] += e.end - e.start;
    if (i + 1 == path.events.size()) break;
    const int64_t a = e.end, b = r.events[path.events[i + 1]].start;
    int64_t covered = 0;
    for (const TimelineEvent* s : stalls) {
      const int64_t lo = std::max(a, s->start), hi = std::min(b, s->end);
      if (hi <= lo) continue;
      const std::string cause =
          s->op == kFastForwardedSpan ? "fast-forwarded" : std::string(name(s->cause));
      path.cycles[cause] += hi - lo;
      covered += hi - lo;
    }
    if (b - a > covered) path.cycles["other work"] += b - a - covered;
  }
}

}  // namespace

CriticalPath critical_path(const RunResult& r, const Program& p, int item, int core) {
  CriticalPath path;
  if (item < 0 || item >= static_cast<int>(p.items.size())) return path;
  const auto* call = std::get_if<KernelCall>(&p.items[item].what);
  if (!call) return path;
  const std::vector<std::vector<int>> prod = producers(*call->kernel);
  std::map<int64_t, StepOps> steps;
  for (size_t i = 0; i < r.events.size(); ++i) {
    const TimelineEvent& e = r.events[i];
    if (e.item != item || e.op < 0 || e.step < 0 || e.cause != Cause::busy ||
        r.units[e.unit].core != core || e.op >= static_cast<int>(prod.size()))
      continue;
    auto [it, fresh] = steps[e.step].try_emplace(e.op, i);
    if (!fresh && r.events[it->second].end < e.end) it->second = i;
  }
  // Grid steps in time order, each joined to the one before it (the barrier).
  std::vector<const StepOps*> order;
  for (const auto& [step, ops] : steps) order.push_back(&ops);
  auto start_of = [&](const StepOps* s) {
    int64_t t = INT64_MAX;
    for (const auto& [op, e] : *s) t = std::min(t, r.events[e].start);
    return t;
  };
  std::sort(order.begin(), order.end(),
            [&](const StepOps* a, const StepOps* b) { return start_of(a) < start_of(b); });
  size_t previous_last = SIZE_MAX;
  for (const StepOps* ops : order) {
    size_t first = 0, last = 0;
    const std::vector<PathEdge> chain = step_chain(r, *ops, prod, &first, &last);
    if (previous_last != SIZE_MAX) path.edges.push_back({previous_last, first, true});
    path.events.push_back(first);
    for (const PathEdge& edge : chain) {
      path.edges.push_back(edge);
      path.events.push_back(edge.to);
    }
    previous_last = last;
  }
  if (path.events.empty()) return path;
  path.steps = static_cast<int>(order.size());
  path.from = r.events[path.events.front()].start;
  path.to = r.events[path.events.back()].end;
  split_gaps(r, core, path);
  return path;
}

std::string critical_path_text(const CriticalPath& path, double clock_hz) {
  if (path.events.empty())
    return "no critical path: none of its grid steps was simulated op by op here (a replayed "
           "call, or no timeline)";
  std::vector<std::pair<int64_t, std::string>> parts;
  for (const auto& [cause, cycles] : path.cycles) parts.emplace_back(cycles, cause);
  std::sort(parts.rbegin(), parts.rend());
  const double span = static_cast<double>(path.to - path.from);
  std::string text =
      fmt::format("critical path {:.4f} ms over {} grid steps, {} ops:", span / clock_hz * 1e3,
                  path.steps, path.events.size());
  for (const auto& [cycles, cause] : parts)
    text += fmt::format(" {} {:.1f}%,", cause, 100 * cycles / std::max(1.0, span));
  text.pop_back();
  return text;
}

}  // namespace tpusim
