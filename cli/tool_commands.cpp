// `tpusim chip`, `calibrate` and `bench`.
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <memory>

#include "app/calibrate.h"
#include "app/report.h"
#include "app/scenario.h"
#include "app/version.h"
#include "cli/commands.h"
#include "kernels/generic.h"
#include "models/chip_loader.h"
#include "sim/timing/engine.h"

namespace tpusim::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void bench() {
  const ChipSpec chip = load_chip("v5e");
  const auto k = kernels::pallas_matmul({8192, 8192, 8192, 128, 128, 128});
  for (bool trace : {false, true}) {
    SimOptions opt;
    opt.record_timeline = trace;
    const auto t0 = std::chrono::steady_clock::now();
    const RunResult r = simulate_kernel(chip, k, opt);
    const double wall = seconds_since(t0);
    const int64_t steps = k->grid_steps();
    // Simulated events: per grid step one body schedule replay, its ops and its DMA transfers.
    int64_t events = 0;
    if (trace) events = static_cast<int64_t>(r.events.size());
    fmt::print(
        "matmul 8192^3, blocks 128^3, {} grid steps, timeline {}: wall {:.3f} s, {:.2f} M grid "
        "steps/s{}, simulated {:.3f} ms\n",
        steps, trace ? "on " : "off", wall, steps / wall / 1e6,
        trace ? fmt::format(", {} timeline events ({:.2f} M/s)", events, events / wall / 1e6) : "",
        r.time_s * 1e3);
  }
  // Whole training steps: every layer kind's program simulated once, as `run` and `validate` do.
  for (const char* f : {"scenarios/calibration/c1/c1_main.yaml",
                        "scenarios/calibration/c3/c3_07_v6e_llama3.1-70b.yaml",
                        "scenarios/blind/b3_v5p-64_context64_1m_main.yaml"}) {
    const Scenario s = load_scenario(repo_path(f));
    const auto t0 = std::chrono::steady_clock::now();
    const StepPrediction p = predict_step(s.step);
    fmt::print("training step {}: wall {:.3f} s for a simulated {:.3f} s step\n", s.name,
               seconds_since(t0), p.step_time_s);
  }
}

}  // namespace

namespace {

// The unit of a chip parameter, from the naming convention of its key.
std::string unit_of(const std::string& key) {
  auto ends = [&](const std::string& suffix) {
    return key.size() >= suffix.size() &&
           key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends("_hz")) return "Hz";
  if (ends("_bytes_per_s") || ends("_bytes_per_s_per_chip")) return "B/s";
  if (ends("_bytes")) return "B";
  if (ends("_cycles")) return "cycles";
  if (ends("_per_cycle")) return "per cycle";
  if (ends("_s")) return "s";
  if (ends("_flops")) return "FLOP/s";
  if (ends("_ops")) return "op/s";
  return "";
}

}  // namespace

Command chip_command(CLI::App& app) {
  struct Args {
    std::string name, json;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand(
      "chip", "print a chip spec: every value with its unit, its kind and where it comes from");
  c->add_option("name", a->name, "chip name or chip YAML file")->required();
  c->add_option("--json", a->json, "write the same as JSON to FILE");
  return {
      c, [a] {
        const ChipSpec chip = load_chip(a->name);
        nlohmann::json j = {{"tool", tool_json()}, {"chip", chip.name}};
        fmt::print(
            "chip {}  (kind: source = published, derived = computed from published "
            "figures, calibrated = fitted by tpusim calibrate, assumed = no evidence)\n",
            chip.name);
        for (const auto& [key, prov] : chip.provenance) {
          const std::string value = chip.value_text.at(key), unit = unit_of(key);
          const auto colon = prov.find(':');
          const std::string kind = prov.substr(0, colon);
          const std::string why = colon == std::string::npos ? "" : prov.substr(colon + 2);
          fmt::print("  {:<30} {:>14} {:<10} {:<10} {}\n", key, value, unit, kind, why);
          j["values"][key] = {{"value", value}, {"unit", unit}, {"kind", kind}, {"source", why}};
        }
        OutputFiles files;
        if (!a->json.empty()) files.stage(a->json, json_text(j, 2) + "\n");
        files.commit();
      }};
}

Command calibrate_command(CLI::App& app) {
  struct Args {
    bool write = false;
    std::string markdown;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand(
      "calibrate",
      "fit every calibrated constant on its measured data and print predicted against measured");
  c->add_flag("--write", a->write, "update the chip files and docs/calibration.md");
  c->add_option("--markdown", a->markdown,
                "write the full report to FILE ('-': print it instead of the summary)");
  return {c, [a] {
            const Calibration cal = calibrate([](const std::string& what, double seconds) {
              fmt::print(stderr, "calibrate: {} ({:.1f} s)\n", what, seconds);
            });
            OutputFiles files;
            if (a->write) stage_calibration(cal, files);
            if (!a->markdown.empty() && a->markdown != "-") files.stage(a->markdown, cal.markdown);
            files.commit();
            std::cout << (a->markdown == "-" ? cal.markdown : cal.summary());
          }};
}

Command bench_command(CLI::App& app) {
  CLI::App* c =
      app.add_subcommand("bench", "measure simulation speed (8192^3 matmul, 128^3 blocks)");
  return {c, bench};
}

}  // namespace tpusim::cli
