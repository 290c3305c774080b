#include "app/profile_structure.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <regex>

#include "app/report.h"
#include "app/version.h"
#include "sim/error.h"

namespace tpusim {
namespace {

bool is_collective(const ProfileEvent& e) {
  static const std::regex kCollective(
      "^(all-gather|reduce-scatter|all-reduce|all-to-all|collective-permute|ragged-all-to-all)");
  const auto c = e.args.find("hlo_category");
  return std::regex_search(e.name, kCollective) ||
         (c != e.args.end() && c->second.find("collective") != std::string::npos);
}

// A loop's trips per execution: XLA's known_trip_count in the op's HLO text (its long_name) when
// the profile carries it, else how often the op that starts the loop's first iteration runs in it.
int64_t trips_of(const std::vector<ProfileEvent>& ops, int loop) {
  const auto text = ops[loop].args.find("long_name");
  static const std::regex kTrips(R"re("known_trip_count":\{"n":"(\d+)")re");
  std::smatch m;
  if (text != ops[loop].args.end() && std::regex_search(text->second, m, kTrips))
    return std::stoll(m[1].str());
  std::string first;
  int64_t n = 0;
  for (int i = loop + 1; i < static_cast<int>(ops.size()) && ops[i].start_us < ops[loop].end_us();
       ++i)
    if (ops[i].parent == loop) {
      if (first.empty()) first = ops[i].name;
      n += ops[i].name == first;
    }
  return n;
}

// The outermost op holding `i` (itself when nothing holds it).
int outermost(const std::vector<ProfileEvent>& ops, int i) {
  while (ops[i].parent >= 0) i = ops[i].parent;
  return i;
}

struct StepWindow {
  double from_us, to_us;
};

// The steps on the Steps line; without one, the whole span of the ops as one step.
std::vector<StepWindow> step_windows(const ProfileDevice& d) {
  std::vector<StepWindow> out;
  for (const ProfileEvent& s : d.steps) out.push_back({s.start_us, s.end_us()});
  if (out.empty()) {
    double from = 1e300, to = -1e300;
    for (const ProfileEvent& e : d.ops)
      from = std::min(from, e.start_us), to = std::max(to, e.end_us());
    out.push_back({from, to});
  }
  return out;
}

// The predicted side: per step, the forward and backward layer loops (compute), the layers'
// exposed collectives, the parts outside the loops and their exposed collectives, the host
// dispatch.
struct Predicted {
  double forward = 0, backward = 0, layer_collectives = 0, outside = 0, outside_collectives = 0,
         dispatch = 0;
};

Predicted predicted_parts(const StepPrediction& p) {
  Predicted out;
  for (const StepPart& part : p.parts) {
    if (part.name == "host dispatch") {
      out.dispatch += part.count * part.compute_s;
    } else if (is_layer(part)) {
      out.forward += part.count * part.forward_s;
      out.backward += part.count * part.backward_s;
      out.layer_collectives += part.count * part.exposed_s;
    } else {
      out.outside += part.count * part.compute_s;
      out.outside_collectives += part.count * part.exposed_s;
    }
  }
  return out;
}

// One step's ops sorted into the rows: the step's two layer loops (indices into the ops, -1 when
// the step has no such pair) and each leaf op's row.
enum class Row { forward, backward, loop_collectives, outside, outside_collectives, other_loop };

struct StepOps {
  int forward = -1, backward = -1;
  std::vector<std::pair<int, Row>> leaves;  // (op, its row)
};

// The ops starting in the window [first, last) (the ops are sorted by start).
std::pair<int, int> ops_in(const std::vector<ProfileEvent>& ops, const StepWindow& w) {
  auto at = [&](double t) {
    return static_cast<int>(
        std::lower_bound(ops.begin(), ops.end(), t,
                         [](const ProfileEvent& e, double v) { return e.start_us < v; }) -
        ops.begin());
  };
  return {at(w.from_us), at(w.to_us)};
}

StepOps classify(const std::vector<ProfileEvent>& ops, const StepWindow& w, int64_t trips) {
  StepOps out;
  std::vector<int> layer_loops;
  const auto [first, last] = ops_in(ops, w);
  for (int i = first; i < last; ++i)
    if (ops[i].parent < 0 && ops[i].has_children && trips_of(ops, i) == trips)
      layer_loops.push_back(i);
  if (layer_loops.size() >= 2) out.forward = layer_loops.front(), out.backward = layer_loops.back();
  for (int i = first; i < last; ++i) {
    const ProfileEvent& e = ops[i];
    if (e.has_children) continue;
    const int top = outermost(ops, i);
    const bool collective = is_collective(e);
    Row row = collective ? Row::outside_collectives : Row::outside;
    if (top == out.forward || top == out.backward)
      row = collective ? Row::loop_collectives : top == out.forward ? Row::forward : Row::backward;
    else if (top != i)
      row = Row::other_loop;
    out.leaves.emplace_back(i, row);
  }
  return out;
}

}  // namespace

StructureComparison compare_structure(const Profile& profile, int device, const StepConfig& c,
                                      const StepPrediction& p) {
  const ProfileDevice& d = profile_device(profile, device);
  if (d.ops.empty()) throw Error(fmt::format("{}: {} has no XLA Ops", profile.path, d.name));
  StructureComparison out;
  out.device = d.name;
  out.layer_trips = c.model.scanned_iterations();
  out.predicted_step_s = p.step_time_s;
  const std::vector<StepWindow> windows = step_windows(d);
  out.steps = static_cast<int>(windows.size());
  const double per_step = 1e-6 / out.steps;
  std::array<double, 6> us{};  // by Row
  double busy = 0, window_total = 0;
  std::map<std::string, StructureRow> other_loops;
  int steps_without_pair = 0;
  for (const StepWindow& w : windows) {
    window_total += w.to_us - w.from_us;
    const StepOps step = classify(d.ops, w, out.layer_trips);
    if (step.forward < 0) ++steps_without_pair;
    for (const auto& [i, row] : step.leaves) {
      busy += d.ops[i].duration_us;
      us[static_cast<int>(row)] += d.ops[i].duration_us;
      if (row != Row::other_loop) continue;
      const int top = outermost(d.ops, i);
      StructureRow& r = other_loops[d.ops[top].name];
      r.name = "loop " + d.ops[top].name;
      r.trips = trips_of(d.ops, top);
      r.measured_s += d.ops[i].duration_us * per_step;
      r.predicted_s = -1;
    }
  }
  out.measured_step_s = window_total * per_step;
  const Predicted pr = predicted_parts(p);
  const int64_t t = out.layer_trips;
  auto measured = [&](Row r) { return us[static_cast<int>(r)] * per_step; };
  out.rows = {
      {"layer loop, forward", t, measured(Row::forward), pr.forward},
      {"layer loop, backward (recompute included)", t, measured(Row::backward), pr.backward},
      {"collectives in the layer loops (exposed)", 0, measured(Row::loop_collectives),
       pr.layer_collectives},
      {"outside the layer loops (embedding, loss, optimizer)", 0, measured(Row::outside),
       pr.outside},
      {"collectives outside the layer loops", 0, measured(Row::outside_collectives),
       pr.outside_collectives},
      {"device idle between ops (host dispatch)", 0, (window_total - busy) * per_step,
       pr.dispatch}};
  std::stable_sort(out.rows.begin(), out.rows.end(), [](const auto& a, const auto& b) {
    return std::abs(a.predicted_s - a.measured_s) > std::abs(b.predicted_s - b.measured_s);
  });
  for (auto& [_, r] : other_loops) out.measured_only.push_back(r);
  if (steps_without_pair > 0)
    out.notes.push_back(fmt::format(
        "{} of {} steps have no forward and backward loop of {} trips: their ops count as outside "
        "the layer loops (a profile without loop spans, or scan_layers false)",
        steps_without_pair, out.steps, t));
  return out;
}

std::vector<TraceSpan> measured_step_spans(const Profile& profile, int device,
                                           const StructureComparison& c) {
  const ProfileDevice& d = profile_device(profile, device);
  std::vector<TraceSpan> spans;
  if (d.ops.empty()) return spans;
  const StepWindow w = step_windows(d).front();
  const StepOps step = classify(d.ops, w, c.layer_trips);
  auto row = [&](const char* prefix) {
    for (const StructureRow& r : c.rows)
      if (r.name.starts_with(prefix)) return r;
    return StructureRow{};
  };
  auto loop = [&](int i, const char* row_name, const char* pass) {
    if (i < 0) return;
    const StructureRow r = row(row_name);
    spans.push_back({"",
                     fmt::format("{}: measured {} per trip, predicted {} ({:+.1f}%)", row_name,
                                 format_duration(r.measured_s / r.trips),
                                 format_duration(r.predicted_s / r.trips), r.error_pct()),
                     (d.ops[i].start_us - w.from_us) * 1e-6, d.ops[i].duration_us * 1e-6,
                     "measured loop", pass});
  };
  loop(step.forward, "layer loop, forward", "fwd");
  loop(step.backward, "layer loop, backward", "bwd");
  for (int i = 0; i < static_cast<int>(d.ops.size()); ++i) {
    const ProfileEvent& e = d.ops[i];
    if (e.parent >= 0 || i == step.forward || i == step.backward || e.start_us < w.from_us ||
        e.start_us >= w.to_us)
      continue;
    const char* lane = e.has_children     ? "measured: other loops"
                       : is_collective(e) ? "measured: collectives"
                                          : "measured: outside loops";
    spans.push_back({"", fmt::format("{} ({})", e.name, format_duration(e.duration_us * 1e-6)),
                     (e.start_us - w.from_us) * 1e-6, e.duration_us * 1e-6, lane, ""});
  }
  std::sort(spans.begin(), spans.end(),
            [](const TraceSpan& a, const TraceSpan& b) { return a.start_s < b.start_s; });
  return spans;
}

std::string structure_text(const StructureComparison& c) {
  std::string out = fmt::format(
      "{} ({} steps): measured step {}, predicted {} ({:+.1f}%); layer loop of {} trips\n",
      c.device, c.steps, format_duration(c.measured_step_s), format_duration(c.predicted_step_s),
      100 * (c.predicted_step_s - c.measured_step_s) / c.measured_step_s, c.layer_trips);
  out += "largest differences first (per step):\n";
  for (const StructureRow& r : c.rows) {
    const std::string error =
        r.measured_s > 0 ? fmt::format("{:+7.1f}%", r.error_pct()) : "   (none measured)";
    out += fmt::format("  {:<52} measured {:>12}  predicted {:>12}  {}  {:5.1f}% of the step\n",
                       r.name, format_duration(r.measured_s), format_duration(r.predicted_s), error,
                       100 * r.measured_s / c.measured_step_s);
    if (r.trips > 0 && r.measured_s > 0)
      out += fmt::format("  {:<52} measured {:>12}  predicted {:>12}\n", "  per trip",
                         format_duration(r.measured_s / r.trips),
                         format_duration(r.predicted_s / r.trips));
  }
  for (const StructureRow& r : c.measured_only)
    out += fmt::format("  measured only: {} ({} trips) {}, {:.1f}% of the step\n", r.name, r.trips,
                       format_duration(r.measured_s), 100 * r.measured_s / c.measured_step_s);
  for (const std::string& n : c.notes) out += "  note: " + n + "\n";
  return out;
}

std::string structure_csv(const StructureComparison& c) {
  std::string out = "name,match,trips,measured_s,predicted_s,error_pct\n";
  for (const StructureRow& r : c.rows)
    out += fmt::format("{},both,{},{:.9g},{:.9g},{}\n", csv_field(r.name), r.trips, r.measured_s,
                       r.predicted_s, r.measured_s > 0 ? fmt::format("{:.3f}", r.error_pct()) : "");
  for (const StructureRow& r : c.measured_only)
    out += fmt::format("{},measured_only,{},{:.9g},,\n", csv_field(r.name), r.trips, r.measured_s);
  return out;
}

nlohmann::json structure_json(const StructureComparison& c) {
  auto rows = [](const std::vector<StructureRow>& list, bool predicted) {
    nlohmann::json a = nlohmann::json::array();
    for (const StructureRow& r : list) {
      nlohmann::json row = {{"name", r.name}, {"trips", r.trips}, {"measured_s", r.measured_s}};
      if (predicted) row["predicted_s"] = r.predicted_s;
      a.push_back(row);
    }
    return a;
  };
  return {{"tool", tool_json()},
          {"device", c.device},
          {"steps", c.steps},
          {"layer_trips", c.layer_trips},
          {"measured_step_s", c.measured_step_s},
          {"predicted_step_s", c.predicted_step_s},
          {"rows", rows(c.rows, true)},
          {"measured_only", rows(c.measured_only, false)},
          {"notes", c.notes}};
}

}  // namespace tpusim
