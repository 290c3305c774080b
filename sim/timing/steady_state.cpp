#include "sim/timing/steady_state.h"

#include <algorithm>
#include <limits>

namespace tpusim {

void SteadyState::begin(std::vector<TensorCore*> cores, KernelCounters* counters,
                        int64_t dma_latency) {
  cores_ = std::move(cores);
  kernel_counters_ = counters;
  dma_latency_ = dma_latency;
  if (ring_.empty()) ring_.resize(kHistory + 1);
  newest_ = 0;
  held_ = 0;
  known_.clear();
}

void SteadyState::record(Record& r) const {
  r.state.clear();
  r.counters.clear();
  r.steps.clear();
  r.t = cores_[0]->clock();
  int64_t earliest = std::numeric_limits<int64_t>::max();
  for (const TensorCore* c : cores_) {
    c->state(r.t, r.state);
    c->counters(r.counters);
    r.steps.push_back(r.counters.back());
    if (c->point() != TensorCore::Point::done) earliest = std::min(earliest, c->clock());
  }
  // The pipe matters only if it is still busy when the earliest next request can reach it.
  r.state.push_back(std::max<int64_t>(0, hbm_.busy_after(earliest + dma_latency_)));
  const auto& busy = rec_.busy_totals();
  r.counters.insert(r.counters.end(), busy.begin(), busy.end());
  r.counters.insert(r.counters.end(), {hbm_.read_bytes(), hbm_.write_bytes(),
                                       kernel_counters_->flops, kernel_counters_->mxu_pass_flops});
  uint64_t h = 1469598103934665603ull;
  for (int64_t v : r.state) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
  r.hash = h;
}

bool SteadyState::try_period(const Period& p) {
  int64_t periods = std::numeric_limits<int64_t>::max();
  found_.assign(cores_.size(), 0);
  for (size_t c = 0; c < cores_.size() && periods > 0; ++c)
    if (!p.patterns[c].empty())
      periods = found_[c] = cores_[c]->repeating_periods(p.patterns[c], periods);
  if (periods <= 0) return false;
  for (size_t c = 0; c < cores_.size(); ++c)  // a core that looked further: back to `periods`
    if (found_[c] > periods) cores_[c]->repeating_periods(p.patterns[c], periods);
  jump(p, periods);
  held_ = 0;  // the state after the jump is the same shifted: start over from it
  return true;
}

void SteadyState::observe() {
  // The ring holds `held_` records before the slot of the newest one, which is filled now.
  const size_t slots = ring_.size();
  Record& now = ring_[newest_];
  record(now);
  if (auto k = known_.find(now.hash); k != known_.end() && k->second.state == now.state)
    if (try_period(k->second)) return;
  for (size_t back = 1; back <= held_; ++back) {
    const Record& old = ring_[(newest_ + slots - back) % slots];
    if (old.hash != now.hash || old.state != now.state) continue;
    Period& p = candidate_;
    p.state = now.state;
    p.cycles = now.t - old.t;
    p.delta.resize(now.counters.size());
    for (size_t i = 0; i < p.delta.size(); ++i) p.delta[i] = now.counters[i] - old.counters[i];
    p.patterns.resize(cores_.size());
    bool kept = true;
    for (size_t c = 0; c < cores_.size(); ++c) {
      p.patterns[c].clear();
      if (cores_[c]->point() != TensorCore::Point::done)
        kept = kept && cores_[c]->last_patterns(now.steps[c] - old.steps[c], p.patterns[c]);
    }
    if (!kept) continue;
    if (known_.size() == kKnownPeriods) known_.clear();
    known_[now.hash] = p;
    if (try_period(p)) return;
  }
  newest_ = (newest_ + 1) % slots;
  held_ = std::min(held_ + 1, kHistory);
}

void SteadyState::jump(const Period& p, int64_t periods) {
  const int64_t cycles = periods * p.cycles;
  size_t at = 0;
  for (size_t c = 0; c < cores_.size(); ++c) {
    TensorCore& core = *cores_[c];
    if (!p.patterns[c].empty()) {
      const int64_t period = static_cast<int64_t>(p.patterns[c].size());
      core.skip(periods, period, cycles, p.delta.data() + at);
      skipped_steps_ += periods * period;
    }
    at += core.counter_count();
  }
  const auto& busy = rec_.busy_totals();
  for (size_t u = 0; u < busy.size(); ++u)
    rec_.add_busy(static_cast<int>(u), periods * p.delta[at + u]);
  at += busy.size();
  hbm_.skip(cycles, periods * p.delta[at], periods * p.delta[at + 1]);
  kernel_counters_->flops += periods * p.delta[at + 2];
  kernel_counters_->mxu_pass_flops += periods * p.delta[at + 3];
}

}  // namespace tpusim
