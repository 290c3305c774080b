// build/tpusim: the command-line front end. Commands:
//   kernel matmul|xla-dot|elementwise   simulate one kernel and print its summary
//   chip NAME                           print a chip spec with the provenance of every value
//   calibrate [--write]                 fit the engine constants to the v5e matmul table
//   bench                               measure simulation speed
// Every simulating command takes --json FILE and --trace FILE. Errors print one line and exit 2.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "app/collective_fit.h"
#include "app/command_line.h"
#include "app/gdn_report.h"
#include "app/matmul_table.h"
#include "app/report.h"
#include "app/scenario.h"
#include "app/step_fit.h"
#include "app/step_report.h"
#include "app/sweep.h"
#include "app/timeline_svg.h"
#include "kernels/gdn/invert.h"
#include "kernels/gdn/layer.h"
#include "kernels/gdn/scan.h"
#include "kernels/gdn/xla.h"
#include "kernels/generic.h"
#include "models/chip_loader.h"
#include "sim/error.h"
#include "sim/timing/engine.h"

namespace {

using namespace tpusim;
namespace fs = std::filesystem;

struct Outputs {
  std::string json, trace, svg;
  std::vector<double> window_us;
  void add_to(CLI::App* cmd) {
    cmd->add_option("--json", json, "write machine-readable results to FILE");
    cmd->add_option("--trace", trace, "write a Chrome trace-event JSON (open in Perfetto) to FILE");
    cmd->add_option("--svg", svg, "write a timeline picture (SVG) to FILE");
    cmd->add_option("--window-us", window_us,
                    "time window of the SVG picture: FROM TO (microseconds)")
        ->expected(2);
  }
  bool timeline() const { return !trace.empty() || !svg.empty(); }
};

DType parse_dtype(const std::string& s) {
  if (s == "bf16") return DType::bf16;
  if (s == "f32") return DType::f32;
  if (s == "int8") return DType::s8;
  throw Error(fmt::format("unknown dtype '{}' (known: bf16, f32, int8)", s));
}

void run_and_report(const ChipSpec& chip, const Program& program, const nlohmann::json& config,
                    const Outputs& out) {
  SimOptions opt;
  opt.record_timeline = out.timeline();
  const RunResult r = simulate(chip, program, opt);
  OutputFiles files;
  if (!out.json.empty()) files.stage(out.json, result_json(r, chip, config).dump(2) + "\n");
  if (!out.trace.empty()) files.stage(out.trace, chrome_trace(r).dump() + "\n");
  if (!out.svg.empty()) {
    SvgWindow w;
    if (out.window_us.size() == 2) w = {out.window_us[0], out.window_us[1]};
    files.stage(out.svg, timeline_svg(r, w));
  }
  files.commit();
  std::cout << summary_text(r, chip);
}

void run_and_report(const ChipSpec& chip, std::shared_ptr<const Kernel> kernel,
                    const nlohmann::json& config, const Outputs& out) {
  Program p;
  p.name = kernel->name;
  p.add_kernel(std::move(kernel));
  run_and_report(chip, p, config, out);
}

// Options shared by the GDN commands (gdn_kernels.md notation).
struct GdnArgs {
  std::string chip = "v5e", build = "ladder", dtype = "bf16", pass = "fwd";
  kernels::gdn::GdnShape shape;
  int64_t head_tile = 0, tile_n = 0;
  Outputs out;

  CLI::App* add(CLI::App* parent, const std::string& name, const std::string& help) {
    CLI::App* c = parent->add_subcommand(name, help);
    c->add_option("--chip", chip, "chip name or chip YAML file")->capture_default_str();
    c->add_option("--batch", shape.batch, "per-device batch B")->capture_default_str();
    c->add_option("--seq", shape.seq, "sequence length T (a multiple of the chunk)")
        ->capture_default_str();
    c->add_option("--heads", shape.heads, "value heads H")->capture_default_str();
    c->add_option("--chunk", shape.chunk, "chunk size C")->capture_default_str();
    c->add_option("--dk", shape.dk, "key head dim")->capture_default_str();
    c->add_option("--dv", shape.dv, "value head dim")->capture_default_str();
    c->add_option("--dtype", dtype, "compute dtype (bf16, f32)")->capture_default_str();
    out.add_to(c);
    return c;
  }
  nlohmann::json config(const std::string& command, const ChipSpec& c) const {
    return {{"command", command}, {"chip", c.name},         {"batch", shape.batch},
            {"seq", shape.seq},   {"heads", shape.heads},   {"chunk", shape.chunk},
            {"dk", shape.dk},     {"dv", shape.dv},         {"dtype", dtype},
            {"build", build},     {"head_tile", head_tile}, {"tile_n", tile_n},
            {"pass", pass}};
  }
};

std::string repo_file(const std::string& relative) {
  return (fs::path(models_dir()).parent_path() / relative).string();
}

// Fits the engine's constants (matmul table, AllGather) and the whole-step ones (the MXU
// fill/drain latency on C1's head-batching saving, v6e's vector rate scale on C3 #1), each on its
// own data. The fits depend on each other (the matmul table sees the fill/drain latency, C1 the
// matmul constants), so they repeat until the values stop changing. --write records them and
// docs/calibration.md.
void calibrate(bool write) {
  const ChipSpec v5e = load_chip("v5e");
  MatmulTable cal = load_matmul_table(repo_file("scenarios/calibration/v5e_pallas_matmul.yaml"));
  MatmulTable blind = load_matmul_table(repo_file("scenarios/blind/b4_pallas_matmul_128.yaml"));
  CollectiveTable gather =
      load_collective_table(repo_file("scenarios/calibration/v5e_allgather.yaml"));
  const std::string c1 = "scenarios/calibration/c1/", c3 = "scenarios/calibration/c3/";
  EngineConstants engine = recorded_engine_constants(v5e);
  StepConstantFit fill_drain, vector_scale;
  for (int round = 0; round < 8; ++round) {
    const EngineConstants before = engine;
    // The matmul fit searches its own constants from a fixed start; it sees this round's rest.
    const ChipSpec chip = with_constants(v5e, engine);
    engine.matmul = fit_constants(chip, cal);
    engine.collectives = fit_collective_constants(with_constants(chip, engine.matmul), gather);
    fill_drain =
        fit_mxu_fill_drain(repo_file(c1 + "c1_scan.yaml"), repo_file(c1 + "c1_heads.yaml"), engine);
    engine.mxu_fill_drain_per_dim = fill_drain.value;
    if (engine.matmul.grid_step_overhead_cycles == before.matmul.grid_step_overhead_cycles &&
        engine.matmul.dma_latency_cycles == before.matmul.dma_latency_cycles &&
        engine.mxu_fill_drain_per_dim == before.mxu_fill_drain_per_dim)
      break;
  }
  vector_scale = fit_vector_rate_scale(repo_file(c3 + "c3_01_v6e_llama3.1-8b.yaml"), engine);
  const ChipSpec fitted = with_constants(v5e, engine);
  predict(fitted, cal);
  predict(fitted, blind);
  predict(fitted, gather);
  const std::string md = calibration_markdown(fitted, engine.matmul, cal, blind) +
                         collective_calibration_markdown(engine.collectives, gather) +
                         step_calibration_markdown(fill_drain, vector_scale, engine,
                                                   repo_file(c3 + "c3_07_v6e_llama3.1-70b.yaml"));
  std::cout << md;
  if (write) {
    OutputFiles files;
    const fs::path chips = fs::path(models_dir()) / "chips";
    std::vector<CalibratedValue> values = calibrated_values(engine.matmul, cal);
    for (const CalibratedValue& v : calibrated_values(engine.collectives, gather))
      values.push_back(v);
    values.push_back({fill_drain.key, fill_drain.value, false,
                      fmt::format("fitted by `tpusim calibrate` on C1's head-batching saving: "
                                  "c1_scan.yaml minus c1_heads.yaml step time (measured {:.4g} s, "
                                  "predicted {:.4g} s)",
                                  fill_drain.measured, fill_drain.predicted)});
    files.stage((chips / "shared.yaml").string(),
                shared_yaml_with((chips / "shared.yaml").string(), values));
    const std::string chip_file = (chips / (vector_scale.chip + ".yaml")).string();
    files.stage(chip_file, chip_yaml_with(chip_file, vector_scale));
    files.stage(repo_file("docs/calibration.md"), md);
    files.commit();
    std::cout << "\nwrote " << (chips / "shared.yaml").string() << ", " << chip_file
              << " and docs/calibration.md\n";
  }
}

void bench() {
  const ChipSpec chip = load_chip("v5e");
  const auto k = kernels::pallas_matmul({8192, 8192, 8192, 128, 128, 128});
  for (bool trace : {false, true}) {
    SimOptions opt;
    opt.record_timeline = trace;
    const auto t0 = std::chrono::steady_clock::now();
    const RunResult r = simulate_kernel(chip, k, opt);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
    const Scenario s = load_scenario(repo_file(f));
    const auto t0 = std::chrono::steady_clock::now();
    const StepPrediction p = predict_step(s.step);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("training step {}: wall {:.3f} s for a simulated {:.3f} s step\n", s.name, wall,
               p.step_time_s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tpusim: a TPU simulator and cost model for Pallas kernel schedules"};
  app.require_subcommand(1);
  std::string chip_name = "v5e";

  CLI::App* kernel = app.add_subcommand("kernel", "simulate one kernel");
  kernel->require_subcommand(1);

  kernels::MatmulShape mm;
  std::string dtype = "bf16";
  Outputs mm_out;
  CLI::App* matmul =
      kernel->add_subcommand("matmul", "blocked Pallas matmul (the Pallas TPU guide's kernel)");
  matmul->add_option("--chip", chip_name, "chip name or chip YAML file")->capture_default_str();
  matmul->add_option("--m", mm.m, "rows of x and z")->required();
  matmul->add_option("--k", mm.k, "contracting dimension")->required();
  matmul->add_option("--n", mm.n, "columns of y and z")->required();
  matmul->add_option("--bm", mm.bm, "block rows")->required();
  matmul->add_option("--bk", mm.bk, "block contracting size")->required();
  matmul->add_option("--bn", mm.bn, "block columns")->required();
  matmul->add_option("--dtype", dtype, "input and output dtype (bf16, f32)")->capture_default_str();
  mm_out.add_to(matmul);

  int64_t dm = 0, dk = 0, dn = 0;
  Outputs dot_out;
  CLI::App* xdot = kernel->add_subcommand("xla-dot", "an XLA dot with XLA's own tiling");
  xdot->add_option("--chip", chip_name, "chip name or chip YAML file")->capture_default_str();
  xdot->add_option("--m", dm, "rows")->required();
  xdot->add_option("--k", dk, "contracting dimension")->required();
  xdot->add_option("--n", dn, "columns")->required();
  xdot->add_option("--dtype", dtype, "operand dtype (bf16, f32, int8)")->capture_default_str();
  dot_out.add_to(xdot);

  int64_t rows = 0, cols = 0, block_rows = 0;
  Outputs ew_out;
  CLI::App* ew = kernel->add_subcommand("elementwise", "y = 2x, HBM-bound");
  ew->add_option("--chip", chip_name, "chip name or chip YAML file")->capture_default_str();
  ew->add_option("--rows", rows, "array rows")->required();
  ew->add_option("--cols", cols, "array columns")->required();
  ew->add_option("--block-rows", block_rows, "rows per block")->required();
  ew->add_option("--dtype", dtype, "dtype (bf16, f32)")->capture_default_str();
  ew_out.add_to(ew);

  GdnArgs gdn;
  CLI::App* gdn_layer = gdn.add(
      kernel, "gdn-layer",
      "one GDN layer core, forward + remat forward + backward, for a build of the kernel change");
  gdn_layer->add_option("--build", gdn.build, "main, scan, heads or ladder")->capture_default_str();
  gdn_layer->add_option("--head-tile", gdn.head_tile,
                        "heads per scan grid cell, forward and backward (default: the build's)");
  gdn_layer->add_option("--tile-n", gdn.tile_n,
                        "chunk tiles per inversion grid cell (default: 8, 4, 2 or 1)");
  CLI::App* gdn_fwd = gdn.add(kernel, "gdn-scan-fwd", "the inter-chunk scan forward kernel");
  gdn_fwd->add_option("--head-tile", gdn.head_tile, "heads per grid cell (default 8)");
  CLI::App* gdn_bwd = gdn.add(kernel, "gdn-scan-bwd", "the inter-chunk scan backward kernel");
  gdn_bwd->add_option("--head-tile", gdn.head_tile, "heads per grid cell (default 4)");
  CLI::App* gdn_lax = gdn.add(kernel, "gdn-lax-scan",
                              "the XLA baseline: lax.scan over chunks with the state in HBM");
  gdn_lax->add_option("--pass", gdn.pass, "fwd, remat (forward stacking residuals) or bwd")
      ->capture_default_str();
  CLI::App* gdn_inv = gdn.add(kernel, "gdn-invert", "the triangular inversion ladder kernel");
  gdn_inv->add_option("--tile-n", gdn.tile_n, "chunk tiles per grid cell (default: 8, 4, 2 or 1)");
  CLI::App* gdn_solve = gdn.add(kernel, "gdn-solve-triangular",
                                "the XLA baseline: solve_triangular's row-sequential loop");

  GdnArgs cmp;
  CLI::App* gdn_builds = cmp.add(
      &app, "gdn-builds", "the four builds of the GDN kernel change side by side (markdown)");

  std::string run_file, run_json;
  CLI::App* run_cmd = app.add_subcommand("run", "predict a training step from a scenario file");
  run_cmd->add_option("file", run_file, "scenario YAML")->required();
  run_cmd->add_option("--json", run_json, "write machine-readable results to FILE");
  std::string run_trace;
  run_cmd->add_option("--trace", run_trace,
                      "write a Chrome trace of one layer of each kind and the logits (no "
                      "optimizer, no collectives) to FILE");

  std::vector<std::string> validate_paths;
  std::string validate_json, validate_md;
  CLI::App* validate_cmd = app.add_subcommand(
      "validate", "predicted against measured for every scenario with measured values");
  validate_cmd->add_option(
      "paths", validate_paths,
      "scenario files or folders (default: scenarios/calibration scenarios/blind)");
  validate_cmd->add_option("--json", validate_json, "write the rows as JSON to FILE");
  validate_cmd->add_option("--markdown", validate_md,
                           "write the report to FILE (default docs/validation.md)");

  std::string sweep_file, sweep_csv_file, sweep_json_file, shard = "0/1";
  int jobs = 1;
  CLI::App* sweep_cmd =
      app.add_subcommand("sweep", "expand a base scenario over axes and run the points");
  sweep_cmd->add_option("file", sweep_file, "sweep YAML (base + axes)")->required();
  sweep_cmd->add_option("--jobs", jobs, "worker processes")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sweep_cmd
      ->add_option("--shard", shard,
                   "run only points i, i+n, i+2n, ... (i/n), for spreading a sweep over machines")
      ->capture_default_str();
  sweep_cmd->add_option("--csv", sweep_csv_file,
                        "CSV output (default: <sweep name>[.shard-i-of-n].csv)");
  sweep_cmd->add_option("--json", sweep_json_file,
                        "JSON output (default: <sweep name>[.shard-i-of-n].json)");

  CLI::App* chip_cmd =
      app.add_subcommand("chip", "print a chip spec and where each value comes from");
  chip_cmd->add_option("name", chip_name, "chip name or chip YAML file")->required();

  bool write = false;
  CLI::App* cal = app.add_subcommand(
      "calibrate",
      "fit the engine constants to the v5e matmul table and print predicted against measured");
  cal->add_flag("--write", write, "update models/chips/shared.yaml and docs/calibration.md");

  CLI::App* bench_cmd =
      app.add_subcommand("bench", "measure simulation speed (8192^3 matmul, 128^3 blocks)");

  if (const auto stop = parse_command_line(app, "tpusim", argc, argv)) return *stop;
  try {
    if (matmul->parsed()) {
      mm.dtype = parse_dtype(dtype);
      const ChipSpec chip = load_chip(chip_name);
      nlohmann::json config = {{"command", "kernel matmul"},
                               {"chip", chip.name},
                               {"m", mm.m},
                               {"k", mm.k},
                               {"n", mm.n},
                               {"bm", mm.bm},
                               {"bk", mm.bk},
                               {"bn", mm.bn},
                               {"dtype", dtype}};
      run_and_report(chip, kernels::pallas_matmul(mm), config, mm_out);
    } else if (xdot->parsed()) {
      const ChipSpec chip = load_chip(chip_name);
      nlohmann::json config = {{"command", "kernel xla-dot"},
                               {"chip", chip.name},
                               {"m", dm},
                               {"k", dk},
                               {"n", dn},
                               {"dtype", dtype}};
      run_and_report(chip, kernels::xla_dot(chip, dm, dk, dn, parse_dtype(dtype)), config, dot_out);
    } else if (ew->parsed()) {
      const ChipSpec chip = load_chip(chip_name);
      nlohmann::json config = {
          {"command", "kernel elementwise"}, {"chip", chip.name}, {"rows", rows}, {"cols", cols},
          {"block_rows", block_rows},        {"dtype", dtype}};
      run_and_report(chip, kernels::elementwise_scale(rows, cols, block_rows, parse_dtype(dtype)),
                     config, ew_out);
    } else if (gdn_layer->parsed() || gdn_fwd->parsed() || gdn_bwd->parsed() || gdn_lax->parsed() ||
               gdn_inv->parsed() || gdn_solve->parsed()) {
      namespace g = kernels::gdn;
      gdn.shape.compute = parse_dtype(gdn.dtype);
      gdn.shape.check();
      const ChipSpec chip = load_chip(gdn.chip);
      Program p;
      std::string command;
      if (gdn_layer->parsed()) {
        command = "kernel gdn-layer";
        p = g::layer_core(gdn.shape,
                          {g::parse_build(gdn.build), gdn.head_tile, gdn.head_tile, gdn.tile_n});
      } else if (gdn_fwd->parsed()) {
        command = "kernel gdn-scan-fwd";
        p.add_kernel(g::scan_forward(gdn.shape, {gdn.head_tile > 0 ? gdn.head_tile : 8}));
      } else if (gdn_bwd->parsed()) {
        command = "kernel gdn-scan-bwd";
        p.add_kernel(g::scan_backward(gdn.shape, {gdn.head_tile > 0 ? gdn.head_tile : 4}));
      } else if (gdn_lax->parsed()) {
        command = "kernel gdn-lax-scan";
        if (gdn.pass != "fwd" && gdn.pass != "remat" && gdn.pass != "bwd")
          throw Error(fmt::format("unknown --pass '{}' (known: fwd, remat, bwd)", gdn.pass));
        p = gdn.pass == "bwd" ? g::xla_lax_scan_backward(gdn.shape)
                              : g::xla_lax_scan_forward(gdn.shape, gdn.pass == "remat");
      } else if (gdn_inv->parsed()) {
        command = "kernel gdn-invert";
        p.add_kernel(g::invert_ladder(
            gdn.shape, gdn.tile_n > 0 ? gdn.tile_n : g::default_tile(gdn.shape.chunks())));
      } else {
        command = "kernel gdn-solve-triangular";
        p = g::xla_solve_triangular(gdn.shape);
      }
      if (p.name.empty()) p.name = command;
      run_and_report(chip, p, gdn.config(command, chip), gdn.out);
    } else if (gdn_builds->parsed()) {
      cmp.shape.compute = parse_dtype(cmp.dtype);
      std::cout << gdn_builds_markdown(load_chip(cmp.chip), cmp.shape);
    } else if (run_cmd->parsed()) {
      const Scenario sc = load_scenario(run_file);
      const StepPrediction p = predict_step(sc.step);
      OutputFiles files;
      if (!run_json.empty()) files.stage(run_json, step_json(sc, p).dump(2) + "\n");
      if (!run_trace.empty()) {
        ChipSpec chip = sc.step.chip;
        chip.host_dispatch_s = 0;
        files.stage(run_trace, chrome_trace(simulate(chip, one_of_each_part(sc.step),
                                                     {.record_timeline = true}))
                                       .dump() +
                                   "\n");
      }
      files.commit();
      std::cout << step_summary_text(sc, p);
    } else if (validate_cmd->parsed()) {
      if (validate_paths.empty())
        validate_paths = {repo_file("scenarios/calibration"), repo_file("scenarios/blind")};
      std::vector<Scenario> scenarios;
      for (const std::string& f : scenario_files(validate_paths))
        scenarios.push_back(load_scenario(f));  // all are checked before any runs
      std::vector<ValidationRow> rows;
      std::vector<std::pair<Scenario, StepPrediction>> blind;
      for (const Scenario& sc : scenarios) {
        const StepPrediction p = predict_step(sc.step);
        if (sc.measured.empty()) blind.emplace_back(sc, p);
        for (const ValidationRow& r : validation_rows(sc, p)) rows.push_back(r);
      }
      const std::string md = validation_markdown(rows, blind);
      nlohmann::json j = {{"rows", nlohmann::json::array()}};
      for (const ValidationRow& r : rows)
        j["rows"].push_back({{"scenario", r.scenario},
                             {"metric", r.metric},
                             {"predicted", r.predicted},
                             {"measured", r.measured},
                             {"error_pct", r.error_pct()}});
      OutputFiles files;
      files.stage(validate_md.empty() ? repo_file("docs/validation.md") : validate_md, md);
      if (!validate_json.empty()) files.stage(validate_json, j.dump(2) + "\n");
      files.commit();
      std::cout << md;
    } else if (sweep_cmd->parsed()) {
      int si = 0, sn = 1;
      if (std::sscanf(shard.c_str(), "%d/%d", &si, &sn) != 2)
        throw Error(fmt::format("--shard '{}': expected i/n, for example 0/4", shard));
      const Sweep sw = load_sweep(sweep_file);
      const bool tty = isatty(fileno(stderr));
      const auto results = run_sweep(sw, jobs, si, sn, [&](int done, int total) {
        const int width = 40, filled = total ? width * done / total : width;
        fmt::print(stderr, "{}[{}{}] {}/{} points", tty ? "\r" : "", std::string(filled, '#'),
                   std::string(width - filled, '.'), done, total);
        if (!tty || done == total) fmt::print(stderr, "\n");
      });
      const std::string stem = sn > 1 ? fmt::format("{}.shard-{}-of-{}", sw.name, si, sn) : sw.name;
      OutputFiles files;
      files.stage(sweep_csv_file.empty() ? stem + ".csv" : sweep_csv_file, sweep_csv(sw, results));
      files.stage(sweep_json_file.empty() ? stem + ".json" : sweep_json_file,
                  sweep_json(sw, results));
      files.commit();
      int failed = 0;
      for (const PointResult& r : results) failed += !r.ok;
      fmt::print("{} points run ({} could not: see the error column), {} points in the sweep\n",
                 results.size(), failed, sw.points.size());
    } else if (chip_cmd->parsed()) {
      const ChipSpec chip = load_chip(chip_name);
      fmt::print("chip {}\n", chip.name);
      for (const auto& [key, prov] : chip.provenance) fmt::print("  {:<30} {}\n", key, prov);
    } else if (cal->parsed()) {
      calibrate(write);
    } else if (bench_cmd->parsed()) {
      bench();
    }
  } catch (const Error& e) {
    std::cerr << "tpusim: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
