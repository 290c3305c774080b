// `tpusim chip`, `calibrate` and `bench`.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "app/bench.h"
#include "app/calibrate.h"
#include "app/profile_calibration.h"
#include "app/report.h"
#include "app/scenario.h"
#include "app/version.h"
#include "cli/commands.h"
#include "models/chip_loader.h"
#include "sim/timing/engine.h"

namespace tpusim::cli {
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
        std::string text = fmt::format(
            "chip {}  (kind: source = published, derived = computed from published "
            "figures, calibrated = fitted by tpusim calibrate, assumed = no evidence)\n",
            chip.name);
        for (const auto& [key, prov] : chip.provenance) {
          const std::string value = chip.value_text.at(key), unit = unit_of(key);
          const auto colon = prov.find(':');
          const std::string kind = prov.substr(0, colon);
          const std::string why = colon == std::string::npos ? "" : prov.substr(colon + 2);
          text += fmt::format("  {:<30} {:>14} {:<10} {:<10} {}\n", key, value, unit, kind, why);
          j["values"][key] = {{"value", value}, {"unit", unit}, {"kind", kind}, {"source", why}};
        }
        OutputFiles files;
        if (!a->json.empty()) files.stage(a->json, json_text(j, 2) + "\n");
        std::ostream& summary = files.summary_stream();
        files.commit();
        summary << text;
      }};
}

// `calibrate --profile TRACE --hlo DIR`: the constants the profile would move.
template <typename Args>
void calibrate_on_profile(const Args& a) {
  if (a.profile.empty() || a.hlo.empty())
    throw Error("--profile and --hlo go together: the measured profile and the program it ran");
  const Profile profile = load_profile(a.profile);
  const HloProgram h = import_hlo(a.hlo);
  const std::string chip = !a.chip.empty() ? a.chip : h.chip.empty() ? "v5e" : h.chip;
  ChipSpec spec = load_chip(chip);
  spec.host_dispatch_s = 0;  // per op: the device's time, as the profile's ops are
  const auto moves = profile_constant_moves(profile, a.device, h, spec);
  OutputFiles files;
  std::vector<std::string> skipped;
  if (a.write) skipped = stage_moved_values(moved_values(moves, a.profile), chip, files);
  std::ostream& summary = files.summary_stream();
  files.commit();
  summary << fmt::format(
                 "calibrate: what {} would move ({} simulated on {}; each constant alone, "
                 "{}):\n",
                 a.profile, a.hlo, chip,
                 a.write ? "written to the chip files" : "nothing written without --write")
          << profile_moves_text(moves);
  for (const std::string& s : skipped) summary << "  not written: " << s << "\n";
}

Command calibrate_command(CLI::App& app) {
  struct Args {
    bool write = false;
    std::string markdown, profile, hlo, chip;
    int device = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand(
      "calibrate",
      "fit every calibrated constant on its measured data and print predicted against measured");
  c->add_flag("--write", a->write,
              "update the chip files and docs/calibration.md (with --profile: the chip files "
              "with the values the profile moves)");
  c->add_option("--markdown", a->markdown,
                "write the full report to FILE ('-': print it instead of the summary)");
  c->add_option("--profile", a->profile,
                "instead: report which constants this measured profile (Perfetto trace JSON) of "
                "the --hlo program would move, and by how much");
  c->add_option("--hlo", a->hlo, "the compiled program the --profile measured");
  c->add_option("--device", a->device, "which TPU device of the profile (default 0)");
  c->add_option("--chip", a->chip, "the chip (default: the compile's)");
  return {c, [a] {
            if (!a->profile.empty() || !a->hlo.empty()) return calibrate_on_profile(*a);
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
  struct Args {
    std::string markdown;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand(
      "bench", "measure simulation speed: the figures of docs/performance.md on this machine");
  c->add_option("--markdown", a->markdown, "write the table as Markdown to FILE");
  return {c, [a] {
            const auto figures =
                run_bench([](const std::string& what) { fmt::print(stderr, "bench: {}\n", what); });
            OutputFiles files;
            if (!a->markdown.empty()) files.stage(a->markdown, bench_table(figures, true));
            files.commit();
            std::cout << bench_table(figures, false);
          }};
}

}  // namespace tpusim::cli
