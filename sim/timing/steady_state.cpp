#include "sim/timing/steady_state.h"

#include <algorithm>
#include <cstring>
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
  const double busy_for = hbm_.free_at() - static_cast<double>(earliest + dma_latency_);
  int64_t pipe_bits = 0;
  if (busy_for > 0) std::memcpy(&pipe_bits, &busy_for, sizeof pipe_bits);
  r.state.push_back(pipe_bits);
  const auto& busy = rec_.busy_totals();
  r.counters.insert(r.counters.end(), busy.begin(), busy.end());
  r.counters.insert(r.counters.end(), {hbm_.read_bytes(), hbm_.write_bytes(),
                                       kernel_counters_->flops, kernel_counters_->mxu_pass_flops});
  uint64_t h = 1469598103934665603ull;
  for (int64_t v : r.state) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
  r.hash = h;
}

void SteadyState::observe() {
  // The ring holds `held_` records before the slot of the newest one, which is filled now.
  const size_t slots = ring_.size();
  Record& now = ring_[newest_];
  record(now);
  for (size_t p = 1; p <= held_; ++p) {
    const Record& old = ring_[(newest_ + slots - p) % slots];
    if (old.hash != now.hash || old.state != now.state) continue;
    int64_t periods = std::numeric_limits<int64_t>::max();
    found_.assign(cores_.size(), 0);
    for (size_t c = 0; c < cores_.size() && periods > 0; ++c)
      if (cores_[c]->point() != TensorCore::Point::done)
        periods = found_[c] = cores_[c]->repeating_periods(now.steps[c] - old.steps[c], periods);
    if (periods > 0) {
      for (size_t c = 0; c < cores_.size(); ++c)  // a core that looked further: back to `periods`
        if (found_[c] > periods) cores_[c]->repeating_periods(now.steps[c] - old.steps[c], periods);
      jump(old, now, periods);
      held_ = 0;  // the state after the jump is `now` shifted: start over from it
      return;
    }
  }
  newest_ = (newest_ + 1) % slots;
  held_ = std::min(held_ + 1, kHistory);
}

void SteadyState::jump(const Record& old, const Record& now, int64_t periods) {
  std::vector<int64_t>& delta = delta_;
  delta.resize(now.counters.size());
  for (size_t i = 0; i < delta.size(); ++i) delta[i] = now.counters[i] - old.counters[i];
  const int64_t cycles = periods * (now.t - old.t);
  size_t at = 0;
  for (size_t c = 0; c < cores_.size(); ++c) {
    TensorCore& core = *cores_[c];
    if (core.point() != TensorCore::Point::done) {
      const int64_t period = now.steps[c] - old.steps[c];
      core.skip(periods, period, cycles, delta.data() + at);
      skipped_steps_ += periods * period;
    }
    at += core.counter_count();
  }
  const auto& busy = rec_.busy_totals();
  for (size_t u = 0; u < busy.size(); ++u)
    rec_.add_busy(static_cast<int>(u), periods * delta[at + u]);
  at += busy.size();
  hbm_.skip(cycles, periods * delta[at], periods * delta[at + 1]);
  kernel_counters_->flops += periods * delta[at + 2];
  kernel_counters_->mxu_pass_flops += periods * delta[at + 3];
}

}  // namespace tpusim
