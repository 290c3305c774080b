#include "app/gdn_report.h"

#include <fmt/format.h>

#include <map>

#include "app/report.h"
#include "kernels/gdn/layer.h"
#include "sim/timing/engine.h"

namespace tpusim {

std::string gdn_builds_markdown(const ChipSpec& chip, const kernels::gdn::GdnShape& s) {
  namespace g = kernels::gdn;
  const auto& builds = g::kBuilds;
  std::map<g::Build, RunResult> runs;
  for (g::Build b : builds) runs.emplace(b, simulate(chip, g::layer_core(s, {b})));
  auto ms = [&](int64_t c) { return chip.cycles_to_s(c) * 1e3; };
  auto cause = [](const RunResult& r, Cause c) { return r.time[static_cast<int>(c)]; };

  std::string out = fmt::format(
      "One GDN layer core, forward + remat forward + backward, on {} (B {}, T {}, H {}, Dk {}, Dv "
      "{}, "
      "C {}):\n\n",
      chip.name, s.batch, s.seq, s.heads, s.dk, s.dv, s.chunk);
  out +=
      "| build | layer time | saving (against) | HBM traffic | MXU passes | busy | DMA wait | "
      "dependent-chain waits | step + loop overhead |\n";
  out += "|---|---|---|---|---|---|---|---|---|\n";
  for (g::Build b : builds) {
    const RunResult& r = runs.at(b);
    const std::optional<g::Build> against = g::base(b);
    const std::string saving =
        against ? fmt::format("{:.3f} ms ({})", ms(runs.at(*against).cycles - r.cycles),
                              g::name(*against))
                : "-";
    out += fmt::format(
        "| {} | {:.3f} ms | {} | {:.2f} GB | {:.1f} TFLOP | {:.3f} ms | {:.3f} ms | {:.3f} ms | "
        "{:.3f} ms |\n",
        g::name(b), ms(r.cycles), saving, r.hbm_bytes() / 1e9, r.mxu_pass_flops / 1e12,
        ms(cause(r, Cause::busy)), ms(cause(r, Cause::dma_wait)),
        ms(cause(r, Cause::dependency) + cause(r, Cause::mxu_fill_drain)),
        ms(cause(r, Cause::step_overhead) + cause(r, Cause::loop_overhead)));
  }
  out += "\nTime per stage (ms):\n\n| stage |";
  for (g::Build b : builds) out += fmt::format(" {} |", g::name(b));
  out += "\n|---|";
  for (size_t i = 0; i < std::size(builds); ++i) out += "---|";
  out += "\n";
  std::vector<std::map<std::string, int64_t>> per;
  for (g::Build b : builds) {
    per.emplace_back();
    for (const auto& [stage, c] : stage_cycles(runs.at(b))) per.back()[stage] = c;
  }
  for (const auto& [stage, c] : stage_cycles(runs.at(builds[0]))) {
    (void)c;
    out += "| " + stage + " |";
    for (const auto& m : per) out += fmt::format(" {:.3f} |", ms(m.count(stage) ? m.at(stage) : 0));
    out += "\n";
  }
  return out;
}

}  // namespace tpusim
