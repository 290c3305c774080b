#include "app/profile_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "app/report.h"
#include "app/version.h"
#include "sim/error.h"

namespace tpusim {
namespace {

// "fusion.241" -> "fusion", "custom-call.8" -> "custom-call".
std::string prefix_class(const std::string& name) {
  const auto dot = name.find('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

// Predicted seconds per HLO instruction name: entry items by their name, loop-body kernels by
// theirs (summed over calls; a fusion's kernel is named after its instruction).
std::map<std::string, double> predicted_by_name(const HloProgram& h, const RunResult& r) {
  std::map<std::string, double> out;
  std::set<std::string> loops;
  for (const HloLoopSummary& l : h.loops) loops.insert(l.name);
  for (const ItemResult& item : r.items)
    if (!loops.count(item.name)) out[item.name] += item.cycles / r.clock_hz;
  std::set<std::string> in_loops;
  for (const ProgramItem& item : h.program.items)
    if (const auto* l = std::get_if<Loop>(&item.what))
      for (const auto& k : l->body) in_loops.insert(k->name);
  for (const KernelStats& k : r.kernels)
    if (in_loops.count(k.name)) out[k.name] += k.cycles / r.clock_hz;
  return out;
}

}  // namespace

ProfileComparison compare_profile(const Profile& profile, int device, const HloProgram& h,
                                  const RunResult& r) {
  const ProfileDevice& d = profile_device(profile, device);
  ProfileComparison c;
  c.device = d.name;
  c.steps = std::max<int>(1, static_cast<int>(d.steps.size()));
  std::map<std::string, OpComparison> measured;
  for (const ProfileEvent& e : d.ops) {
    if (e.has_children) continue;  // a loop's span: its ops are counted
    OpComparison& m = measured[e.name];
    m.name = e.name;
    if (m.op_class.empty())
      m.op_class = e.args.count("hlo_category") ? e.args.at("hlo_category") : prefix_class(e.name);
    m.count_per_step += 1.0 / c.steps;
    m.measured_s += e.duration_us * 1e-6 / c.steps;
    c.measured_step_s += e.duration_us * 1e-6 / c.steps;
  }
  const std::map<std::string, double> predicted = predicted_by_name(h, r);
  std::map<std::string, ClassComparison> classes;
  for (auto& [name, m] : measured) {
    const auto p = predicted.find(name);
    if (p == predicted.end()) {
      c.measured_only.push_back(m);
      continue;
    }
    m.predicted_s = p->second;
    c.ops.push_back(m);
    ClassComparison& k = classes[m.op_class];
    k.op_class = m.op_class;
    k.measured_s += m.measured_s;
    k.predicted_s += m.predicted_s;
  }
  for (const auto& [name, s] : predicted)
    if (!measured.count(name) && s > 0)
      c.predicted_only.push_back({name, prefix_class(name), 0, 0, s});
  auto by_gap = [](const OpComparison& a, const OpComparison& b) {
    return std::abs(a.predicted_s - a.measured_s) > std::abs(b.predicted_s - b.measured_s);
  };
  std::sort(c.ops.begin(), c.ops.end(), by_gap);
  std::sort(c.measured_only.begin(), c.measured_only.end(), by_gap);
  std::sort(c.predicted_only.begin(), c.predicted_only.end(), by_gap);
  for (const auto& [_, k] : classes) c.classes.push_back(k);
  for (const HloLoopSummary& l : h.loops) {
    LoopComparison lc{l.name, l.trips, 0, 0};
    for (const std::string& op : l.body_ops)
      if (const auto m = measured.find(op); m != measured.end())
        lc.measured_s += m->second.measured_s;
    for (const ItemResult& item : r.items)
      if (item.name == l.name) lc.predicted_s += item.cycles / r.clock_hz;
    c.loops.push_back(lc);
  }
  std::sort(c.classes.begin(), c.classes.end(),
            [](const auto& a, const auto& b) { return a.measured_s > b.measured_s; });
  return c;
}

std::vector<MeasuredSpan> measured_spans(const Profile& profile, int device,
                                         const ProfileComparison& c, const RunResult& r) {
  const ProfileDevice& d = profile_device(profile, device);
  std::vector<MeasuredSpan> out;
  if (d.ops.empty()) return out;
  const ProfileEvent* window = !d.steps.empty()     ? &d.steps.front()
                               : !d.modules.empty() ? &d.modules.front()
                                                    : nullptr;
  // The first step (or module); without either, every op from the first one's start.
  double from_us = d.ops.front().start_us, to_us = 1e300;
  if (window)
    from_us = window->start_us, to_us = window->start_us + window->duration_us;
  else
    for (const ProfileEvent& e : d.ops) from_us = std::min(from_us, e.start_us);
  const double program_start_s = r.items.empty() ? 0 : r.items.front().start / r.clock_hz;
  std::map<std::string, double> per_execution;  // of the matched ops
  for (const OpComparison& o : c.ops)
    if (o.count_per_step > 0) per_execution[o.name] = o.predicted_s / o.count_per_step;
  for (const ProfileEvent& e : d.ops) {
    if (e.start_us < from_us || e.start_us >= to_us || e.has_children) continue;
    MeasuredSpan s{e.name, program_start_s + (e.start_us - from_us) * 1e-6, e.duration_us * 1e-6};
    if (const auto m = per_execution.find(e.name); m != per_execution.end()) {
      s.matched = true;
      s.predicted_s = m->second;
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const MeasuredSpan& a, const MeasuredSpan& b) { return a.start_s < b.start_s; });
  return out;
}

std::string comparison_text(const ProfileComparison& c, size_t top) {
  double matched = 0, predicted = 0, only_measured = 0, only_predicted = 0;
  for (const OpComparison& o : c.ops) matched += o.measured_s, predicted += o.predicted_s;
  for (const OpComparison& o : c.measured_only) only_measured += o.measured_s;
  for (const OpComparison& o : c.predicted_only) only_predicted += o.predicted_s;
  const auto ms = format_duration;
  std::string out = fmt::format(
      "{} ({} steps): measured {} per step in {} op names; matched {} ops: measured {}, "
      "predicted {} ({:+.1f}%); unmatched: measured {} ({} names), predicted {} ({} names)\n",
      c.device, c.steps, ms(c.measured_step_s), c.ops.size() + c.measured_only.size(), c.ops.size(),
      ms(matched), ms(predicted), matched > 0 ? 100 * (predicted - matched) / matched : 0.0,
      ms(only_measured), c.measured_only.size(), ms(only_predicted), c.predicted_only.size());
  out += "by op class (matched ops):\n";
  for (const ClassComparison& k : c.classes)
    out += fmt::format("  {:<24} measured {:>12}  predicted {:>12}  {:+7.1f}%\n", k.op_class,
                       ms(k.measured_s), ms(k.predicted_s),
                       100 * (k.predicted_s - k.measured_s) / k.measured_s);
  for (const LoopComparison& l : c.loops)
    out += fmt::format(
        "while {}: {} trips, measured {} per iteration ({} per step), predicted {} ({})\n", l.name,
        l.trips, ms(l.measured_s / l.trips), ms(l.measured_s), ms(l.predicted_s / l.trips),
        ms(l.predicted_s));
  out += fmt::format("largest differences (of {}):\n", c.ops.size());
  for (size_t i = 0; i < c.ops.size() && i < top; ++i) {
    const OpComparison& o = c.ops[i];
    out += fmt::format(
        "  {:<40} {:<12} x{:<5g} measured {:>12}  predicted {:>12}  {:+7.1f}%  {:5.1f}% of the "
        "step\n",
        o.name, o.op_class, o.count_per_step, ms(o.measured_s), ms(o.predicted_s), o.error_pct(),
        100 * o.measured_s / c.measured_step_s);
  }
  for (const auto* list : {&c.measured_only, &c.predicted_only}) {
    if (list->empty()) continue;
    out += list == &c.measured_only ? "measured, not in the program:"
                                    : "in the program, not measured:";
    for (size_t i = 0; i < list->size() && i < 8; ++i)
      out +=
          fmt::format(" {} {}{}", (*list)[i].name,
                      ms(list == &c.measured_only ? (*list)[i].measured_s : (*list)[i].predicted_s),
                      i + 1 < std::min<size_t>(list->size(), 8) ? "," : "");
    out += list->size() > 8 ? fmt::format(" (and {} more)\n", list->size() - 8) : "\n";
  }
  return out;
}

std::string comparison_csv(const ProfileComparison& c) {
  std::string out = "name,class,match,count_per_step,measured_s,predicted_s,error_pct\n";
  auto row = [&](const OpComparison& o, const char* match) {
    const bool both = o.measured_s > 0 && o.predicted_s > 0;
    out += fmt::format("{},{},{},{:g},{:.9g},{:.9g},{}\n", csv_field(o.name), csv_field(o.op_class),
                       match, o.count_per_step, o.measured_s, o.predicted_s,
                       both ? fmt::format("{:.3f}", o.error_pct()) : "");
  };
  for (const OpComparison& o : c.ops) row(o, "both");
  for (const OpComparison& o : c.measured_only) row(o, "measured_only");
  for (const OpComparison& o : c.predicted_only) row(o, "predicted_only");
  return out;
}

nlohmann::json comparison_json(const ProfileComparison& c) {
  auto ops = [](const std::vector<OpComparison>& list) {
    nlohmann::json a = nlohmann::json::array();
    for (const OpComparison& o : list)
      a.push_back({{"name", o.name},
                   {"class", o.op_class},
                   {"count_per_step", o.count_per_step},
                   {"measured_s", o.measured_s},
                   {"predicted_s", o.predicted_s}});
    return a;
  };
  nlohmann::json classes = nlohmann::json::array();
  for (const ClassComparison& k : c.classes)
    classes.push_back(
        {{"class", k.op_class}, {"measured_s", k.measured_s}, {"predicted_s", k.predicted_s}});
  nlohmann::json loops = nlohmann::json::array();
  for (const LoopComparison& l : c.loops)
    loops.push_back({{"name", l.name},
                     {"trips", l.trips},
                     {"measured_s", l.measured_s},
                     {"predicted_s", l.predicted_s}});
  return {{"tool", tool_json()},
          {"loops", loops},
          {"device", c.device},
          {"steps", c.steps},
          {"measured_step_s", c.measured_step_s},
          {"classes", classes},
          {"ops", ops(c.ops)},
          {"measured_only", ops(c.measured_only)},
          {"predicted_only", ops(c.predicted_only)}};
}

}  // namespace tpusim
