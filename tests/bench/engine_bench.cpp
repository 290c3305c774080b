// Simulation speed (Google Benchmark): wall time and grid steps per second for the 8192^3 matmul
// with 128^3 blocks (262,144 grid steps), with and without timeline recording.
#include <benchmark/benchmark.h>

#include "kernels/generic.h"
#include "models/chip_loader.h"
#include "sim/timing/engine.h"

namespace {

void BM_Matmul8192Blocks128(benchmark::State& state) {
  const tpusim::ChipSpec chip = tpusim::load_chip("v5e");
  const auto k = tpusim::kernels::pallas_matmul({8192, 8192, 8192, 128, 128, 128});
  tpusim::SimOptions opt;
  opt.record_timeline = state.range(0) != 0;
  int64_t events = 0;
  for (auto _ : state) {
    const tpusim::RunResult r = tpusim::simulate_kernel(chip, k, opt);
    events += static_cast<int64_t>(r.events.size());
    benchmark::DoNotOptimize(r.cycles);
  }
  state.counters["grid_steps/s"] = benchmark::Counter(
      static_cast<double>(k->grid_steps()) * state.iterations(), benchmark::Counter::kIsRate);
  if (opt.record_timeline)
    state.counters["events/s"] =
        benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Matmul8192Blocks128)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
