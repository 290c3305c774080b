#include "app/hlo_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "app/hlo_work.h"
#include "app/program_import.h"
#include "sim/error.h"

namespace tpusim {
namespace fs = std::filesystem;

CompilerEstimate compiler_estimate(const HloProgram& h, const RunResult& r,
                                   double compiled_clock_hz) {
  CompilerEstimate e;
  for (const KernelStats& k : r.kernels) {
    const double simulated = static_cast<double>(k.cycles) / r.clock_hz;
    const auto it = h.estimated_cycles.find(k.name);
    if (it == h.estimated_cycles.end()) {
      e.not_estimated_s += simulated;
      continue;
    }
    ++e.kernels;
    e.compiler_s += static_cast<double>(it->second) * k.calls / compiled_clock_hz;
    e.tpusim_s += simulated;
  }
  return e;
}

std::string chip_of_device_kind(const std::string& kind) {
  if (kind == "TPU v5 lite" || kind == "TPU v5e") return "v5e";
  if (kind == "TPU v6 lite" || kind == "TPU v6e") return "v6e";
  if (kind == "TPU v5" || kind == "TPU v5p") return "v5p";
  return "";
}

namespace {

// Instructions that move no data and do no work: names for values, tuples, buffer bookkeeping,
// and the done-halves of asynchronous starts.
const std::set<std::string> kFree = {
    "parameter",       "constant",        "get-tuple-element",
    "tuple",           "bitcast",         "copy-done",
    "slice-done",      "after-all",       "partition-id",
    "replica-id",      "opt-barrier",     "add-dependency",
    "all-reduce-done", "all-gather-done", "collective-permute-done",
    "send-done",       "recv-done",       "domain"};
// Custom calls that only name or reinterpret buffers.
const std::set<std::string> kFreeTargets = {"AllocateBuffer", "ConcatBitcast", "Sharding",
                                            "SPMDFullToShardShape", "SPMDShardToFullShape"};

class Importer {
 public:
  Importer(const HloModule& m, const Program& pallas,
           const std::map<std::string, std::string>& kernel_of_call)
      : m_(m), pallas_(pallas), kernel_of_call_(kernel_of_call) {}

  HloProgram run() {
    HloProgram out;
    const HloComputation& entry = m_.entry();
    out.program.name = m_.name.empty() ? entry.name : m_.name;
    for (const HloInstruction& in : entry.instructions) add(out, entry, in);
    out.loops = loops_;
    out.estimated_cycles = estimated_;
    return out;
  }

 private:
  void add(HloProgram& out, const HloComputation& comp, const HloInstruction& in) {
    if (is_free(in)) return;
    if (auto c = collective(in)) {
      out.program.add_collective(in.name, *c);
      out.program.items.back().stage = stage_of(in);
      return;
    }
    out.program.append(work(comp, in), stage_of(in));
  }

  // The compiler's "estimated_cycles":"N" in the backend config, if it gave one.
  std::optional<int64_t> estimated_cycles(const HloInstruction& in) const {
    const std::string cfg = in.attr("backend_config");
    const std::string key = "\"estimated_cycles\":\"";
    const auto at = cfg.find(key);
    if (at == std::string::npos) return std::nullopt;
    const auto end = cfg.find('"', at + key.size());
    const std::string text = cfg.substr(at + key.size(), end - at - key.size());
    int64_t n = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || ptr != text.data() + text.size() || text.empty() || n < 0)
      throw Error(fmt::format("{}:{}: '{}': estimated_cycles \"{}\" is not a count of cycles",
                              m_.file, in.line, in.name, text));
    return n;
  }

  bool is_free(const HloInstruction& in) const {
    if (kFree.count(in.opcode)) return true;
    // Scalar arithmetic (a loop counter, an index) runs on the scalar unit beside the vector work.
    if (!in.shape.is_tuple() && in.shape.dims.empty() && in.opcode != "fusion" &&
        in.opcode != "custom-call" && in.opcode != "while")
      return true;
    if (in.opcode == "custom-call")
      return kFreeTargets.count(unquoted(in.attr("custom_call_target")));
    return false;
  }

  // What one instruction runs: kernels, and loops (a nested while, a custom call's own loop).
  Program work(const HloComputation& comp, const HloInstruction& in) {
    Program p;
    if (in.opcode == "custom-call") {
      const std::string target = unquoted(in.attr("custom_call_target"));
      if (target == "tpu_custom_call")
        p.add_kernel(pallas_kernel(in));
      else
        p = custom_call_program(m_, in, target);
      for (ProgramItem& item : p.items) {
        item.stage.clear();
        item.name = in.name;  // what a measured profile calls it
      }
      return p;
    }
    if (in.opcode == "while") {
      auto [body, summary] = loop(comp, in);
      loops_.push_back(summary);
      p.add_loop(in.name, body, summary.trips);
      return p;
    }
    if (in.opcode == "conditional" || in.opcode == "call")
      throw Error(fmt::format("{}:{}: '{}' ({}) is not imported yet", m_.file, in.line, in.name,
                              in.opcode));
    const auto kernel = work_kernel(in.name, work_of(m_, comp, in));
    p.add_kernel(kernel);
    if (const auto cycles = estimated_cycles(in)) estimated_[kernel->name] = *cycles;
    return p;
  }

  // A program's kernels in execution order, loops unrolled (a loop body holds kernels only).
  static void flatten(const Program& p, std::vector<std::shared_ptr<const Kernel>>& out) {
    for (const ProgramItem& item : p.items) {
      if (const auto* k = std::get_if<KernelCall>(&item.what)) out.push_back(k->kernel);
      if (const auto* l = std::get_if<Loop>(&item.what))
        for (int64_t t = 0; t < l->trips; ++t)
          out.insert(out.end(), l->body.begin(), l->body.end());
    }
  }

  std::pair<std::vector<std::shared_ptr<const Kernel>>, HloLoopSummary> loop(
      const HloComputation& comp, const HloInstruction& w) {
    const HloComputation& body = m_.computation(w.attr("body"));
    HloLoopSummary s{w.name, w.op_name(), trip_count(comp, w), {}};
    std::vector<std::shared_ptr<const Kernel>> kernels_of_body;
    for (const HloInstruction& in : body.instructions) {
      if (is_free(in)) continue;
      if (collective(in))
        throw Error(fmt::format("{}:{}: collective '{}' inside a while loop is not imported yet",
                                m_.file, in.line, in.name));
      s.body_ops.push_back(in.name);
      flatten(work(body, in), kernels_of_body);
    }
    return {kernels_of_body, s};
  }

  // known_trip_count from the backend config, else `i < N` (or N > i) in the condition with
  // i's start a constant in the loop's initial tuple and a step of one.
  int64_t trip_count(const HloComputation& comp, const HloInstruction& w) const {
    const std::string cfg = w.attr("backend_config");
    const auto at = cfg.find("\"known_trip_count\":{\"n\":\"");
    if (at != std::string::npos) return std::stoll(cfg.substr(at + 25));
    auto fail = [&](const std::string& why) -> int64_t {
      throw Error(fmt::format("{}:{}: while '{}': cannot find its trip count ({})", m_.file, w.line,
                              w.name, why));
    };
    const HloComputation& cond = m_.computation(w.attr("condition"));
    const HloInstruction& root = cond.root();
    if (root.opcode != "compare" || root.operands.size() != 2) return fail("no compare at root");
    const std::string dir = root.attr("direction");
    const HloInstruction* a = cond.find(root.operands[0]);
    const HloInstruction* b = cond.find(root.operands[1]);
    if (dir == "GT") std::swap(a, b);
    if ((dir != "LT" && dir != "GT") || !a || !b || a->opcode != "get-tuple-element" ||
        b->opcode != "constant")
      return fail("the condition is not counter < constant");
    const int64_t limit = constant_value(*b);
    const int index = std::stoi(a->attr("index"));
    const HloInstruction* init = comp.find(w.operands.at(0));
    if (!init || init->opcode != "tuple" || index >= static_cast<int>(init->operands.size()))
      return fail("the initial value is not a tuple");
    const HloInstruction* start = comp.find(init->operands[index]);
    while (start && start->opcode == "copy") start = comp.find(start->operands.at(0));
    if (!start || start->opcode != "constant")
      return fail("the counter does not start at a constant");
    return std::max<int64_t>(0, limit - constant_value(*start));
  }

  std::shared_ptr<const Kernel> pallas_kernel(const HloInstruction& in) const {
    std::string name;
    if (auto it = kernel_of_call_.find(in.name); it != kernel_of_call_.end()) {
      name = it->second;
    } else {
      const std::string op = in.op_name();
      const auto end = op.rfind("/pallas_call");
      const auto start = end == std::string::npos ? end : op.rfind('/', end - 1);
      if (end != std::string::npos) name = op.substr(start + 1, end - start - 1);
    }
    for (const ProgramItem& item : pallas_.items)
      if (const auto* k = std::get_if<KernelCall>(&item.what); k && k->kernel->name == name)
        return k->kernel;
    throw Error(fmt::format(
        "{}:{}: Pallas kernel '{}' ({}) is not among the exported kernels (kernels.json of "
        "python -m tpusim_jax compile)",
        m_.file, in.line, name.empty() ? "unnamed" : name, in.name));
  }

  std::optional<Collective> collective(const HloInstruction& in) const {
    static const std::map<std::string, CollectiveKind> kinds = {
        {"all-reduce", CollectiveKind::all_reduce},
        {"all-reduce-start", CollectiveKind::all_reduce},
        {"all-gather", CollectiveKind::all_gather},
        {"all-gather-start", CollectiveKind::all_gather},
        {"reduce-scatter", CollectiveKind::reduce_scatter},
        {"all-to-all", CollectiveKind::all_to_all},
        {"collective-permute", CollectiveKind::permute},
        {"collective-permute-start", CollectiveKind::permute}};
    auto it = kinds.find(in.opcode);
    if (it == kinds.end()) return std::nullopt;
    Collective c;
    c.kind = it->second;
    const int64_t out = in.shape.is_tuple() ? in.shape.tuple.back().bytes() : in.shape.bytes();
    c.bytes = out;
    if (c.kind == CollectiveKind::reduce_scatter) c.bytes = out * replica_group_size(in);
    c.axis = {fmt::format("replica groups of {}", replica_group_size(in)), replica_group_size(in),
              false};
    return c;
  }

  int64_t replica_group_size(const HloInstruction& in) const {
    const std::string g = in.attr("replica_groups");
    if (g.empty() || g == "{}") return 1;
    if (g[0] == '[') {  // [groups,size]<=[n]
      const auto comma = g.find(','), close = g.find(']');
      return std::stoll(g.substr(comma + 1, close - comma - 1));
    }
    const auto first = g.find('{', 1), end = g.find('}', 1);
    if (first == std::string::npos || end == std::string::npos) return 1;
    const std::string members = g.substr(first + 1, end - first - 1);
    return 1 + std::count(members.begin(), members.end(), ',');
  }

  std::string stage_of(const HloInstruction& in) const {
    // The op's place in the traced program: its op_name without the jit(...) prefix and the
    // op itself ("jvp()/while", "transpose(jvp())/triangular_solve").
    std::string op = in.op_name();
    if (op.rfind("jit(", 0) == 0 && op.find('/') != std::string::npos)
      op = op.substr(op.find('/') + 1);
    return op.empty() ? in.opcode : op;
  }

  static std::string unquoted(const std::string& s) {
    return s.size() >= 2 && s.front() == '"' ? s.substr(1, s.size() - 2) : s;
  }

  int64_t constant_value(const HloInstruction& c) const {
    try {
      return std::stoll(c.literal);
    } catch (const std::exception&) {
      throw Error(fmt::format("{}:{}: constant '{}' is not an integer", m_.file, c.line, c.name));
    }
  }

  const HloModule& m_;
  const Program& pallas_;
  const std::map<std::string, std::string>& kernel_of_call_;
  std::vector<HloLoopSummary> loops_;
  std::map<std::string, int64_t> estimated_;
};

}  // namespace

HloProgram import_hlo_module(const HloModule& module, const Program& pallas_kernels,
                             const std::map<std::string, std::string>& kernel_of_call) {
  return Importer(module, pallas_kernels, kernel_of_call).run();
}

HloProgram import_hlo(const std::string& path) {
  const bool dir = fs::is_directory(path);
  nlohmann::json compile;
  std::string hlo_file = path;
  Program pallas;
  if (dir) {
    const fs::path summary = fs::path(path) / "compile.json";
    std::ifstream f(summary);
    if (!f)
      throw Error(
          fmt::format("{}: no compile.json (a directory of python -m tpusim_jax "
                      "compile is expected)",
                      path));
    try {
      compile = nlohmann::json::parse(f);
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: {}", summary.string(), e.what()));
    }
    hlo_file = (fs::path(path) / compile.value("hlo", "optimized.hlo")).string();
    const auto kernels = compile.find("kernels_program");
    if (kernels != compile.end() && kernels->is_string())
      pallas = import_program((fs::path(path) / kernels->get<std::string>()).string()).program;
  }
  std::map<std::string, std::string> kernel_of_call;
  if (!compile.is_null() && compile.contains("pallas_kernels"))
    for (const auto& k : compile["pallas_kernels"])
      if (k.contains("instruction") && k.contains("name"))
        kernel_of_call[k["instruction"].get<std::string>()] = k["name"].get<std::string>();
  HloProgram p = import_hlo_module(load_hlo(hlo_file), pallas, kernel_of_call);
  p.path = path;
  p.compile = compile;
  if (!compile.is_null()) p.chip = chip_of_device_kind(compile.value("device_kind", ""));
  return p;
}

}  // namespace tpusim
