#include "app/sweep.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "app/report.h"
#include "app/scenario.h"
#include "app/version.h"
#include "app/worker_pool.h"
#include "models/chip_loader.h"
#include "models/yaml_map.h"
#include "sim/error.h"
#include "sim/timing/engine.h"

namespace tpusim {

namespace fs = std::filesystem;

namespace {

// Sets `path` (a.b.c) in a mapping tree, creating the intermediate mappings.
void set_path(YAML::Node root, const std::string& path, const YAML::Node& value) {
  YAML::Node n = root;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string key =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos) {
      // A clone: assigning the sweep file's own node would merge that document's memory into
      // every point's, and all the points' into one another (1,000 points took 23 GB).
      n[key] = YAML::Clone(value);
      return;
    }
    if (!n[key] || !n[key].IsMap()) n[key] = YAML::Node(YAML::NodeType::Map);
    n.reset(n[key]);
    start = dot + 1;
  }
}

}  // namespace

YAML::Node Sweep::scenario(const SweepPoint& p) const {
  YAML::Node n = YAML::Clone(base);
  for (size_t a = 0; a < p.at.size(); ++a) set_path(n, axes[a], axis_nodes[a][p.at[a]]);
  n["name"] = fmt::format("{}-{}", name, p.index);
  return n;
}

namespace {

using Kind = SweepMetric::Kind;
const std::vector<SweepMetric> kStepMetrics = {{"step_time_s", Kind::number, true},
                                               {"tokens_per_s_per_chip"},
                                               {"tflops_per_chip"},
                                               {"mfu"},
                                               {"peak_hbm_bytes", Kind::integer, true},
                                               {"fits_hbm", Kind::boolean},
                                               {"fits_host", Kind::boolean}};
const std::vector<SweepMetric> kKernelMetrics = {{"time_s", Kind::number, true},
                                                 {"tflops_per_s"},
                                                 {"hbm_bytes", Kind::integer, true},
                                                 {"vmem_peak_bytes", Kind::integer, true}};

std::vector<double> point_metrics(const Sweep& s, const SweepPoint& p) {
  if (s.kernel) {
    const ChipSpec chip = load_chip(p.chip);
    const RunResult r = simulate(chip, s.kernel->program(chip, p.knobs));
    return {r.time_s, r.flops / r.time_s / 1e12, static_cast<double>(r.hbm_bytes()),
            static_cast<double>(r.vmem_peak_bytes)};
  }
  const StepPrediction pred = predict_scenario(s.scenario(p), s.base_file);
  return {pred.step_time_s,
          pred.tokens_per_s_per_chip,
          pred.tflops_per_s_per_chip,
          pred.mfu,
          static_cast<double>(pred.peak_hbm_bytes),
          pred.fits_hbm ? 1.0 : 0.0,
          pred.fits_host ? 1.0 : 0.0};
}

PointResult run_point(const Sweep& s, const SweepPoint& p) {
  PointResult r;
  r.index = p.index;
  r.metrics.assign(s.metrics().size(), 0);
  try {
    r.metrics = point_metrics(s, p);
    r.ok = true;
  } catch (const Error& e) {
    // The sweep file and the axis values that made the point: the base file's line means little.
    std::vector<std::string> values;
    for (size_t a = 0; a < s.axes.size(); ++a)
      values.push_back(fmt::format("{}={}", s.axes[a], p.values[a]));
    r.error =
        fmt::format("{}: point {} ({}): {}", s.file, p.index, fmt::join(values, ", "), e.what());
  }
  return r;
}

nlohmann::json metric_json(const SweepMetric& m, double v) {
  switch (m.kind) {
    case SweepMetric::Kind::integer:
      return static_cast<long long>(v);
    case SweepMetric::Kind::boolean:
      return v != 0;
    case SweepMetric::Kind::number:
      break;
  }
  return v;
}

nlohmann::json to_json(const Sweep& s, const PointResult& r) {
  nlohmann::json j = {{"index", r.index}, {"ok", r.ok}, {"error", r.error}};
  for (size_t m = 0; m < s.metrics().size(); ++m)
    j[s.metrics()[m].name] = metric_json(s.metrics()[m], r.metrics[m]);
  return j;
}

PointResult from_json(const Sweep& s, const nlohmann::json& j) {
  PointResult r;
  r.index = j["index"];
  r.ok = j["ok"];
  r.error = j["error"];
  for (const SweepMetric& m : s.metrics())
    r.metrics.push_back(m.kind == SweepMetric::Kind::boolean ? double(j[m.name].get<bool>())
                                                             : j[m.name].get<double>());
  return r;
}

// The points of the cartesian product of `values` (one list per axis, the last axis fastest);
// `make(index, choice)` builds a point from one value index per axis.
template <typename Make>
void expand(Sweep& s, const std::vector<size_t>& sizes, Make make) {
  std::vector<size_t> at(sizes.size(), 0);
  for (int index = 0;; ++index) {
    s.points.push_back(make(index, at));
    int a = static_cast<int>(sizes.size()) - 1;
    for (; a >= 0; --a) {
      if (++at[a] < sizes[a]) break;
      at[a] = 0;
    }
    if (a < 0) break;
  }
}

// The axes mapping: a non-empty list of values per axis; `valid(axis, key node)` checks the name.
std::vector<std::vector<YAML::Node>> axis_values(
    const YamlMap& top, Sweep& s,
    const std::function<void(const std::string&, const YAML::Node&)>& valid) {
  const YAML::Node axes = top.need("axes");
  if (!axes.IsMap() || axes.size() == 0)
    top.fail("axes", "expected a mapping of key paths to lists of values");
  std::vector<std::vector<YAML::Node>> values;
  for (const auto& kv : axes) {
    const std::string axis = yaml_as<std::string>(s.file, kv.first, "axes", "a string key");
    valid(axis, kv.first);
    if (!kv.second.IsSequence() || kv.second.size() == 0)
      yaml_fail(s.file, kv.second, "axes." + axis, "expected a non-empty list of values");
    s.axes.push_back(axis);
    std::vector<YAML::Node> v;
    for (const auto& x : kv.second) v.push_back(x);
    values.push_back(v);
  }
  // Every point is held in memory and run, so a product of axes nobody could run is refused
  // before it is expanded (the largest shipped sweep has 1,080 points).
  constexpr size_t kMostPoints = 100000;
  size_t points = 1;
  for (const auto& v : values) points = std::min(points * v.size(), kMostPoints + 1);
  if (points > kMostPoints)
    top.fail("axes", fmt::format("the axes' lengths multiply to more than {} points, more than a "
                                 "sweep runs; split it",
                                 kMostPoints));
  return values;
}

std::vector<size_t> sizes_of(const std::vector<std::vector<YAML::Node>>& values) {
  std::vector<size_t> sizes;
  for (const auto& v : values) sizes.push_back(v.size());
  return sizes;
}

// A knob's value from YAML, typed by the catalog; its range is checked with the point.
kernels::KnobValue knob_value(const std::string& file, const kernels::Knob& k, const YAML::Node& n,
                              const std::string& path) {
  if (k.type == kernels::Knob::Type::integer) return yaml_as<int64_t>(file, n, path, "an integer");
  return yaml_as<std::string>(file, n, path, "a string");
}

void load_scenario_sweep(const YamlMap& top, Sweep& s) {
  s.base_file = (fs::path(s.file).parent_path() / top.string("base")).lexically_normal().string();
  try {
    s.base = yaml_load_file(s.base_file);
  } catch (const Error& e) {
    top.fail("base", e.what());  // the sweep file's line, then the base file's own error
  }
  load_scenario(s.base, s.base_file);  // the base itself must be valid
  s.axis_nodes = axis_values(top, s, [&](const std::string& axis, const YAML::Node& at) {
    if (!is_scenario_key(axis))
      yaml_fail(
          s.file, at, "axes." + axis,
          "not a key of a scenario file (docs/step_model.md lists them), so no point could run");
  });
  expand(s, sizes_of(s.axis_nodes), [&](int index, const std::vector<size_t>& at) {
    SweepPoint p;
    p.index = index;
    p.at = at;
    for (size_t a = 0; a < at.size(); ++a) p.values.push_back(YAML::Dump(s.axis_nodes[a][at[a]]));
    return p;
  });
}

void load_kernel_sweep(const YamlMap& top, Sweep& s) {
  const std::string name = top.string("kernel");
  try {
    s.kernel = &kernels::find_kernel(name);
  } catch (const Error& e) {
    top.fail("kernel", e.what());
  }
  const kernels::CatalogEntry& e = *s.kernel;
  SweepPoint base;
  base.chip = top.string("chip", "v5e");
  base.knobs = e.defaults();
  if (top.has("knobs")) {
    std::vector<std::string> names;
    for (const kernels::Knob& k : e.knobs) names.push_back(k.name);
    const YamlMap knobs = top.map("knobs", names, "knob of " + e.name);
    for (const kernels::Knob& k : e.knobs)
      if (knobs.has(k.name))
        base.knobs.set(k.name, knob_value(s.file, k, knobs.node(k.name), "knobs." + k.name));
  }
  const auto values = axis_values(top, s, [&](const std::string& axis, const YAML::Node& at) {
    if (axis == "chip") return;
    try {
      e.knob(axis);
    } catch (const Error& err) {
      yaml_fail(s.file, at, "axes." + axis, err.what());
    }
  });
  expand(s, sizes_of(values), [&](int index, const std::vector<size_t>& at) {
    SweepPoint p = base;
    p.index = index;
    for (size_t a = 0; a < values.size(); ++a) {
      const YAML::Node& v = values[a][at[a]];
      const std::string path = fmt::format("axes.{}", s.axes[a]);
      if (s.axes[a] == "chip")
        p.chip = yaml_as<std::string>(s.file, v, path, "a chip name");
      else
        p.knobs.set(e.knob(s.axes[a]).name, knob_value(s.file, e.knob(s.axes[a]), v, path));
      p.values.push_back(YAML::Dump(v));
    }
    return p;
  });
}

}  // namespace

const std::vector<SweepMetric>& Sweep::metrics() const {
  return kernel ? kKernelMetrics : kStepMetrics;
}

double PointResult::metric(const Sweep& s, const std::string& name) const {
  for (size_t m = 0; m < s.metrics().size(); ++m)
    if (s.metrics()[m].name == name) return metrics.at(m);
  throw Error(fmt::format("sweep {} has no metric '{}'", s.name, name));
}

Sweep load_sweep(const std::string& file) {
  const YamlMap top(file, yaml_load_file(file), "",
                    {"name", "base", "kernel", "chip", "knobs", "axes"});
  Sweep s;
  s.file = file;
  s.name = top.string("name", fs::path(file).stem().string());
  if (!is_bare_name(s.name))  // it names the outputs: they stay in the output folder
    top.fail("name", fmt::format("'{}' is not a bare name (letters, digits, '.', '_', '-'): it "
                                 "names the output files",
                                 shortened(s.name)));
  if (top.has("kernel") == top.has("base"))
    top.fail(top.has("kernel") ? "kernel" : "base",
             "a sweep has either a base scenario (base:) or a catalog kernel (kernel:)");
  if (top.has("kernel")) {
    load_kernel_sweep(top, s);
  } else {
    for (const char* key : {"chip", "knobs"})
      if (top.has(key)) top.fail(key, "only a kernel sweep takes it; a scenario sets its own");
    load_scenario_sweep(top, s);
  }
  return s;
}

namespace {

// The points a journal holds, checked against the sweep: each line's index must be one of
// `mine` with the same axis values. A last line cut short (the run was killed while writing it)
// is dropped.
std::map<int, PointResult> read_journal(const Sweep& s, const std::string& path,
                                        const std::set<int>& mine) {
  std::map<int, PointResult> done;
  std::ifstream in(path);
  if (!in) return done;
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  for (size_t n = 0; n < lines.size(); ++n) {
    const auto where = fmt::format("{}:{}", path, n + 1);
    nlohmann::json j = nlohmann::json::parse(lines[n], nullptr, false);
    if (j.is_discarded()) {
      if (n + 1 == lines.size()) break;
      throw Error(where + ": not a journal line (delete the journal to start over)");
    }
    try {
      const int index = j.at("index");
      if (!mine.count(index) || j.at("values") != nlohmann::json(s.points[index].values))
        throw Error("");
      done[index] = from_json(s, j);
    } catch (const std::exception&) {
      throw Error(where +
                  ": a point this sweep does not have (the sweep file or --shard changed since; "
                  "delete the journal to start over)");
    }
  }
  return done;
}

}  // namespace

std::vector<PointResult> run_sweep(const Sweep& s, int jobs, int shard_index, int shard_count,
                                   const std::function<void(int, int)>& progress,
                                   const SweepJournal& journal, const std::atomic<bool>* stop) {
  if (shard_count < 1 || shard_index < 0 || shard_index >= shard_count)
    throw Error(
        fmt::format("--shard {}/{}: expected i/n with 0 <= i < n", shard_index, shard_count));
  std::set<int> mine;
  for (const SweepPoint& p : s.points)
    if (p.index % shard_count == shard_index) mine.insert(p.index);
  const int total = static_cast<int>(mine.size());
  std::map<int, PointResult> results;
  if (journal.resume) results = read_journal(s, journal.path, mine);
  std::vector<const SweepPoint*> todo;
  for (int i : mine)
    if (!results.count(i)) todo.push_back(&s.points[i]);
  // Appended line by line; each write reaches the file at once, so a killed run keeps its points.
  int fd = -1;
  if (!journal.path.empty()) {
    fd = open(journal.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | (journal.resume ? 0 : O_TRUNC),
              0644);
    if (fd < 0) throw Error(fmt::format("cannot write the journal '{}'", journal.path));
  }
  if (!results.empty()) progress(static_cast<int>(results.size()), total);
  try {
    run_in_workers(
        static_cast<int>(todo.size()), jobs,
        [&](int i) { return json_text(to_json(s, run_point(s, *todo[i]))); },
        [&](int, const std::string& line) {
          nlohmann::json j = nlohmann::json::parse(line);
          const PointResult r = from_json(s, j);
          if (fd >= 0) {
            j["values"] = s.points[r.index].values;
            const std::string text = json_text(j) + "\n";
            if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
              throw Error(fmt::format("cannot write the journal '{}'", journal.path));
          }
          results[r.index] = r;
          progress(static_cast<int>(results.size()), total);
        },
        stop);
  } catch (...) {
    if (fd >= 0) close(fd);
    throw;
  }
  if (fd >= 0) close(fd);
  std::vector<PointResult> out;
  for (auto& [i, r] : results) out.push_back(r);
  return out;
}

std::string sweep_csv(const Sweep& s, const std::vector<PointResult>& results) {
  std::string out = "index";
  for (const std::string& a : s.axes) {
    out.push_back(',');
    out += csv_field(a);
  }
  for (const SweepMetric& m : s.metrics()) {
    out.push_back(',');
    out += csv_field(m.name);
  }
  out += ",error\n";
  for (const PointResult& r : results) {
    out += std::to_string(r.index);
    for (const std::string& v : s.points[r.index].values) {
      out.push_back(',');
      out += csv_field(v);
    }
    if (!r.ok) {
      out += std::string(s.metrics().size() + 1, ',') + csv_field(r.error) + "\n";
      continue;
    }
    for (size_t m = 0; m < s.metrics().size(); ++m) {
      const double v = r.metrics[m];
      switch (s.metrics()[m].kind) {
        case SweepMetric::Kind::integer:
          out += fmt::format(",{}", static_cast<long long>(v));
          break;
        case SweepMetric::Kind::boolean:
          out += v != 0 ? ",true" : ",false";
          break;
        case SweepMetric::Kind::number:
          out += fmt::format(",{:.6g}", v);
      }
    }
    out += ",\n";
  }
  return out;
}

std::string sweep_json(const Sweep& s, const std::vector<PointResult>& results) {
  nlohmann::json j = {{"tool", tool_json()},
                      {"sweep", s.name},
                      {"axes", s.axes},
                      {"points", nlohmann::json::array()}};
  if (s.kernel)
    j["kernel"] = s.kernel->name;
  else
    j["base"] = s.base_file;
  for (const PointResult& r : results) {
    nlohmann::json p = to_json(s, r);
    nlohmann::json values = nlohmann::json::object();
    for (size_t a = 0; a < s.axes.size(); ++a) values[s.axes[a]] = s.points[r.index].values[a];
    p["values"] = values;
    j["points"].push_back(p);
  }
  return json_text(j, 2) + "\n";
}

}  // namespace tpusim
