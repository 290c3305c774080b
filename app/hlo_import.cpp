#include "app/hlo_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "app/hlo_collectives.h"
#include "app/hlo_loops.h"
#include "app/hlo_pallas_calls.h"
#include "app/hlo_work.h"
#include "app/program_import.h"
#include "app/vliw_floors.h"
#include "sim/error.h"
#include "sim/text_file.h"

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
const std::set<std::string> kFree = {"parameter",
                                     "constant",
                                     "get-tuple-element",
                                     "tuple",
                                     "bitcast",
                                     "copy-done",
                                     "slice-done",
                                     "after-all",
                                     "partition-id",
                                     "replica-id",
                                     "opt-barrier",
                                     "add-dependency",
                                     "all-reduce-done",
                                     "all-gather-done",
                                     "collective-permute-done",
                                     "send-done",
                                     "recv-done",
                                     "domain",
                                     "dynamic-slice-done",
                                     "dynamic-update-slice-done"};
// Custom calls that only name or reinterpret buffers, read the slice's index (SliceId), zero
// the padding of an array in place (ZeroCrop, aliased to its operand: a tile's tail), or join and
// split the 32-bit halves of a random generator's key (X64*, on u64[2] and u32[2]).
const std::set<std::string> kFreeTargets = {
    "AllocateBuffer",       "ConcatBitcast", "SliceId",    "Sharding",     "SPMDFullToShardShape",
    "SPMDShardToFullShape", "ZeroCrop",      "X64Combine", "X64SplitHigh", "X64SplitLow"};

class Importer {
 public:
  Importer(const HloModule& m, const Program& pallas,
           const std::map<std::string, std::string>& kernel_of_call)
      : m_(m), pallas_(pallas), kernel_of_call_(kernel_of_call) {}

  HloProgram run() {
    HloProgram out;
    const HloComputation& entry = m_.entry();
    program_.name = m_.name.empty() ? entry.name : m_.name;
    emit(entry, {});
    out.program = std::move(program_);
    out.loops = loops_;
    out.estimated_cycles = estimated_;
    return out;
  }

 private:
  // The items a value waits for, per tuple element (one entry for an array), and among them the
  // asynchronous collectives still in flight in it: an async start's outputs are its state in
  // flight (its buffers and sync flags), and only its done yields the data.
  using Deps = std::vector<int>;
  struct Value {
    std::vector<Deps> parts, in_flight;
    static Deps joined(const std::vector<Deps>& v) {
      Deps d;
      for (const Deps& p : v) d.insert(d.end(), p.begin(), p.end());
      return unique(std::move(d));
    }
    static Deps unique(Deps d) {
      std::sort(d.begin(), d.end());
      d.erase(std::unique(d.begin(), d.end()), d.end());
      return d;
    }
    Deps all() const { return joined(parts); }
    Deps all_in_flight() const { return joined(in_flight); }
    Deps in_flight_of(size_t k) const { return k < in_flight.size() ? in_flight[k] : Deps{}; }
  };

  // Fewer equivalent dependencies: kernels run one after another, so the latest kernel stands
  // for every earlier one; collectives end in any order and are all kept.
  Deps compress(Deps d) const {
    d = Value::unique(std::move(d));
    Deps out;
    int last_kernel = -1;
    for (int i : d) {
      if (std::holds_alternative<Collective>(program_.items[i].what))
        out.push_back(i);
      else
        last_kernel = i;
    }
    if (last_kernel >= 0) out.push_back(last_kernel);
    return out;
  }

  // Emits `comp`'s instructions in order with their data dependencies; `params` are the values of
  // its parameters (by number). Returns the root's value.
  Value emit(const HloComputation& comp, const std::vector<Value>& params) {
    std::map<std::string, Value> values;
    // What the operands' values wait for (`Value::all`), or hold in flight (`all_in_flight`).
    auto of_operands = [&](const HloInstruction& in, Deps (Value::*part)() const) {
      Deps d;
      for (const std::string& o : in.operands)
        if (auto it = values.find(o); it != values.end()) {
          const Deps a = (it->second.*part)();
          d.insert(d.end(), a.begin(), a.end());
        }
      return d;
    };
    auto operand_deps = [&](const HloInstruction& in) {
      return compress(of_operands(in, &Value::all));
    };
    auto operand_in_flight = [&](const HloInstruction& in) {
      return Value::unique(of_operands(in, &Value::all_in_flight));
    };
    for (const HloInstruction& in : comp.instructions) {
      Value& v = values[in.name];
      if (in.opcode == "parameter") {
        const size_t n = std::stoul(in.literal);
        if (n < params.size()) v = params[n];
        continue;
      }
      if (auto c = collective(in)) {
        const int i = program_.add_collective(in.name, *c, operand_deps(in));
        program_.items[i].stage = stage_of(in);
        // A collective the compiler left synchronous holds the TensorCores until it ends.
        const bool async = is_async_start(in);
        if (!async) blocking_.push_back(i);
        v.parts.assign(1, {i});
        v.in_flight.assign(1, async ? Deps{i} : Deps{});
        if (in.opcode == "send") sent_[hlo_host_transfer_rendezvous(in)] = i;
        continue;
      }
      if (in.opcode == "recv") {  // the reduced array of the send of the same rendezvous
        const auto it = sent_.find(hlo_host_transfer_rendezvous(in));
        if (it == sent_.end())
          throw Error(
              fmt::format("{}:{}: '{}' receives before its send", m_.file, in.line, in.name));
        v.parts.assign(1, {it->second});
        continue;
      }
      if (in.opcode == "get-tuple-element") {
        const Value& t = values[in.operands.at(0)];
        const size_t k = std::stoul(in.attr("index"));
        const bool element = t.parts.size() > 1 && k < t.parts.size();
        v.parts.assign(1, element ? t.parts[k] : t.all());
        v.in_flight.assign(1, element ? t.in_flight_of(k) : t.all_in_flight());
        continue;
      }
      if (in.opcode == "tuple") {
        for (const std::string& o : in.operands) {
          v.parts.push_back(values[o].all());
          v.in_flight.push_back(values[o].all_in_flight());
        }
        continue;
      }
      if (is_free(in) || is_async_done(in)) {
        v.parts.assign(1, operand_deps(in));
        const bool done = is_async_done(in) || in.opcode.ends_with("-done");
        v.in_flight.assign(1, done ? Deps{} : operand_in_flight(in));
        continue;
      }
      if (in.opcode == "while" && holds_collectives(m_.computation(in.attr("body")))) {
        v = unroll(comp, in, values[in.operands.at(0)]);
        continue;
      }
      v = emit_work(comp, in, operand_deps(in), operand_in_flight(in));
    }
    return values[comp.root().name];
  }

  // An instruction that does work, after `deps`. A fusion handed a collective's state in flight
  // (`carried`) continues the collective beside its own work (XLA's async collective fusion over
  // multiple steps: in C3 #42's final bundles the dot fusion.433 issues
  // async-collective-start.7's ring transfers between its matmuls), so it does not wait for the
  // collective; what it passes on still does.
  Value emit_work(const HloComputation& comp, const HloInstruction& in, Deps deps,
                  const Deps& carried) {
    std::erase_if(deps, [&](int d) { return std::ranges::count(carried, d) > 0; });
    deps.insert(deps.end(), blocking_.begin(), blocking_.end());
    blocking_.clear();
    const int first = static_cast<int>(program_.items.size());
    program_.append(work_once(comp, in), stage_of(in));
    for (int i = first; i < static_cast<int>(program_.items.size()); ++i)
      program_.items[i].deps.insert(program_.items[i].deps.end(), deps.begin(), deps.end());
    Deps after = carried;
    after.push_back(static_cast<int>(program_.items.size()) - 1);
    Value v;
    if (carried.empty()) {
      v.parts.assign(1, after);
      return v;
    }
    // Its results: its own work's are data; the state it passes on (a parameter handed through,
    // the collective it continues) stays in flight.
    const std::vector<bool> passed = passed_on(in);
    v.parts.assign(passed.size(), after);
    for (const bool p : passed) v.in_flight.push_back(p ? carried : Deps{});
    return v;
  }

  // Per result of `in` (one for an array), whether it hands on state rather than computing it:
  // a fused parameter passed through or a collective the fusion carries (anything but a fusion
  // is taken to hand on all it has).
  std::vector<bool> passed_on(const HloInstruction& in) const {
    if (in.opcode != "fusion") return {true};
    const HloComputation& fused = m_.computation(in.attr("calls"));
    const HloInstruction& root = fused.root();
    if (root.opcode != "tuple") return {hands_on(root)};
    std::vector<bool> out;
    for (const std::string& o : root.operands) {
      const HloInstruction* r = fused.find(o);
      out.push_back(!r || hands_on(*r));
    }
    return out;
  }

  // An instruction's work, built once however many iterations of an unrolled loop run it (one
  // kernel, its calls counted together).
  const Program& work_once(const HloComputation& comp, const HloInstruction& in) {
    const std::string key = comp.name + "/" + in.name;
    auto it = work_cache_.find(key);
    if (it == work_cache_.end()) it = work_cache_.emplace(key, work(comp, in)).first;
    return it->second;
  }

  // A loop whose body holds collectives is written out iteration by iteration, each iteration's
  // parameter the previous one's root, so its collectives overlap the work beside them as the
  // data flow allows (a Loop item holds kernels only).
  Value unroll(const HloComputation& comp, const HloInstruction& w, Value carry) {
    const HloComputation& body = m_.computation(w.attr("body"));
    const int64_t trips = hlo_trip_count(m_, comp, w);
    if (unrolled_.insert(body.name + "/" + w.name).second) {  // summarised once
      HloLoopSummary s{w.name, w.op_name(), trips, {}};
      for (const HloInstruction& in : body.instructions) {
        if (!is_free(in) && !is_async_done(in)) s.body_ops.push_back(in.name);
        if (const auto c = collective(in)) {
          (is_async_start(in) ? s.async_collectives : s.sync_collectives) += 1;
          (is_async_start(in) ? s.async_collective_bytes : s.sync_collective_bytes) += c->bytes;
        }
      }
      loops_.push_back(s);
    }
    for (int64_t t = 0; t < trips; ++t) carry = emit(body, {carry});
    return carry;
  }

  // Whether `comp` or a loop nested in it holds a collective (asked once per computation).
  bool holds_collectives(const HloComputation& comp) {
    if (const auto it = holds_collectives_.find(comp.name); it != holds_collectives_.end())
      return it->second;
    bool holds = false;
    for (const HloInstruction& in : comp.instructions)
      holds = holds || collective(in) ||
              (in.opcode == "while" && holds_collectives(m_.computation(in.attr("body"))));
    return holds_collectives_[comp.name] = holds;
  }

  std::optional<Collective> collective(const HloInstruction& in) const {
    return hlo_collective(m_, in);
  }
  std::string async_collective_role(const HloInstruction& in) const {
    return hlo_async_collective_role(m_, in);
  }
  bool is_async_start(const HloInstruction& in) const {
    return in.opcode.ends_with("-start") || in.opcode == "send" ||
           async_collective_role(in) == "AsyncCollectiveStart";
  }
  bool is_async_done(const HloInstruction& in) const {
    return async_collective_role(in) == "AsyncCollectiveDone";
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
        p.add_kernel(pallas_kernel(comp, in));
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
    HloLoopSummary s{w.name, w.op_name(), hlo_trip_count(m_, comp, w), {}};
    std::vector<std::shared_ptr<const Kernel>> kernels_of_body;
    for (const HloInstruction& in : body.instructions) {
      if (is_free(in)) continue;  // a body with collectives is unrolled instead (emit)
      s.body_ops.push_back(in.name);
      flatten(work(body, in), kernels_of_body);
    }
    return {kernels_of_body, s};
  }

  std::shared_ptr<const Kernel> pallas_kernel(const HloComputation& comp,
                                              const HloInstruction& in) const {
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
    if (name.rfind("splash_mha_", 0) == 0) return splash_attention_kernel(m_, comp, in, name);
    if (auto k = megablox_kernel(m_, comp, in, name)) return k;
    throw Error(fmt::format(
        "{}:{}: Pallas kernel '{}' ({}) is not among the exported kernels (kernels.json of "
        "python -m tpusim_jax compile)",
        m_.file, in.line, name.empty() ? "unnamed" : name, in.name));
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

  const HloModule& m_;
  const Program& pallas_;
  const std::map<std::string, std::string>& kernel_of_call_;
  std::vector<HloLoopSummary> loops_;
  std::map<std::string, int64_t> estimated_;
  Program program_;
  std::vector<int> blocking_;        // synchronous collectives the next kernel waits for
  std::map<std::string, int> sent_;  // host-transfer rendezvous -> its send's collective
  std::map<std::string, Program> work_cache_;
  std::set<std::string> unrolled_;
  std::map<std::string, bool> holds_collectives_;
};

}  // namespace

HloProgram import_hlo_module(const HloModule& module, const Program& pallas_kernels,
                             const std::map<std::string, std::string>& kernel_of_call) {
  return Importer(module, pallas_kernels, kernel_of_call).run();
}

HloProgram import_hlo(const std::string& path, bool vliw_floors) {
  const bool dir = fs::is_directory(path);
  nlohmann::json compile;
  std::string hlo_file = path;
  Program pallas;
  if (!dir && fs::path(path).extension() == ".json") {  // a compile-step record (--hlo F.hlo.gz)
    try {
      compile = nlohmann::json::parse(read_text_file(path));
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: {}", path, e.what()));
    }
    if (!compile.contains("hlo") || !compile["hlo"].is_string())
      throw Error(
          fmt::format("{}: names no optimized HLO (compile-step writes it with --hlo)", path));
    hlo_file = (fs::path(path).parent_path() / compile["hlo"].get<std::string>()).string();
  }
  if (dir) {
    const fs::path summary = fs::path(path) / "compile.json";
    if (!fs::exists(summary))
      throw Error(
          fmt::format("{}: no compile.json (a directory of python -m tpusim_jax "
                      "compile is expected)",
                      path));
    const std::string text = read_text_file(summary.string());
    try {
      compile = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: {}", summary.string(), e.what()));
    }
    hlo_file = (fs::path(path) / compile.value("hlo", "optimized.hlo")).string();
  }
  // The exported Pallas kernels, beside the compile's summary or record.
  if (const auto kernels = compile.find("kernels_program");
      !compile.is_null() && kernels != compile.end() && kernels->is_string()) {
    const fs::path base = dir ? fs::path(path) : fs::path(path).parent_path();
    pallas = import_program((base / kernels->get<std::string>()).string()).program;
  }
  std::map<std::string, std::string> kernel_of_call;
  if (!compile.is_null() && compile.contains("pallas_kernels"))
    for (const auto& k : compile["pallas_kernels"])
      if (k.contains("instruction") && k.contains("name"))
        kernel_of_call[k["instruction"].get<std::string>()] = k["name"].get<std::string>();
  HloProgram p = import_hlo_module(load_hlo(hlo_file), pallas, kernel_of_call);
  if (vliw_floors) p.vliw_floored_kernels = apply_recorded_vliw_floors(p.program, compile, path);
  p.path = path;
  p.compile = compile;
  if (!compile.is_null()) p.chip = chip_of_device_kind(compile.value("device_kind", ""));
  return p;
}

}  // namespace tpusim
