#include "app/program_xla.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "app/hlo_text.h"
#include "app/hlo_work.h"
#include "kernels/gdn/xla.h"
#include "sim/error.h"

namespace tpusim {

namespace {

const std::vector<std::string> kValueFields = {"name",     "opcode", "shape",     "dtype",
                                               "operands", "dims",   "precision", "memory"};
const std::vector<std::string> kHloDtypes = {"pred", "s8",  "u8",   "s32",
                                             "u32",  "f16", "bf16", "f32"};

HloShape shape_of(const YamlMap& m) {
  HloShape s;
  s.dtype = m.choice("dtype", kHloDtypes);
  const YAML::Node dims = m.need("shape");
  if (!dims.IsSequence()) m.fail("shape", "expected a list of dims");
  for (const auto& d : dims) {
    const auto n = yaml_as<int64_t>(m.file(), d, m.key_path("shape"), "an integer");
    if (n < 1 || n > (int64_t{1} << 40))
      yaml_fail(m.file(), d, m.key_path("shape"), "expected a dim in 1..2^40");
    s.dims.push_back(n);
  }
  if (m.has("memory")) s.memory_space = m.choice("memory", {"hbm", "vmem"}) == "vmem" ? 1 : 0;
  return s;
}

// The dot's attributes as HLO prints them, which hlo_work reads; each dim within its operand's
// rank.
void dot_attrs(const YamlMap& op, const HloComputation& fused, HloInstruction& in) {
  const YamlMap d = op.map("dims", {"lhs_contract", "rhs_contract", "lhs_batch", "rhs_batch"});
  auto dims = [&](const std::string& key, const std::string& operand) {
    const size_t rank = fused.find(operand)->shape.dims.size();
    std::vector<int64_t> v;
    const YAML::Node n = d.need(key);
    if (!n.IsSequence()) d.fail(key, "expected a list of dims");
    for (const auto& x : n) {
      v.push_back(yaml_as<int64_t>(d.file(), x, d.key_path(key), "an integer"));
      if (v.back() < 0 || static_cast<size_t>(v.back()) >= rank)
        yaml_fail(d.file(), x, d.key_path(key),
                  fmt::format("dim {} of '{}', which has rank {}", v.back(), operand, rank));
    }
    return fmt::format("{{{}}}", fmt::join(v, ","));
  };
  in.attrs["lhs_contracting_dims"] = dims("lhs_contract", in.operands[0]);
  in.attrs["rhs_contracting_dims"] = dims("rhs_contract", in.operands[1]);
  in.attrs["lhs_batch_dims"] = dims("lhs_batch", in.operands[0]);
  in.attrs["rhs_batch_dims"] = dims("rhs_batch", in.operands[1]);
  const std::string p = op.choice("precision", {"default", "high", "highest"});
  in.attrs["operand_precision"] = fmt::format("{{{0},{0}}}", p);
}

}  // namespace

std::shared_ptr<const Kernel> xla_fusion_kernel(const YamlMap& m) {
  const std::string name = m.string("name");
  HloModule module;
  module.file = m.file();
  HloComputation fused;
  fused.name = "fused";
  auto add = [&](const YamlMap& v, HloInstruction in) {
    in.name = v.string("name");
    if (fused.index.count(in.name)) v.fail("name", "a value of this name is already defined");
    in.shape = shape_of(v);
    fused.index[in.name] = fused.instructions.size();
    fused.instructions.push_back(std::move(in));
  };
  std::vector<std::string> params;
  for (const YamlMap& p : m.list("params", kValueFields)) {
    if (p.string("opcode") != "parameter") p.fail("opcode", "expected parameter");
    HloInstruction in;
    in.opcode = "parameter";
    in.literal = std::to_string(params.size());
    params.push_back(p.string("name"));
    add(p, std::move(in));
  }
  for (const YamlMap& op : m.list("ops", kValueFields, 1)) {
    HloInstruction in;
    in.opcode = op.string("opcode");
    if (in.opcode == "parameter") op.fail("opcode", "parameters belong in params");
    if (op.has("operands")) {
      const YAML::Node xs = op.node("operands");
      if (!xs.IsSequence()) op.fail("operands", "expected a list of value names");
      for (const auto& x : xs) {
        const auto operand = yaml_as<std::string>(m.file(), x, op.key_path("operands"), "a name");
        if (!fused.index.count(operand))
          yaml_fail(m.file(), x, op.key_path("operands"),
                    "'" + operand + "' is not defined before");
        in.operands.push_back(operand);
      }
    }
    if (in.opcode == "dot") {
      if (in.operands.size() != 2) op.fail("operands", "a dot takes two operands");
      dot_attrs(op, fused, in);
    } else if (op.has("dims") || op.has("precision")) {
      op.fail(op.has("dims") ? "dims" : "precision", "only a dot takes it");
    }
    add(op, std::move(in));
  }
  const YAML::Node results = m.need("results");
  if (!results.IsSequence() || results.size() == 0)
    m.fail("results", "expected a list of value names");
  HloInstruction root, fusion;
  root.opcode = "tuple";
  root.root = true;
  fusion.opcode = "fusion";
  fusion.name = name;
  fusion.attrs["calls"] = "fused";
  fusion.operands = params;
  for (const auto& r : results) {
    const auto result = yaml_as<std::string>(m.file(), r, m.key_path("results"), "a name");
    const HloInstruction* x = fused.find(result);
    if (!x) yaml_fail(m.file(), r, m.key_path("results"), "'" + result + "' is not defined");
    root.operands.push_back(result);
    root.shape.tuple.push_back(x->shape);
  }
  fusion.shape = root.shape;
  root.name = "results";
  fused.index[root.name] = fused.instructions.size();
  fused.instructions.push_back(root);
  HloComputation entry;
  entry.name = "entry";
  entry.entry = true;
  entry.index[name] = 0;
  entry.instructions.push_back(fusion);
  module.computations = {entry, fused};
  module.index = {{"entry", 0}, {"fused", 1}};
  try {
    return work_kernel(
        name, work_of(module, module.computations[0], module.computations[0].instructions[0]));
  } catch (const Error& e) {
    m.fail("ops", e.what());
  }
}

Program triangular_solve_program(const YamlMap& m) {
  const std::vector<std::string> operand_fields = {"name", "opcode", "shape", "dtype", "memory"};
  const HloShape a = shape_of(m.map("a", operand_fields)), b = shape_of(m.map("b", operand_fields));
  const size_t r = a.dims.size();
  if (r < 2 || a.dims[r - 1] != a.dims[r - 2] || b.dims.size() != r)
    m.fail("a", "expected a [..., n, n] and b of the same rank");
  const int64_t n = a.dims[r - 1];
  if (n > 128)
    m.fail("a", fmt::format("a solve of n = {} > 128: XLA blocks it beyond one custom call, which "
                            "tpusim does not model (compile the function instead)",
                            n));
  int64_t lead = 1;
  for (size_t i = 0; i + 2 < r; ++i) lead *= a.dims[i];
  for (const char* flag : {"left_side", "lower", "transpose_a", "unit_diagonal"})
    m.as<bool>(flag, "true or false");
  kernels::gdn::GdnShape s;
  s.chunk = n;
  s.batch = 1;
  s.heads = 1;
  s.seq = lead * n;
  // Solves of one matrix share its inverse (the bridge marks the later ones, as XLA's CSE).
  Program p;
  if (!(m.has("inverse_known") && m.as<bool>("inverse_known", "true or false")))
    p = kernels::gdn::xla_invert_diagonal_blocks(s);
  HloWork w;
  const DType f32 = DType::f32;
  w.reads = {{"inverse", f32, lead * n * n * 4}, {"b", dtype_of_hlo(b.dtype), b.bytes()}};
  w.writes = {{"x", dtype_of_hlo(b.dtype), b.bytes()}};
  const int64_t other = b.elements() / (lead * n);
  w.dots = {{.batch = lead,
             .m = n,
             .k = n,
             .n = other,
             .lhs = f32,
             .rhs = dtype_of_hlo(b.dtype),
             .precision = Precision::highest}};
  p.add_kernel(work_kernel(m.string("name") + ": inverse x b", w));
  p.name = m.string("name");
  return p;
}

namespace {

using KernelReader = std::function<std::shared_ptr<const Kernel>(const YamlMap&)>;
const std::vector<std::string> kItemKinds = {"kernel", "xla", "solve", "loop", "collective"};

// The array names a kernel reads.
std::vector<std::string> reads_of(const Kernel& k) {
  std::vector<std::string> names;
  for (const BlockSpec& b : k.inputs) names.push_back(b.array.name);
  return names;
}

Collective collective_of(const YamlMap& m) {
  static const std::map<std::string, CollectiveKind> kinds = {
      {"all_gather", CollectiveKind::all_gather},
      {"reduce_scatter", CollectiveKind::reduce_scatter},
      {"all_to_all", CollectiveKind::all_to_all},
      {"all_reduce", CollectiveKind::all_reduce},
      {"permute", CollectiveKind::permute}};
  Collective c;
  c.kind = kinds.at(m.choice("kind", {"all_gather", "reduce_scatter", "all_reduce", "permute"}));
  c.bytes = m.positive("bytes", 1, int64_t{1} << 44);
  const YamlMap axis = m.map("axis", {"name", "size"});
  // The mesh axis as a ring without wraparound [assume: the jaxpr names mesh axes, not how they
  // lie on the chips' torus].
  c.axis = {.name = axis.string("name"), .size = axis.positive("size", 1, int64_t{1} << 20)};
  return c;
}

class ItemReader {
 public:
  ItemReader(const KernelReader& kernel_of, Program& program)
      : kernel_of_(kernel_of), program_(program) {}

  // One item of the program, or of a loop's body (`body`: the loop's kernels; loops do not nest).
  void item(const YamlMap& item, std::vector<std::shared_ptr<const Kernel>>* body) {
    if (item.node().size() != 1)
      item.fail("kernel", "expected one of kernel, xla, solve, loop or collective");
    auto add = [&](std::shared_ptr<const Kernel> k) {
      if (body)
        body->push_back(std::move(k));
      else
        program_.add_kernel(k, waits_for(reads_of(*k)));
    };
    if (item.has("kernel")) {
      add(kernel_of_(item.map("kernel", {"name", "origin", "grid", "semantics", "inputs", "outputs",
                                         "scratch", "ops"})));
    } else if (item.has("xla")) {
      add(xla_fusion_kernel(item.map("xla", {"name", "source", "params", "ops", "results"})));
    } else if (item.has("solve")) {
      const Program solve = triangular_solve_program(
          item.map("solve", {"name", "a", "b", "left_side", "lower", "transpose_a", "unit_diagonal",
                             "inverse_known"}));
      for (const ProgramItem& i : solve.items) add(std::get<KernelCall>(i.what).kernel);
    } else if (item.has("collective")) {
      if (body) item.fail("collective", "a collective inside a loop's body is not supported");
      const YamlMap m = item.map("collective", {"name", "kind", "bytes", "axis", "results"});
      std::vector<int> after;
      if (!program_.items.empty()) after.push_back(static_cast<int>(program_.items.size()) - 1);
      const int at = program_.add_collective(m.string("name"), collective_of(m), after);
      const YAML::Node results = m.need("results");
      if (!results.IsSequence()) m.fail("results", "expected a list of value names");
      for (const auto& r : results)
        made_by_collective_[yaml_as<std::string>(m.file(), r, m.key_path("results"), "a name")] =
            at;
    } else {
      loop(item, body);
    }
  }

 private:
  void loop(const YamlMap& item, std::vector<std::shared_ptr<const Kernel>>* body) {
    if (body) item.fail("loop", "a loop inside a loop's body is not supported");
    const YamlMap loop = item.map("loop", {"name", "trips", "items"});
    std::vector<std::shared_ptr<const Kernel>> kernels;
    for (const YamlMap& inner : loop.list("items", kItemKinds)) this->item(inner, &kernels);
    if (kernels.empty()) return;  // a loop whose body has no work left (counters only)
    std::vector<std::string> reads;
    for (const auto& k : kernels)
      for (const std::string& n : reads_of(*k)) reads.push_back(n);
    program_.add_loop(loop.string("name"), std::move(kernels),
                      loop.positive("trips", 1, int64_t{1} << 32), waits_for(reads));
  }

  std::vector<int> waits_for(const std::vector<std::string>& reads) const {
    std::set<int> deps;
    for (const std::string& n : reads)
      if (auto it = made_by_collective_.find(n); it != made_by_collective_.end())
        deps.insert(it->second);
    return {deps.begin(), deps.end()};
  }

  const KernelReader& kernel_of_;
  Program& program_;
  std::map<std::string, int> made_by_collective_;
};

}  // namespace

void read_items(const YamlMap& top, const KernelReader& kernel_of, Program& program) {
  ItemReader reader(kernel_of, program);
  for (const YamlMap& item : top.list("items", kItemKinds, 1)) reader.item(item, nullptr);
}

}  // namespace tpusim
