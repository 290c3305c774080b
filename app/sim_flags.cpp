#include "app/sim_flags.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>

namespace tpusim {

namespace {

// CLI11's PositiveNumber prints its whole double range; this says what is wanted.
const CLI::Validator kPositiveCount(
    [](const std::string& text) {
      int64_t v = 0;
      return CLI::detail::lexical_cast(text, v) && v > 0
                 ? std::string()
                 : fmt::format("{} is not a positive integer", text);
    },
    "POSITIVE");

}  // namespace

void add_sim_flags(CLI::App& app, SimFlags& flags, const char* what_fast_forward_does) {
  app.add_flag("--no-fast-forward", flags.no_fast_forward, what_fast_forward_does);
  app.add_option("--max-grid-steps", flags.limits.grid_steps,
                 "refuse a program with more grid steps than this before simulating it")
      ->check(kPositiveCount)
      ->capture_default_str();
  app.add_option("--max-events", flags.limits.events,
                 "stop a run whose timeline reaches this many events (48 bytes each)")
      ->check(kPositiveCount)
      ->capture_default_str();
}

void apply_sim_flags(const SimFlags& flags) {
  SimOptions::set_default_fast_forward(!flags.no_fast_forward);
  SimOptions::set_default_limits(flags.limits);
}

SimProgress stderr_sim_progress() {
  using Clock = std::chrono::steady_clock;
  // A run is one simulate() call: `done` going back (a new program) restarts the clock.
  struct State {
    Clock::time_point start = Clock::now(), last_line{};
    int64_t last_done = -1;
  };
  return [state = std::make_shared<State>()](int64_t done, int64_t total) {
    const auto now = Clock::now();
    if (done < state->last_done) *state = State{};
    state->last_done = done;
    const double elapsed = std::chrono::duration<double>(now - state->start).count();
    if (elapsed < 2 || now - state->last_line < std::chrono::seconds(5)) return;
    state->last_line = now;
    fmt::print(stderr, "simulating: {:.1f}% of {} grid steps, {:.0f} s\n",
               100.0 * static_cast<double>(done) / static_cast<double>(total), total, elapsed);
  };
}

}  // namespace tpusim
