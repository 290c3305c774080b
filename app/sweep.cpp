#include "app/sweep.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "app/scenario.h"
#include "models/yaml_map.h"
#include "sim/error.h"

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
      n[key] = value;
      return;
    }
    if (!n[key] || !n[key].IsMap()) n[key] = YAML::Node(YAML::NodeType::Map);
    n.reset(n[key]);
    start = dot + 1;
  }
}

PointResult run_point(const Sweep& s, const SweepPoint& p) {
  PointResult r;
  r.index = p.index;
  try {
    const StepPrediction pred = predict_step(load_scenario(p.scenario, s.base_file).step);
    r.ok = true;
    r.step_time_s = pred.step_time_s;
    r.tokens_per_s_per_chip = pred.tokens_per_s_per_chip;
    r.tflops_per_chip = pred.tflops_per_s_per_chip;
    r.mfu = pred.mfu;
    r.peak_hbm_bytes = pred.peak_hbm_bytes;
    r.fits_hbm = pred.fits_hbm;
  } catch (const Error& e) {
    r.error = e.what();
  }
  return r;
}

nlohmann::json to_json(const PointResult& r) {
  return {{"index", r.index},
          {"ok", r.ok},
          {"error", r.error},
          {"step_time_s", r.step_time_s},
          {"tokens_per_s_per_chip", r.tokens_per_s_per_chip},
          {"tflops_per_chip", r.tflops_per_chip},
          {"mfu", r.mfu},
          {"peak_hbm_bytes", r.peak_hbm_bytes},
          {"fits_hbm", r.fits_hbm}};
}

PointResult from_json(const nlohmann::json& j) {
  PointResult r;
  r.index = j["index"];
  r.ok = j["ok"];
  r.error = j["error"];
  r.step_time_s = j["step_time_s"];
  r.tokens_per_s_per_chip = j["tokens_per_s_per_chip"];
  r.tflops_per_chip = j["tflops_per_chip"];
  r.mfu = j["mfu"];
  r.peak_hbm_bytes = j["peak_hbm_bytes"];
  r.fits_hbm = j["fits_hbm"];
  return r;
}

}  // namespace

Sweep load_sweep(const std::string& file) {
  const YamlMap top(file, yaml_load_file(file), "", {"name", "base", "axes"});
  const YAML::Node axes = top.need("axes");
  if (!axes.IsMap() || axes.size() == 0)
    top.fail("axes", "expected a mapping of key paths to lists of values");
  Sweep s;
  s.file = file;
  s.name = top.string("name", fs::path(file).stem().string());
  s.base_file = (fs::path(file).parent_path() / top.string("base")).lexically_normal().string();
  const YAML::Node base = yaml_load_file(s.base_file);
  load_scenario(base, s.base_file);  // the base itself must be valid
  std::vector<std::vector<YAML::Node>> values;
  for (const auto& kv : axes) {
    const std::string axis = yaml_as<std::string>(file, kv.first, "axes", "a string key");
    if (!is_scenario_key(axis))
      yaml_fail(
          file, kv.first, "axes." + axis,
          "not a key of a scenario file (docs/step_model.md lists them), so no point could run");
    if (!kv.second.IsSequence() || kv.second.size() == 0)
      yaml_fail(file, kv.second, "axes." + axis, "expected a non-empty list of values");
    s.axes.push_back(axis);
    std::vector<YAML::Node> v;
    for (const auto& x : kv.second) v.push_back(x);
    values.push_back(v);
  }
  std::vector<size_t> at(values.size(), 0);
  for (int index = 0;; ++index) {
    SweepPoint p;
    p.index = index;
    p.scenario = YAML::Clone(base);
    for (size_t a = 0; a < values.size(); ++a) {
      set_path(p.scenario, s.axes[a], values[a][at[a]]);
      p.values.push_back(YAML::Dump(values[a][at[a]]));
    }
    p.scenario["name"] = fmt::format("{}-{}", s.name, index);
    s.points.push_back(p);
    int a = static_cast<int>(values.size()) - 1;
    for (; a >= 0; --a) {
      if (++at[a] < values[a].size()) break;
      at[a] = 0;
    }
    if (a < 0) break;
  }
  return s;
}

std::vector<PointResult> run_sweep(const Sweep& s, int jobs, int shard_index, int shard_count,
                                   const std::function<void(int, int)>& progress) {
  if (shard_count < 1 || shard_index < 0 || shard_index >= shard_count)
    throw Error(
        fmt::format("--shard {}/{}: expected i/n with 0 <= i < n", shard_index, shard_count));
  std::vector<const SweepPoint*> mine;
  for (const SweepPoint& p : s.points)
    if (p.index % shard_count == shard_index) mine.push_back(&p);
  const int total = static_cast<int>(mine.size());
  jobs = std::max(1, std::min(jobs, std::max(1, total)));
  std::map<int, PointResult> results;
  if (jobs == 1) {
    for (const SweepPoint* p : mine) {
      results[p->index] = run_point(s, *p);
      progress(static_cast<int>(results.size()), total);
    }
  } else {
    // One worker process per job; each streams one JSON line per finished point to the parent.
    std::vector<pid_t> pids;
    std::vector<FILE*> pipes;
    std::fflush(nullptr);
    for (int w = 0; w < jobs; ++w) {
      int fd[2];
      if (pipe(fd) != 0) throw Error("sweep: cannot create a pipe");
      const pid_t pid = fork();
      if (pid < 0) throw Error("sweep: cannot fork a worker");
      if (pid == 0) {
        close(fd[0]);
        FILE* out = fdopen(fd[1], "w");
        for (size_t i = w; i < mine.size(); i += jobs) {
          std::fputs((to_json(run_point(s, *mine[i])).dump() + "\n").c_str(), out);
          std::fflush(out);
        }
        std::fclose(out);
        _exit(0);
      }
      close(fd[1]);
      pids.push_back(pid);
      pipes.push_back(fdopen(fd[0], "r"));
    }
    std::vector<std::string> partial(jobs);
    int open = jobs;
    std::vector<pollfd> fds(jobs);
    for (int w = 0; w < jobs; ++w) fds[w] = {fileno(pipes[w]), POLLIN, 0};
    while (open > 0) {
      if (poll(fds.data(), fds.size(), -1) < 0) break;
      for (int w = 0; w < jobs; ++w) {
        if (fds[w].fd < 0 || !(fds[w].revents & (POLLIN | POLLHUP))) continue;
        char buf[4096];
        const ssize_t n = read(fds[w].fd, buf, sizeof buf);
        if (n <= 0) {
          fds[w].fd = -1;
          --open;
          continue;
        }
        partial[w].append(buf, n);
        for (size_t nl; (nl = partial[w].find('\n')) != std::string::npos;) {
          const PointResult r = from_json(nlohmann::json::parse(partial[w].substr(0, nl)));
          results[r.index] = r;
          partial[w].erase(0, nl + 1);
          progress(static_cast<int>(results.size()), total);
        }
      }
    }
    for (FILE* f : pipes) std::fclose(f);
    for (pid_t pid : pids) waitpid(pid, nullptr, 0);
    if (static_cast<int>(results.size()) != total)
      throw Error(
          fmt::format("sweep: a worker stopped early ({} of {} points)", results.size(), total));
  }
  std::vector<PointResult> out;
  for (auto& [i, r] : results) out.push_back(r);
  return out;
}

std::string sweep_csv(const Sweep& s, const std::vector<PointResult>& results) {
  std::string out = "index";
  for (const std::string& a : s.axes) out += "," + a;
  out += ",step_time_s,tokens_per_s_per_chip,tflops_per_chip,mfu,peak_hbm_bytes,fits_hbm,error\n";
  for (const PointResult& r : results) {
    out += std::to_string(r.index);
    for (const std::string& v : s.points[r.index].values) out += "," + v;
    std::string err = r.error;
    for (char& c : err)
      if (c == '"') c = '\'';
    out += r.ok ? fmt::format(",{:.6g},{:.6g},{:.6g},{:.6g},{},{},\n", r.step_time_s,
                              r.tokens_per_s_per_chip, r.tflops_per_chip, r.mfu, r.peak_hbm_bytes,
                              r.fits_hbm ? "true" : "false")
                : fmt::format(",,,,,,,\"{}\"\n", err);
  }
  return out;
}

std::string sweep_json(const Sweep& s, const std::vector<PointResult>& results) {
  nlohmann::json j = {{"sweep", s.name},
                      {"base", s.base_file},
                      {"axes", s.axes},
                      {"points", nlohmann::json::array()}};
  for (const PointResult& r : results) {
    nlohmann::json p = to_json(r);
    nlohmann::json values = nlohmann::json::object();
    for (size_t a = 0; a < s.axes.size(); ++a) values[s.axes[a]] = s.points[r.index].values[a];
    p["values"] = values;
    j["points"].push_back(p);
  }
  return j.dump(2) + "\n";
}

}  // namespace tpusim
