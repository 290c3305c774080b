// `tpusim kernel NAME`: one subcommand per catalog kernel, its flags generated from the knobs;
// `tpusim gdn-builds`: the four builds side by side for a GDN shape.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "app/gdn_report.h"
#include "app/knob_options.h"
#include "app/program_import.h"
#include "app/report.h"
#include "app/timeline_svg.h"
#include "cli/commands.h"
#include "cli/simulate_output.h"
#include "kernels/catalog.h"
#include "kernels/catalog_entries.h"
#include "models/chip_loader.h"
#include "sim/error.h"
#include "sim/timing/engine.h"

namespace tpusim::cli {
namespace {

constexpr const char* kDefaultChip = "v5e";

// The resolved inputs echoed in the JSON: the command, the chip and every knob.
nlohmann::json config_json(const kernels::CatalogEntry& e, const ChipSpec& chip,
                           const kernels::KnobValues& v) {
  nlohmann::json j = {{"command", "kernel " + e.name}, {"chip", chip.name}};
  for (const kernels::Knob& k : e.knobs) {
    if (k.type == kernels::Knob::Type::integer)
      j[k.key()] = v.integer(k.name);
    else
      j[k.key()] = v.choice(k.name);
  }
  return j;
}

struct KernelArgs {
  const kernels::CatalogEntry* entry = nullptr;
  std::string chip = kDefaultChip;
  KnobOptions knobs;
  Outputs out;
};

// `kernel import FILE`: a program exported from JAX (docs/jax_bridge.md), with the functional
// check against JAX's outputs when asked.
Command import_command(CLI::App* kernel) {
  struct Args {
    std::string file, check, chip = kDefaultChip;
    Outputs out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = kernel->add_subcommand(
      "import", "a program exported from JAX by python -m tpusim_jax export (docs/jax_bridge.md)");
  c->add_option("file", a->file, "the program JSON")->required();
  c->add_option("--chip", a->chip, "chip name or chip YAML file")->capture_default_str();
  c->add_option("--check", a->check,
                "the check data of the export (--check FILE there): run tpusim's interpreter on "
                "JAX's inputs and compare the outputs");
  a->out.add_to(c);
  return {c, [a] {
            const ImportedProgram p = import_program(a->file);
            const ChipSpec chip = load_chip(a->chip);
            if (!a->check.empty()) {
              bool ok = true;
              for (const OutputCheck& r : check_program(p, a->check)) {
                fmt::print(
                    "functional check {}: max |error| {:.4g} of max |JAX| {:.4g}, "
                    "tolerance {:.4g} ({}): {}\n",
                    r.name, r.max_abs_error, r.max_abs_reference, r.tolerance, r.rounding,
                    r.ok ? "ok" : "FAILED");
                ok = ok && r.ok;
              }
              if (!ok) throw Error(a->file + ": the functional check failed (see above)");
            }
            run_and_report(chip, p.program,
                           {{"command", "kernel import"},
                            {"chip", chip.name},
                            {"file", a->file},
                            {"program", p.name},
                            {"source", p.source}},
                           a->out);
          }};
}

}  // namespace

std::vector<Command> kernel_commands(CLI::App& app) {
  CLI::App* kernel = app.add_subcommand("kernel", "simulate one kernel");
  kernel->require_subcommand(1);
  std::vector<Command> commands;
  for (const kernels::CatalogEntry& e : kernels::catalog()) {
    auto a = std::make_shared<KernelArgs>();
    a->entry = &e;
    CLI::App* c = kernel->add_subcommand(e.name, e.help);
    c->add_option("--chip", a->chip, "chip name or chip YAML file")->capture_default_str();
    a->knobs.add_kernel(c, e);
    a->out.add_to(c);
    commands.push_back({c, [a] {
                          kernels::KnobValues v;
                          a->knobs.apply(*a->entry, v);
                          const ChipSpec chip = load_chip(a->chip);
                          run_and_report(chip, a->entry->program(chip, v),
                                         config_json(*a->entry, chip, v), a->out);
                        }});
  }
  commands.push_back(import_command(kernel));
  return commands;
}

Command gdn_builds_command(CLI::App& app) {
  // The GDN shape's knobs, as the layer's catalog entry spells them.
  static const kernels::CatalogEntry shape_only{"gdn-builds", "", kernels::gdn_shape_knobs(), {}};
  auto a = std::make_shared<KernelArgs>();
  a->entry = &shape_only;
  CLI::App* c = app.add_subcommand(
      "gdn-builds",
      "the GDN builds side by side: PR #4348's four and PR #4577's doubling (markdown)");
  c->add_option("--chip", a->chip, "chip name or chip YAML file")->capture_default_str();
  a->knobs.add_kernel(c, shape_only);
  return {c, [a] {
            kernels::KnobValues v;
            a->knobs.apply(*a->entry, v);
            a->entry->check(v);
            std::cout << gdn_builds_markdown(load_chip(a->chip), kernels::gdn_shape_of(v));
          }};
}

}  // namespace tpusim::cli
