#include "app/profile_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "app/gzip_file.h"
#include "app/version.h"
#include "sim/error.h"

namespace tpusim {
namespace {

bool ends_with_any(const std::string& s, std::initializer_list<const char*> suffixes) {
  for (const char* x : suffixes)
    if (s.ends_with(x)) return true;
  return false;
}

std::string xplane_error(const std::string& path) {
  return fmt::format(
      "{}: XProf's own format: convert it with `python -m tpusim_jax xplane-to-trace {} -o "
      "trace.json.gz` (the JAX bridge, scripts/setup.sh) and import the trace",
      path, path);
}

// A profile directory as jax.profiler writes it (plugins/profile/RUN/): its one Chrome trace
// (perfetto_trace.json.gz or HOST.trace.json.gz; the first when a run has both, they hold the
// same events), else what to do with its .xplane.pb.
std::string trace_in(const std::string& dir) {
  std::vector<std::string> perfetto, other, xplane;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string p = f.path().string();
    if (p.ends_with("perfetto_trace.json.gz"))
      perfetto.push_back(p);
    else if (ends_with_any(p, {".trace.json.gz", ".trace.json"}))
      other.push_back(p);
    else if (p.ends_with(".xplane.pb"))
      xplane.push_back(p);
  }
  const std::vector<std::string>& found = !perfetto.empty() ? perfetto : other;
  if (found.size() == 1) return found[0];
  if (found.size() > 1)
    throw Error(
        fmt::format("{}: holds {} traces ({}, ...): name one", dir, found.size(), found[0]));
  if (!xplane.empty()) throw Error(xplane_error(xplane[0]));
  throw Error(fmt::format("{}: no profile in it (no *.trace.json.gz, no .xplane.pb)", dir));
}

// The profile file's text (gzip-compressed or not).
std::string read_profile_file(const std::string& path) {
  if (path.ends_with(".xplane.pb")) throw Error(xplane_error(path));
  if (!std::filesystem::is_regular_file(path))
    throw Error(
        fmt::format("{}: not a profile file (a Chrome trace JSON, .json or .json.gz)", path));
  return read_maybe_gzipped(path);
}

// The per-op annotations XProf's TPU ops may carry that add up over executions.
constexpr const char* kCountedArgs[] = {"flops", "model_flops", "bytes_accessed",
                                        "raw_bytes_accessed"};

std::string text_of(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// A profile of XLA on the CPU has no device process: the runtime names each executed thunk after
// its HLO instruction on the host's threads (args hlo_op, hlo_module, device_ordinal, run_id).
// Those become the ops of /device:CPU:N, each run_id one module execution, and the host's
// StepTraceAnnotation spans (args step_num) its steps.
class CpuDevices {
 public:
  void add(ProfileEvent e) {
    if (e.args.count("step_num")) {
      steps_.push_back(std::move(e));
      return;
    }
    const auto ordinal = e.args.find("device_ordinal");
    if (ordinal == e.args.end() || !e.args.count("hlo_op")) return;
    ProfileDevice& d = devices_[ordinal->second];
    const std::string run = e.args.count("run_id") ? e.args.at("run_id") : "";
    auto [m, fresh] = runs_[ordinal->second].try_emplace(run, ProfileEvent{});
    if (fresh)
      m->second = {
          e.args.count("hlo_module") ? e.args.at("hlo_module") : "", e.start_us, e.duration_us, {}};
    const double end = std::max(m->second.end_us(), e.end_us());
    m->second.start_us = std::min(m->second.start_us, e.start_us);
    m->second.duration_us = end - m->second.start_us;
    d.ops.push_back(std::move(e));
  }
  void append_to(std::vector<ProfileDevice>& out) {
    for (auto& [ordinal, d] : devices_) {
      d.name = "/device:CPU:" + ordinal;
      d.steps = steps_;
      for (auto& [_, m] : runs_[ordinal]) d.modules.push_back(std::move(m));
      std::sort(d.modules.begin(), d.modules.end(),
                [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
      out.push_back(std::move(d));
    }
  }

 private:
  std::map<std::string, ProfileDevice> devices_;                     // by device_ordinal
  std::map<std::string, std::map<std::string, ProfileEvent>> runs_;  // ordinal -> run_id -> span
  std::vector<ProfileEvent> steps_;
};

// Sorts the ops by start, longer first at equal starts, and links each to the innermost op of
// its thread whose span holds it (a while loop's span holds the ops of its iterations; XLA's CPU
// runtime runs independent ops on other threads at the same time).
void nest(std::vector<ProfileEvent>& ops) {
  std::stable_sort(ops.begin(), ops.end(), [](const ProfileEvent& a, const ProfileEvent& b) {
    return a.start_us != b.start_us ? a.start_us < b.start_us : a.duration_us > b.duration_us;
  });
  constexpr double kSlackUs = 1e-3;  // timestamps are rounded to the nanosecond
  std::map<int64_t, std::vector<int>> open_by_thread;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    std::vector<int>& open = open_by_thread[ops[i].thread];
    while (!open.empty() && ops[open.back()].end_us() + kSlackUs < ops[i].end_us()) open.pop_back();
    if (!open.empty()) {
      ops[i].parent = open.back();
      ops[open.back()].has_children = true;
    }
    open.push_back(i);
  }
}

}  // namespace

Profile load_profile(const std::string& given) {
  const std::string path = std::filesystem::is_directory(given) ? trace_in(given) : given;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_profile_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not a Chrome trace JSON: {}", path, e.what()));
  }
  const nlohmann::json* events = j.is_array() ? &j : nullptr;
  if (j.is_object() && j.contains("traceEvents")) events = &j["traceEvents"];
  if (!events || !events->is_array())
    throw Error(fmt::format("{}: no 'traceEvents' array: not a Chrome trace JSON", path));
  std::map<int64_t, std::string> process, thread_of;  // pid -> name, (pid, tid) -> name
  auto key = [](int64_t pid, int64_t tid) { return pid * 1000003 + tid; };
  for (const auto& e : *events) {
    if (!e.is_object() || e.value("ph", "") != "M") continue;
    const std::string what = e.value("name", "");
    const std::string name = e.contains("args") ? e["args"].value("name", "") : "";
    if (what == "process_name") process[e.value("pid", int64_t{0})] = name;
    if (what == "thread_name")
      thread_of[key(e.value("pid", int64_t{0}), e.value("tid", int64_t{0}))] = name;
  }
  Profile p;
  p.path = path;
  std::map<int64_t, size_t> device_of;  // pid -> index into p.devices
  for (const auto& [pid, name] : process)
    if (name.rfind("/device:TPU:", 0) == 0) {
      device_of[pid] = p.devices.size();
      p.devices.push_back({name, {}, {}, {}, {}});
    }
  CpuDevices cpu;
  for (const auto& e : *events) {
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    ProfileEvent ev{e.value("name", ""), e.value("ts", 0.0), e.value("dur", 0.0), {}};
    if (e.contains("args") && e["args"].is_object())
      for (const auto& [k, v] : e["args"].items()) ev.args[k] = text_of(v);
    ev.thread = e.value("tid", int64_t{0});
    const auto d = device_of.find(e.value("pid", int64_t{0}));
    if (d == device_of.end()) {
      cpu.add(std::move(ev));
      continue;
    }
    ProfileDevice& dev = p.devices[d->second];
    const auto t = thread_of.find(key(e.value("pid", int64_t{0}), e.value("tid", int64_t{0})));
    const std::string line = t == thread_of.end() ? "" : t->second;
    if (line == "XLA Ops")
      dev.ops.push_back(std::move(ev));
    else if (line == "XLA Modules")
      dev.modules.push_back(std::move(ev));
    else if (line == "Steps")
      dev.steps.push_back(std::move(ev));
    else
      ++dev.other_lines[line.empty() ? "(unnamed)" : line];
  }
  cpu.append_to(p.devices);
  if (p.devices.empty())
    throw Error(fmt::format(
        "{}: no device in the trace (no process named /device:TPU:N, no XLA CPU op)", path));
  for (ProfileDevice& d : p.devices) nest(d.ops);
  return p;
}

const ProfileDevice& profile_device(const Profile& p, int index) {
  if (index < 0 || index >= static_cast<int>(p.devices.size()))
    throw Error(fmt::format("{}: no device {} (the profile has {} device{})", p.path, index,
                            p.devices.size(), p.devices.size() == 1 ? "" : "s"));
  return p.devices[index];
}

nlohmann::json profile_summary_json(const Profile& p) {
  nlohmann::json j = {
      {"tool", tool_json()}, {"file", p.path}, {"devices", nlohmann::json::array()}};
  for (const ProfileDevice& d : p.devices) {
    struct Total {
      int64_t count = 0;
      double us = 0;
      std::string category;
      bool holds_ops = false;                 // a loop: its time is its ops'
      std::map<std::string, double> counted;  // the FLOP and byte annotations present, summed
    };
    std::map<std::string, Total> by_name;
    for (const ProfileEvent& e : d.ops) {
      Total& t = by_name[e.name];
      ++t.count;
      if (e.has_children)
        t.holds_ops = true;
      else
        t.us += e.duration_us;
      if (t.category.empty() && e.args.count("hlo_category"))
        t.category = e.args.at("hlo_category");
      for (const char* k : kCountedArgs)
        if (const auto a = e.args.find(k); a != e.args.end()) {
          char* end = nullptr;
          const double v = std::strtod(a->second.c_str(), &end);
          if (end != a->second.c_str() && *end == '\0') t.counted[k] += v;
        }
    }
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& [name, t] : by_name) {
      nlohmann::json op = {{"name", name},
                           {"count", t.count},
                           {"total_us", t.us},
                           {"category", t.category},
                           {"holds_ops", t.holds_ops}};
      for (const auto& [k, v] : t.counted) op[k] = v;
      ops.push_back(std::move(op));
    }
    std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
      return a["total_us"].template get<double>() > b["total_us"].template get<double>();
    });
    nlohmann::json steps = nlohmann::json::array();
    for (const ProfileEvent& s : d.steps)
      steps.push_back({{"name", s.name}, {"duration_us", s.duration_us}});
    nlohmann::json modules = nlohmann::json::array();
    for (const ProfileEvent& m : d.modules)
      modules.push_back({{"name", m.name}, {"duration_us", m.duration_us}});
    j["devices"].push_back({{"name", d.name},
                            {"steps", steps},
                            {"modules", modules},
                            {"ops", ops},
                            {"other_lines", d.other_lines}});
  }
  return j;
}

}  // namespace tpusim
