#include "gui/simulation.h"

#include <fmt/format.h>

#include "app/scenario.h"
#include "app/step_structure.h"
#include "app/why_slow.h"
#include "kernels/gdn/layer.h"
#include "models/chip_loader.h"
#include "sim/timing/engine.h"

namespace tpusim::gui {
namespace {

Shown simulate_shown(const ChipSpec& chip, std::string what, Program program) {
  Shown s{std::move(what), std::move(program), {}, {}};
  s.run = simulate(chip, s.program, {.record_timeline = true});
  s.lanes = layout_lanes(s.run);
  return s;
}

// A kernel of the catalog, with the critical path of each of its calls.
Shown simulate_one(const ChipSpec& chip, const KernelChoice& k) {
  Shown s = simulate_shown(chip, k.label(), k.entry().program(chip, k.knobs));
  for (size_t i = 0; i < s.program.items.size(); ++i)
    if (std::holds_alternative<KernelCall>(s.program.items[i].what))
      s.paths.push_back(critical_path(s.run, s.program, static_cast<int>(i)));
  return s;
}

// The rest of "why is this slow" for a kernel: the share of its longest call that is the chain of
// dependent ops, and what batching would change (the kernel simulated again at twice the batch:
// per sample = (t(2B) - t(B)) / B, the rest does not grow with the batch).
void why_chain_and_batch(const ChipSpec& chip, const KernelChoice& k, const Shown& s,
                         std::vector<std::string>& why) {
  const CriticalPath* longest = nullptr;
  for (const CriticalPath& p : s.paths)
    if (!longest || p.to - p.from > longest->to - longest->from) longest = &p;
  if (longest && !longest->events.empty())
    why.push_back(fmt::format("{:.0f}% of the run is one chain of dependent ops: {}",
                              100.0 * (longest->to - longest->from) / s.run.cycles,
                              critical_path_text(*longest, s.run.clock_hz)));
  constexpr const char* kBatch = "batch-per-chip";
  if (!k.knobs.has(kBatch)) return;
  KernelChoice twice = k;
  const int64_t b = k.knobs.integer(kBatch);
  twice.knobs.set(kBatch, 2 * b);
  const double t2 = simulate(chip, twice.entry().program(chip, twice.knobs)).time_s;
  const double t1 = s.run.time_s, per_sample = (t2 - t1) / b, fixed = t1 - b * per_sample;
  why.push_back(fmt::format(
      "batching: at batch {} the run takes {:.4f} ms, of which {:.4f} ms does not grow with the "
      "batch ({:.0f}%); each sample adds {:.4f} ms (simulated at batch {})",
      b, t1 * 1e3, fixed * 1e3, 100 * fixed / t1, per_sample * 1e3, 2 * b));
}

}  // namespace

const kernels::CatalogEntry& KernelChoice::entry() const { return kernels::catalog().at(kernel); }

std::string KernelChoice::label() const {
  std::string choices;
  for (const kernels::Knob& k : entry().knobs)
    if (k.type == kernels::Knob::Type::choice)
      choices += (choices.empty() ? "" : ", ") + k.name + "=" + knobs.choice(k.name);
  return choices.empty() ? entry().name : entry().name + " (" + choices + ")";
}

KernelChoice switch_kernel(int kernel, const kernels::KnobValues& from) {
  KernelChoice k{kernel, kernels::catalog().at(kernel).defaults()};
  for (const auto& [name, value] : from.all())
    if (k.knobs.has(name) && k.knobs.all().at(name).index() == value.index())
      k.knobs.set(name, value);
  return k;
}

Outcome simulate_knobs(const Knobs& k) {
  Outcome o;
  try {
    const ChipSpec chip = load_chip(k.chip);
    o.peak_flops = chip.peak_bf16_flops;
    o.what = k.main.label();
    o.run = simulate_one(chip, k.main);
    o.why = why_slow(o.run->run, chip);
    if (k.measured && k.main.entry().name == k.measured->kernel) {
      const MeasuredInput& m = *k.measured;
      o.comparison = compare_profile(m.profile, m.device, m.hlo, o.run->run);
      o.measured = measured_spans(m.profile, m.device, *o.comparison, o.run->run);
    }
    try {
      why_chain_and_batch(chip, k.main, *o.run, o.why);
    } catch (const std::exception& e) {  // twice the batch may not fit: say so, keep the run
      o.why.push_back(std::string("batching: at twice the batch, ") + e.what());
    }
    if (k.compare && k.compare_chip.empty()) o.compare = simulate_one(chip, *k.compare);
    if (k.compare && !k.compare_chip.empty()) {
      o.compare = simulate_one(load_chip(k.compare_chip), *k.compare);
      o.compare->what += " on " + k.compare_chip;
    }
  } catch (const std::exception& e) {
    o.error = e.what();
  }
  return o;
}

Outcome simulate_scenario(const std::string& file, std::optional<kernels::gdn::Build> build,
                          const std::string& compare, std::shared_ptr<const Profile> profile,
                          int device) {
  Outcome o;
  o.scenario = true;
  try {
    Scenario s = load_scenario(file);
    const kernels::gdn::Build as_measured = s.step.gdn.build;
    if (build) {
      s.step.gdn.build = *build;
      check(s.step);  // e.g. a kernel build under context parallelism
    }
    o.step = predict_step(s.step);
    // The compiled step is of the file's own build.
    if (s.step.gdn.build == as_measured) add_compiled(s, *o.step);
    o.step_spans = step_structure(s.step, *o.step);
    ChipSpec chip = s.step.chip;
    chip.host_dispatch_s = 0;  // once per step, a span of its own
    o.layers = simulate_shown(chip, "one layer of each kind", one_of_each_part(s.step));
    o.batch = batch_split(s.step, *o.step);
    o.batch_per_chip = s.step.batch_per_chip;
    // The file's measurements belong to its own build.
    if (s.step.gdn.build == as_measured) o.validation = validation_rows(s, *o.step);
    o.what = s.name;
    o.peak_flops = s.step.chip.peak_bf16_flops;
    if (profile) {
      o.structure = compare_structure(*profile, device, s.step, *o.step);
      o.measured_step = measured_step_spans(*profile, device, *o.structure);
    }
    if (!compare.empty()) {
      const Scenario c = load_scenario(compare);
      o.compare_step = predict_step(c.step);
      o.compare_spans = step_structure(c.step, *o.compare_step);
      o.compare_what = c.name;
    }
  } catch (const std::exception& e) {
    o.error = e.what();
  }
  return o;
}

}  // namespace tpusim::gui
