#include "app/profile_calibration.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>

#include "app/profile_compare.h"
#include "app/step_fit.h"
#include "models/chip_loader.h"
#include "sim/error.h"
#include "sim/timing/engine.h"

namespace tpusim {
namespace {

// A constant the engine reads directly: its chip file key, and how to read and set it.
struct Knob {
  const char* key;
  std::function<double(const ChipSpec&)> get;
  std::function<void(ChipSpec&, double)> set;
  bool integer = false;
};

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> all = {
      {"grid_step_overhead_cycles",
       [](const ChipSpec& c) { return double(c.grid_step_overhead_cycles); },
       [](ChipSpec& c, double v) { c.grid_step_overhead_cycles = std::llround(v); }, true},
      {"dma_latency_cycles", [](const ChipSpec& c) { return double(c.dma_latency_cycles); },
       [](ChipSpec& c, double v) { c.dma_latency_cycles = std::llround(v); }, true},
      {"mxu_fill_drain_per_dim", [](const ChipSpec& c) { return c.mxu_fill_drain_per_dim; },
       [](ChipSpec& c, double v) {
         c.mxu_fill_drain_per_dim = v;
         c.mxu_fill_drain_cycles = c.fill_drain_cycles_from_dim();
       }},
      {"xla_row_solve_step_cycles",
       [](const ChipSpec& c) { return double(c.xla_row_solve_step_cycles); },
       [](ChipSpec& c, double v) { c.xla_row_solve_step_cycles = std::llround(v); }, true},
      {"vector_rate_scale", [](const ChipSpec& c) { return c.vector_rate_scale; },
       [](ChipSpec& c, double v) { c.vector_rate_scale = v; }},
      {"hbm_efficiency", [](const ChipSpec& c) { return c.hbm_efficiency; },
       [](ChipSpec& c, double v) { c.hbm_efficiency = std::min(v, 1.0); }},
      {"ici_efficiency", [](const ChipSpec& c) { return c.ici_efficiency; },
       [](ChipSpec& c, double v) { c.ici_efficiency = std::min(v, 1.0); }},
      {"ici_hop_latency_s", [](const ChipSpec& c) { return c.ici_hop_latency_s; },
       [](ChipSpec& c, double v) { c.ici_hop_latency_s = v; }},
  };
  return all;
}

// Each matched op's predicted time per step with `chip`.
std::map<std::string, double> predicted_ops(const Profile& p, int device, const HloProgram& h,
                                            const ChipSpec& chip) {
  std::map<std::string, double> out;
  for (const OpComparison& op : compare_profile(p, device, h, simulate(chip, h.program)).ops)
    out[op.name] = op.predicted_s;
  return out;
}

ProfileConstantMove move_of(const Knob& k, const Profile& p, int device, const HloProgram& h,
                            const ChipSpec& chip, const ProfileComparison& base) {
  ProfileConstantMove m{k.key, k.integer, k.get(chip), k.get(chip)};
  if (m.recorded <= 0) return m.note = "not set on this chip", m;
  ChipSpec bumped = chip;
  k.set(bumped, m.recorded * 1.1);
  const std::map<std::string, double> after = predicted_ops(p, device, h, bumped);
  for (const OpComparison& op : base.ops)
    if (std::abs(after.at(op.name) - op.predicted_s) >= 0.005 * op.predicted_s) {
      m.ops.push_back(op.name);
      m.measured_s += op.measured_s;
      m.predicted_s += op.predicted_s;
    }
  if (m.ops.empty()) return m.note = "no matched op depends on it", m;
  auto predicted = [&](double v) {
    ChipSpec c = chip;
    k.set(c, v);
    const std::map<std::string, double> ops = predicted_ops(p, device, h, c);
    double t = 0;
    for (const std::string& name : m.ops) t += ops.at(name);
    return t;
  };
  StepConstantFit fit{m.key, chip.name, p.path, "time of the ops it governs"};
  fit.measured = m.measured_s;
  try {
    solve_constant(fit, m.recorded / 10, m.recorded * 10, predicted, "no value");
    m.moved = k.integer ? std::round(fit.value) : fit.value;
    m.predicted_moved_s = predicted(m.moved);
  } catch (const Error&) {
    m.note = "no value in 1/10 .. 10x of the recorded one meets the measured time";
  }
  return m;
}

}  // namespace

std::vector<ProfileConstantMove> profile_constant_moves(const Profile& profile, int device,
                                                        const HloProgram& h, const ChipSpec& chip) {
  const ProfileComparison base = compare_profile(profile, device, h, simulate(chip, h.program));
  std::vector<ProfileConstantMove> out;
  for (const Knob& k : knobs()) out.push_back(move_of(k, profile, device, h, chip, base));
  return out;
}

std::string profile_moves_text(const std::vector<ProfileConstantMove>& moves) {
  std::string out;
  for (const ProfileConstantMove& m : moves) {
    if (!m.note.empty() && m.ops.empty()) {
      out += fmt::format("  {:<28} {:<12.6g} {}\n", m.key, m.recorded, m.note);
      continue;
    }
    out += fmt::format("  {:<28} {:<12.6g} governs {} ops: measured {:.2f} us, predicted {:.2f} us",
                       m.key, m.recorded, m.ops.size(), m.measured_s * 1e6, m.predicted_s * 1e6);
    out += m.note.empty() ? fmt::format(" -> {:.6g} would predict {:.2f} us\n", m.moved,
                                        m.predicted_moved_s * 1e6)
                          : fmt::format("; {}\n", m.note);
  }
  return out;
}

std::vector<CalibratedValue> moved_values(const std::vector<ProfileConstantMove>& moves,
                                          const std::string& profile_path) {
  std::vector<CalibratedValue> out;
  for (const ProfileConstantMove& m : moves)
    if (m.note.empty() && m.moved != m.recorded)
      out.push_back({m.key, m.moved, m.integer,
                     fmt::format("tpusim calibrate --profile {}: the {} matched ops it governs",
                                 profile_path, m.ops.size())});
  return out;
}

std::vector<std::string> stage_moved_values(const std::vector<CalibratedValue>& values,
                                            const std::string& chip, OutputFiles& files) {
  namespace fs = std::filesystem;
  const fs::path chips = fs::path(models_dir()) / "chips";
  std::map<std::string, std::vector<CalibratedValue>> by_file;
  std::vector<std::string> skipped;
  for (const CalibratedValue& v : values) {
    for (const fs::path& f : {chips / (chip + ".yaml"), chips / "shared.yaml"}) {
      try {
        std::vector<CalibratedValue> with = by_file[f.string()];
        with.push_back(v);
        chip_file_with(f.string(), with);  // throws unless the file has the key's block
        by_file[f.string()] = with;
        break;
      } catch (const Error& e) {
        if (f.filename() == "shared.yaml") skipped.push_back(e.what());
      }
    }
  }
  for (const auto& [file, with] : by_file)
    if (!with.empty()) files.stage(file, chip_file_with(file, with));
  return skipped;
}

}  // namespace tpusim
