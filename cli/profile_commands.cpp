// `tpusim import profile` and `tpusim compare`: a measured profile (jax.profiler's Perfetto trace)
// summarised, and matched per op to the compiled program simulated or by structure to a
// scenario's step (docs/profiles.md);
// `tpusim import maxtext-log`: a scenario's measured block from a MaxText training log;
// `tpusim export maxtext`: the MaxText command line of a scenario.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "app/hlo_import.h"
#include "app/maxtext_config.h"
#include "app/maxtext_log.h"
#include "app/profile_compare.h"
#include "app/profile_import.h"
#include "app/profile_structure.h"
#include "app/report.h"
#include "app/scenario.h"
#include "cli/commands.h"
#include "models/chip_loader.h"
#include "models/yaml_errors.h"
#include "sim/error.h"
#include "sim/timing/engine.h"

namespace tpusim::cli {

namespace fs = std::filesystem;

namespace {

// `import maxtext-log LOG`: the scenario's measured block from a MaxText training log.
void import_maxtext_log(const std::string& log_file, int skip, const std::string& out) {
  const std::string block = measured_block(read_maxtext_log(log_file), skip);
  OutputFiles files;
  if (!out.empty()) files.stage(out, block);
  std::ostream& summary = files.summary_stream();
  files.commit();
  if (out.empty()) summary << block;
}

// `import maxtext [MODEL.yml] KEY=VALUE ... -o SCENARIO.yaml`: a scenario (and its model beside
// it) from a MaxText model config and command line; checked by loading it, and removed again if
// it does not load.
void import_maxtext_run(const std::vector<std::string>& args, const std::string& out) {
  std::string model_file;
  std::vector<std::string> overrides;
  for (const std::string& a : args) {  // the model config first, if any: it has no '='
    if (model_file.empty() && overrides.empty() && a.find('=') == std::string::npos)
      model_file = a;
    else
      overrides.push_back(a);
  }
  const fs::path scenario(out);
  const std::string stem = scenario.stem().string();
  const std::string model_name = stem + ".model.yaml";
  const MaxTextImport r = import_maxtext(model_file, overrides, stem, model_name);
  std::string header;
  for (const std::string& k : r.defaults) header += "# default: " + k + "\n";
  for (const std::string& k : r.not_modelled) header += "# not modelled: " + k + "\n";
  // Loaded from a scratch copy first: a scenario that does not load is never written.
  const fs::path scratch = fs::temp_directory_path() / fmt::format("tpusim_import_{}", getpid());
  fs::create_directories(scratch);
  std::ofstream(scratch / scenario.filename()) << header + r.scenario;
  if (!r.model.empty()) std::ofstream(scratch / model_name) << r.model;
  const std::string copy = (scratch / scenario.filename()).string();
  try {
    load_scenario(copy);
  } catch (const Error& e) {
    fs::remove_all(scratch);
    std::string what = e.what();  // named as the file it would have been
    for (size_t at; (at = what.find(copy)) != std::string::npos;)
      what.replace(at, copy.size(), out);
    throw Error(what);
  }
  fs::remove_all(scratch);
  OutputFiles files;
  files.stage(out, header + r.scenario);
  if (!r.model.empty()) files.stage((scenario.parent_path() / model_name).string(), r.model);
  std::ostream& summary = files.summary_stream();
  files.commit();
  for (const std::string& k : r.defaults) summary << "default: " << k << "\n";
  for (const std::string& k : r.not_modelled) summary << "not modelled: " << k << "\n";
}

}  // namespace

Command import_command(CLI::App& app) {
  struct Args {
    std::string path, json, log, out, run_out;
    std::vector<std::string> run_args;
    int skip = 2;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("import", "read what a measured run left: a profile, a log");
  c->require_subcommand(1);
  CLI::App* profile = c->add_subcommand(
      "profile",
      "summarise a TPU profile (jax.profiler's perfetto_trace.json.gz or its JSON): per device, "
      "steps, modules and ops with their count and time");
  profile->add_option("path", a->path, "the profile file")->required();
  profile->add_option("--json", a->json, "write the summary as JSON to FILE");
  CLI::App* log = c->add_subcommand(
      "maxtext-log",
      "a scenario's measured block from a MaxText training log: the median of its steady-state "
      "steps (seconds, Tokens/s/device, TFLOP/s/device)");
  log->add_option("log", a->log, "the training log (MaxText's 'completed step: ...' lines)")
      ->required();
  log->add_option("--skip", a->skip, "leave out the first N steps as warm-up (compilation)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  log->add_option("-o,--output", a->out, "write the block to FILE (default: print it)");
  CLI::App* run = c->add_subcommand(
      "maxtext",
      "a scenario from a MaxText model config and command line (MaxText's keys: base_emb_dim, "
      "per_device_batch_size, max_target_length, remat_policy, ici_*_parallelism, "
      "compile_topology, ...); keys tpusim does not model are listed");
  run->add_option("args", a->run_args, "[MODEL.yml] KEY=VALUE ...")->required();
  run->add_option("-o,--output", a->run_out, "the scenario to write (its model goes beside it)")
      ->required();
  return {c, [a, log, run] {
            if (log->parsed()) return import_maxtext_log(a->log, a->skip, a->out);
            if (run->parsed()) return import_maxtext_run(a->run_args, a->run_out);
            const Profile p = load_profile(a->path);
            const nlohmann::json j = profile_summary_json(p);
            OutputFiles files;
            if (!a->json.empty()) files.stage(a->json, json_text(j, 2) + "\n");
            std::ostream& summary = files.summary_stream();
            files.commit();
            for (const auto& d : j["devices"]) {
              double total = 0;
              for (const auto& op : d["ops"]) total += op["total_us"].get<double>();
              summary << fmt::format("{}: {} steps, {} modules, {} op names, {:.3f} ms of ops\n",
                                     d["name"].get<std::string>(), d["steps"].size(),
                                     d["modules"].size(), d["ops"].size(), total / 1e3);
              for (size_t i = 0; i < d["ops"].size() && i < 10; ++i) {
                const auto& op = d["ops"][i];
                summary << fmt::format("  {:<40} x{:<6} {:10.3f} ms\n",
                                       op["name"].get<std::string>(), op["count"].get<int64_t>(),
                                       op["total_us"].get<double>() / 1e3);
              }
            }
          }};
}

Command export_command(CLI::App& app) {
  auto scenario = std::make_shared<std::string>();
  CLI::App* c = app.add_subcommand("export", "write a scenario as another tool takes it");
  c->require_subcommand(1);
  CLI::App* maxtext = c->add_subcommand(
      "maxtext",
      "print the MaxText command line of a scenario's step (model dims, run, mesh, "
      "compile_topology as KEY=VALUE), the input of `python -m tpusim_jax compile-step`");
  maxtext->add_option("scenario", *scenario, "the scenario file")->required();
  return {c, [scenario] {
            // The compiled step is this command's output, not its input: a stale or missing one
            // must not stop it.
            YAML::Node root = yaml_load_file(*scenario);
            if (root.IsMap())
              for (const char* key : {"compiled", "memory"}) root.remove(key);
            const Scenario sc = load_scenario(root, *scenario, LoadChecks::file);
            try {
              fmt::print("{}\n", fmt::join(maxtext_command_line(sc.step), " "));
            } catch (const Error& e) {
              throw Error(fmt::format("{}: {}", *scenario, e.what()));
            }
          }};
}

namespace {

// `compare SCENARIO PROFILE`: the scenario's step against the profile by structure.
void compare_scenario(const std::string& scenario, const Profile& profile, int device,
                      const std::string& csv, const std::string& json) {
  const Scenario sc = load_scenario(scenario);
  const StepPrediction p = predict_step(sc.step);
  const StructureComparison cmp = compare_structure(profile, device, sc.step, p);
  OutputFiles files;
  if (!csv.empty()) files.stage(csv, structure_csv(cmp));
  if (!json.empty()) files.stage(json, json_text(structure_json(cmp), 2) + "\n");
  std::ostream& summary = files.summary_stream();
  files.commit();
  summary << fmt::format("compare: scenario {} against {} by structure\n", sc.name, profile.path)
          << structure_text(cmp);
}

// `compare --hlo DIR PROFILE`: the compiled program against the profile per op.
void compare_program(const std::string& hlo, const std::string& chip_name, const Profile& profile,
                     int device, const std::string& csv, const std::string& json) {
  const HloProgram h = import_hlo(hlo);
  const std::string chip = !chip_name.empty() ? chip_name : h.chip.empty() ? "v5e" : h.chip;
  ChipSpec spec = load_chip(chip);
  spec.host_dispatch_s = 0;  // per op: the device's time, as the profile's ops are
  const RunResult r = simulate(spec, h.program);
  const ProfileComparison cmp = compare_profile(profile, device, h, r);
  OutputFiles files;
  if (!csv.empty()) files.stage(csv, comparison_csv(cmp));
  if (!json.empty()) files.stage(json, json_text(comparison_json(cmp), 2) + "\n");
  std::ostream& summary = files.summary_stream();
  files.commit();
  summary << fmt::format("compare: {} simulated on {} against {}\n", hlo, chip, profile.path)
          << comparison_text(cmp);
}

}  // namespace

Command compare_command(CLI::App& app) {
  struct Args {
    std::string hlo, chip, csv, json;
    std::vector<std::string> inputs;
    int device = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand(
      "compare",
      "predicted against measured: a scenario's step matched by structure (layer loops, the rest, "
      "collectives, idle time), or with --hlo the compiled program matched per HLO op, against "
      "a measured profile");
  c->add_option("inputs", a->inputs,
                "SCENARIO PROFILE, or PROFILE with --hlo (the profile: a Perfetto trace JSON, .gz "
                "or not)")
      ->required()
      ->expected(1, 2);
  c->add_option("--hlo", a->hlo,
                "the compiled program (python -m tpusim_jax compile DIR, or an HLO text file)");
  c->add_option("--device", a->device, "which TPU device of the profile (default 0)");
  c->add_option("--chip", a->chip, "with --hlo: simulate on this chip (default: the compile's)");
  c->add_option("--csv", a->csv, "write every row as CSV to FILE");
  c->add_option("--json", a->json, "write the comparison as JSON to FILE");
  return {c, [a] {
            const size_t want = a->hlo.empty() ? 2 : 1;
            if (a->inputs.size() != want)
              throw Error(a->hlo.empty() ? "compare: give SCENARIO PROFILE, or --hlo DIR PROFILE"
                                         : "compare: with --hlo give only the PROFILE");
            if (a->hlo.empty() && !a->chip.empty())
              throw Error("compare: --chip goes with --hlo (a scenario names its chip)");
            const Profile profile = load_profile(a->inputs.back());
            if (a->hlo.empty())
              compare_scenario(a->inputs.front(), profile, a->device, a->csv, a->json);
            else
              compare_program(a->hlo, a->chip, profile, a->device, a->csv, a->json);
          }};
}

}  // namespace tpusim::cli
