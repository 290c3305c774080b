// `tpusim run`, `validate` and `sweep`: training steps from scenario files.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "app/chrome_trace.h"
#include "app/hlo_import.h"
#include "app/plots.h"
#include "app/program_import.h"
#include "app/report.h"
#include "app/scenario.h"
#include "app/step_report.h"
#include "app/step_structure.h"
#include "app/sweep.h"
#include "app/validate.h"
#include "app/worker_pool.h"
#include "cli/commands.h"
#include "cli/simulate_output.h"
#include "models/chip_loader.h"
#include "sim/error.h"
#include "sim/timing/engine.h"

namespace tpusim::cli {

namespace {

// The compiler's view beside the simulation: its while loops, its cost model's estimate of the
// fusions and its memory analysis.
void print_compiled(const HloProgram& h, const RunResult& r) {
  for (const HloLoopSummary& l : h.loops) {
    std::string collectives;
    if (l.sync_collectives + l.async_collectives > 0)
      collectives = fmt::format(", collectives per trip: {} synchronous ({}), {} asynchronous ({})",
                                l.sync_collectives, format_bytes(l.sync_collective_bytes),
                                l.async_collectives, format_bytes(l.async_collective_bytes));
    std::cout << fmt::format("while {}: {} trips, {} ops per trip{} ({})\n", l.name, l.trips,
                             l.body_ops.size(), collectives, l.op_name);
  }
  if (!h.estimated_cycles.empty() && !h.chip.empty()) {
    const CompilerEstimate e = compiler_estimate(h, r, load_chip(h.chip).clock_hz);
    std::cout << fmt::format(
        "compiler's cost model (estimated_cycles at {}'s clock): {} fusions and ops {:.3f} ms, "
        "tpusim {:.3f} ms for the same ({:+.0f}%); not estimated (custom calls, Pallas kernels): "
        "tpusim {:.3f} ms; the program with the compiler's figures where it has them: {:.3f} ms\n",
        h.chip, e.kernels, e.compiler_s * 1e3, e.tpusim_s * 1e3,
        100 * (e.tpusim_s - e.compiler_s) / e.compiler_s, e.not_estimated_s * 1e3,
        (r.time_s - e.tpusim_s + e.compiler_s) * 1e3);
  }
  if (h.vliw_floored_kernels > 0) {
    const double added =
        static_cast<double>(r.time[static_cast<int>(Cause::vliw_schedule)]) / r.cycles * r.time_s;
    std::cout << fmt::format(
        "the compiled VLIW schedule as a floor ({}): {} kernels, {:.3f} "
        "ms added where it is longer than the units modelled\n",
        h.compile["vliw_floors"].value("source", "?"), h.vliw_floored_kernels, added * 1e3);
  }
  if (h.compile.is_null()) return;
  const nlohmann::json& m = h.compile["memory"];
  auto mib = [&](const char* k) { return m.value(k, int64_t{0}) / double(1 << 20); };
  std::cout << fmt::format(
      "compiler ({} for {}, libtpu {}): HBM {:.1f} MiB = arguments {:.1f} + outputs {:.1f} - "
      "aliased {:.1f} + temporaries {:.1f} + code {:.1f}\n",
      h.compile.value("device_kind", "?"), h.compile.value("topology", "?"),
      h.compile["versions"].value("libtpu", "?"), mib("total_bytes"), mib("argument_bytes"),
      mib("output_bytes"), mib("alias_bytes"), mib("temp_bytes"), mib("generated_code_bytes"));
}

// The sweep's progress on stderr: a bar with the points done, the rate, elapsed time and ETA
// (redrawn in place on a terminal, a line per point otherwise).
class ProgressBar {
 public:
  explicit ProgressBar(int total) : total_(total), tty_(isatty(fileno(stderr))) {}
  void operator()(int done, int) const {
    const int width = 40, filled = total_ ? width * done / total_ : width;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = elapsed > 0 ? done / elapsed : 0;
    const std::string eta =
        rate > 0 ? fmt::format("{:.0f} s", (total_ - done) / rate) : std::string("?");
    fmt::print(stderr, "{}[{}{}] {}/{} points  {:.1f} points/s  elapsed {:.0f} s  eta {}",
               tty_ ? "\r" : "", std::string(filled, '#'), std::string(width - filled, '.'), done,
               total_, rate, elapsed, eta);
    if (!tty_ || done == total_) fmt::print(stderr, "\n");
  }

 private:
  int total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// A scenario's trace and op profile: one layer of each kind and the step's other parts
// simulated, and (when the step was timed) the whole step's predicted structure beside them.
void stage_step_program(const Scenario& sc, const StepPrediction& p, const Outputs& out,
                        OutputFiles& files) {
  ChipSpec chip = sc.step.chip;
  chip.host_dispatch_s = 0;
  const std::string what = "one layer of each kind and the step's other parts";
  if (!out.trace.empty()) {
    auto r = std::make_shared<const RunResult>(
        simulate(chip, one_of_each_part(sc.step), {.record_timeline = true}));
    auto spans = p.timed ? step_structure(sc.step, p) : std::vector<TraceSpan>{};
    files.stage(
        out.trace,
        [r, spans = std::move(spans),
         meta = nlohmann::json{{"scenario", sc.name}, {"file", sc.file}, {"program", what}}](
            std::ostream& o) {
          write_chrome_trace(*r, o, print_trace_progress, meta, spans, "training step (predicted)");
        },
        kTraceViewer);
  }
  if (!out.profile.empty() || !out.roofline.empty())
    out.stage_profile(simulate(chip, one_of_each_part(sc.step)), chip, sc.name + ": " + what,
                      files);
}

// A step that does not fit HBM or its pinned host memory is not timed unless `simulate_anyway`: its
// memory is the answer.
void run_scenario(const Scenario& sc, const Outputs& out, bool simulate_anyway) {
  StepPrediction p = predict_memory(sc.step);
  add_compiled(sc, p);
  if (p.fits() || simulate_anyway) {
    p = predict_step(sc.step);
    add_compiled(sc, p);
    add_compiled_program(sc, p);
  }
  const std::vector<BatchSplit> split =
      p.timed ? batch_split(sc.step, p) : std::vector<BatchSplit>{};
  OutputFiles files;
  if (!out.json.empty()) {
    nlohmann::json j = step_json(sc, p);
    if (p.timed) j["batch_split"] = batch_split_json(sc.step, split);
    files.stage(out.json, json_text(j, 2) + "\n");
  }
  stage_step_program(sc, p, out, files);
  std::ostream& summary = files.summary_stream();
  files.commit();
  summary << step_summary_text(sc, p);
  if (p.timed) summary << batch_split_text(sc.step, split);
}

}  // namespace

Command run_command(CLI::App& app) {
  struct Args {
    std::string file, json, trace, program, hlo, chip;
    bool simulate_anyway = false, vliw_floors = false;
    Outputs out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand(
      "run",
      "predict a training step from a scenario file, or simulate a program exported or "
      "compiled by python -m tpusim_jax");
  c->add_option("file", a->file, "scenario YAML");
  auto* program = c->add_option("--program", a->program,
                                "simulate a program JSON of python -m tpusim_jax export");
  auto* hlo = c->add_option("--hlo", a->hlo,
                            "simulate the compiled program in DIR (python -m tpusim_jax compile), "
                            "of a compile-step record (its JSON) or in an HLO text file");
  c->add_option("--chip", a->chip,
                "chip for --program / --hlo (default: the compile's device, else v5e)");
  c->add_flag("--simulate-anyway", a->simulate_anyway,
              "time a step that does not fit HBM (by default only its memory is reported)");
  c->add_flag(
       "--vliw-floors", a->vliw_floors,
       "with --hlo: each XLA op lasts at least its VLIW schedule as the compile recorded it "
       "(--vliw-floors of python -m tpusim_jax compile; an estimate, docs/compiler_import.md)")
      ->needs(hlo);
  a->out.add_to(c);
  program->excludes(hlo);
  return {
      c, [a] {
        if (!a->program.empty() || !a->hlo.empty()) {
          if (!a->file.empty())
            throw Error("run: give a scenario file, --program or --hlo, not several");
          if (!a->hlo.empty()) {
            const HloProgram h = import_hlo(a->hlo, a->vliw_floors);
            const std::string chip = !a->chip.empty() ? a->chip : h.chip.empty() ? "v5e" : h.chip;
            const RunResult r =
                run_and_report(load_chip(chip), h.program,
                               {{"command", "run --hlo"}, {"hlo", a->hlo}, {"chip", chip}}, a->out);
            print_compiled(h, r);
            return;
          }
          const ImportedProgram p = import_program(a->program);
          const std::string chip = a->chip.empty() ? "v5e" : a->chip;
          run_and_report(load_chip(chip), p.program,
                         {{"command", "run --program"}, {"program", p.name}, {"chip", chip}},
                         a->out);
          return;
        }
        if (a->file.empty()) throw Error("run: give a scenario file, --program or --hlo");
        if (!a->chip.empty() || !a->out.svg.empty())
          throw Error(
              "run: --chip and --svg apply to --program and --hlo (a scenario names "
              "its chip)");
        run_scenario(load_scenario(a->file), a->out, a->simulate_anyway);
      }};
}

Command validate_command(CLI::App& app) {
  struct Args {
    std::vector<std::string> paths;
    std::string json, markdown, plot;
    bool write = false;
    int jobs = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand(
      "validate", "predicted against measured for every scenario with measured values");
  c->add_option("paths", a->paths,
                "scenario files or folders (default: scenarios/calibration scenarios/blind)");
  c->add_option("--json", a->json, "write the rows and the blind predictions as JSON to FILE");
  c->add_option("--markdown", a->markdown,
                "write the report to FILE ('-': print it instead of the summary)");
  c->add_flag("--write", a->write,
              "update the repository's docs/validation.md (and its picture) with the report");
  c->add_option("--plot", a->plot,
                "write predicted against measured as a picture (SVG) to FILE, +-10% bands");
  c->add_option("--jobs", a->jobs, "worker processes (default: one per core)")
      ->check(CLI::Range(0, 1024));
  return {c, [a] {
            const Validation v =
                validate(a->paths.empty() ? default_validation_paths() : a->paths,
                         a->jobs > 0 ? a->jobs : default_jobs(),
                         [](size_t i, size_t n, const Scenario& s, double seconds) {
                           fmt::print(stderr, "validate: [{}/{}] {} ({:.2f} s)\n", i + 1, n, s.name,
                                      seconds);
                         });
            const std::string md = v.markdown();
            OutputFiles files;
            if (a->write) {
              files.stage(repo_path("docs/validation.md"), md);
              files.stage(repo_path("docs/img/validation.svg"), validation_svg(v.rows));
            }
            if (!a->plot.empty())
              files.stage(a->plot, validation_svg(v.rows), "open it in a web browser");
            if (!a->markdown.empty() && a->markdown != "-") files.stage(a->markdown, md);
            if (!a->json.empty()) files.stage(a->json, json_text(v.json(), 2) + "\n");
            std::ostream& summary = files.summary_stream();
            files.commit();
            summary << (a->markdown == "-" ? md : v.summary());
          }};
}

Command sweep_command(CLI::App& app) {
  struct Args {
    std::string file, csv, json, plot, metric, shard = "0/1";
    int jobs = 0;
    bool resume = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("sweep", "expand a base scenario over axes and run the points");
  c->add_option("file", a->file, "sweep YAML (base + axes)")->required();
  c->add_option("--jobs", a->jobs, "worker processes (default: one per core)")
      ->check(CLI::Range(0, 1024));
  c->add_option("--shard", a->shard,
                "run only points i, i+n, i+2n, ... (i/n), for spreading a sweep over machines")
      ->capture_default_str();
  c->add_option("--csv", a->csv, "CSV output (default: <sweep name>[.shard-i-of-n].csv)");
  c->add_option("--json", a->json, "JSON output (default: <sweep name>[.shard-i-of-n].json)");
  c->add_option("--plot", a->plot,
                "write a picture (SVG) of a metric over the axes to FILE: a line for one axis, "
                "a heatmap per pair of axes (each cell the best over the other axes)");
  c->add_option("--metric", a->metric,
                "the metric --plot shows (default: the first, step_time_s or time_s)");
  c->add_flag("--resume", a->resume,
              "continue a killed or interrupted sweep from its journal (CSV path + .journal)");
  return {c, [a] {
            int si = 0, sn = 1;
            int used = 0;
            if (std::sscanf(a->shard.c_str(), "%d/%d%n", &si, &sn, &used) != 2 ||
                used != static_cast<int>(a->shard.size()))
              throw Error(fmt::format("--shard '{}': expected i/n, for example 0/4", a->shard));
            const Sweep sw = load_sweep(a->file);
            const std::string metric = a->metric.empty() ? sw.metrics().front().name : a->metric;
            if (!a->metric.empty() && a->plot.empty()) throw Error("sweep: --metric needs --plot");
            if (std::none_of(sw.metrics().begin(), sw.metrics().end(),
                             [&](const SweepMetric& m) { return m.name == metric; }))
              sweep_svg(sw, {}, metric);  // names the metrics there are, before any point runs
            const std::string stem =
                sn > 1 ? fmt::format("{}.shard-{}-of-{}", sw.name, si, sn) : sw.name;
            const std::string csv = a->csv.empty() ? stem + ".csv" : a->csv;
            const SweepJournal journal{(csv == "-" ? stem + ".csv" : csv) + ".journal", a->resume};
            if (a->resume && !std::filesystem::exists(journal.path))
              throw Error(fmt::format("--resume: no journal '{}' to continue from", journal.path));
            const InterruptFlag interrupted;
            const int total = static_cast<int>(
                std::count_if(sw.points.begin(), sw.points.end(),
                              [&](const SweepPoint& p) { return p.index % sn == si; }));
            const auto results = run_sweep(sw, a->jobs > 0 ? a->jobs : default_jobs(), si, sn,
                                           ProgressBar(total), journal, &interrupted.flag());
            if (static_cast<int>(results.size()) < total)
              throw Interrupted{fmt::format(
                  "interrupted: {} of {} points done, kept in {}; `tpusim sweep {} --resume` "
                  "continues (with the same --csv and --shard)",
                  results.size(), total, journal.path, a->file)};

            OutputFiles files;
            files.stage(csv, sweep_csv(sw, results));
            files.stage(a->json.empty() ? stem + ".json" : a->json, sweep_json(sw, results));
            if (!a->plot.empty())
              files.stage(a->plot, sweep_svg(sw, results, metric), "open it in a web browser");
            std::ostream& summary = files.summary_stream();
            files.commit();
            std::filesystem::remove(journal.path);
            int failed = 0;
            for (const PointResult& r : results) failed += !r.ok;
            summary << fmt::format(
                "{} points run ({} could not: see the error column), {} points in the sweep\n",
                results.size(), failed, sw.points.size());
          }};
}

}  // namespace tpusim::cli
