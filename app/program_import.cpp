#include "app/program_import.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "app/check_tolerance.h"
#include "app/program_xla.h"
#include "models/yaml_map.h"
#include "sim/error.h"
#include "sim/text_file.h"

namespace tpusim {
namespace {

constexpr const char* kFormat = "tpusim-program";
constexpr int kVersion = 1;

const std::vector<std::string> kDtypeNames = {"bf16", "f32", "int8", "s32"};
// Only called on one of kDtypeNames.
DType dtype_of(const std::string& s) { return *dtype_named(s); }

Shape shape_of(const YamlMap& m, const std::string& key) {
  const YAML::Node n = m.need(key);
  if (!n.IsSequence() || n.size() == 0) m.fail(key, "expected a non-empty list of dims");
  Shape s;
  for (size_t i = 0; i < n.size(); ++i) {
    const auto d = yaml_as<int64_t>(m.file(), n[i], m.key_path(key), "an integer");
    if (d < 1) yaml_fail(m.file(), n[i], m.key_path(key), fmt::format("dim {} is not positive", d));
    s.push_back(d);
  }
  return s;
}

std::vector<int> ints_of(const YamlMap& m, const std::string& key) {
  std::vector<int> v;
  const YAML::Node n = m.need(key);
  if (!n.IsSequence()) m.fail(key, "expected a list of integers");
  for (const auto& x : n) v.push_back(yaml_as<int>(m.file(), x, m.key_path(key), "an integer"));
  return v;
}

// One BlockSpec: the array, its block and the affine index map (one expression per block dim).
struct Operand {
  Tensor array;
  Shape block;
  IndexMap index;
};

Operand operand_of(const YamlMap& m, size_t grid_rank) {
  Operand o;
  o.array = {m.string("name"), shape_of(m, "shape"), dtype_of(m.choice("dtype", kDtypeNames)),
             MemSpace::hbm};
  o.block = shape_of(m, "block");
  if (o.block.size() != o.array.shape.size())
    m.fail("block", fmt::format("block rank {} is not the array's rank {}", o.block.size(),
                                o.array.shape.size()));
  std::vector<AffineExpr> dims;
  const std::vector<YamlMap> exprs = m.list("index_map", {"offset", "coeff"});
  if (exprs.size() != o.block.size())
    m.fail("index_map",
           fmt::format("{} expressions for a block of rank {}", exprs.size(), o.block.size()));
  for (const YamlMap& e : exprs) {
    AffineExpr a;
    a.offset = e.as<int64_t>("offset", "an integer");
    for (int c : ints_of(e, "coeff")) a.coeff.push_back(c);
    if (a.coeff.size() != grid_rank)
      e.fail("coeff",
             fmt::format("{} coefficients for a grid of rank {}", a.coeff.size(), grid_rank));
    dims.push_back(a);
  }
  o.index = IndexMap(std::move(dims));
  return o;
}

const std::map<std::string, EwFn> kFunctions = {{"add", EwFn::add},
                                                {"sub", EwFn::sub},
                                                {"mul", EwFn::mul},
                                                {"div", EwFn::div},
                                                {"neg", EwFn::neg},
                                                {"max", EwFn::max},
                                                {"min", EwFn::min},
                                                {"exp", EwFn::exp},
                                                {"log", EwFn::log},
                                                {"tanh", EwFn::tanh},
                                                {"logistic", EwFn::logistic},
                                                {"rsqrt", EwFn::rsqrt},
                                                {"eq", EwFn::eq},
                                                {"ne", EwFn::ne},
                                                {"lt", EwFn::lt},
                                                {"le", EwFn::le},
                                                {"gt", EwFn::gt},
                                                {"ge", EwFn::ge},
                                                {"and", EwFn::logical_and},
                                                {"or", EwFn::logical_or},
                                                {"select", EwFn::select},
                                                {"idiv", EwFn::idiv},
                                                {"rem", EwFn::rem},
                                                {"sign", EwFn::sign}};

std::vector<std::string> names_of(const std::map<std::string, EwFn>& m) {
  std::vector<std::string> n;
  for (const auto& [k, _] : m) n.push_back(k);
  return n;
}

Precision precision_of(const std::string& s) {
  if (s == "high") return Precision::high;
  if (s == "highest") return Precision::highest;
  return Precision::default_;
}

// Builds the body: JSON value ids (the operands, then the scratch, then each op's "out") map to
// the builder's values; a use before a definition is an error at the op.
class BodyReader {
  // The fields each kind of op takes besides op, name and in.
  static inline const std::map<std::string, std::vector<std::string>> kFields = {
      {"cast", {"out", "dtype"}},
      {"elementwise", {"out", "fn", "scalar"}},
      {"reduce", {"out", "fn", "axes"}},
      {"reshape", {"out", "shape"}},
      {"broadcast", {"out", "shape"}},
      {"iota", {"out", "shape", "dtype", "axis"}},
      {"constant", {"out", "shape", "dtype", "value"}},
      {"dot", {"out", "dims", "precision", "dtype"}},
      {"concat", {"out", "axis"}},
      {"slice", {"out", "axis", "start", "size"}},
      {"copy", {"into"}}};
  // pl.when on the first or last index of a grid axis.
  static inline const std::map<std::string, When::Kind> kWhens = {{"first", When::first},
                                                                  {"last", When::last},
                                                                  {"not_first", When::not_first},
                                                                  {"not_last", When::not_last}};

 public:
  BodyReader(KernelBuilder& b, std::vector<ValueId> refs, size_t grid_rank)
      : b_(b), ids_(std::move(refs)), grid_rank_(grid_rank) {}

  // Every field some kind of op takes.
  static std::vector<std::string> fields() {
    std::vector<std::string> all = {"op", "name", "in", "when"};
    for (const auto& [kind, fs] : kFields)
      for (const std::string& f : fs)
        if (std::find(all.begin(), all.end(), f) == all.end()) all.push_back(f);
    return all;
  }

  // `op`: an op whose fields are all of some kind of op; here only its own kind's are allowed.
  void op(const YamlMap& op) {
    std::vector<std::string> kinds;
    for (const auto& [k, _] : kFields) kinds.push_back(k);
    const std::string kind = op.choice("op", kinds);
    std::vector<std::string> fields = {"op", "name", "in", "when"};
    fields.insert(fields.end(), kFields.at(kind).begin(), kFields.at(kind).end());
    const YamlMap m(op.file(), op.node(), op.path(), fields, "field of a " + kind + " op");
    const std::string name = m.string("name", kind);
    std::vector<ValueId> in;
    for (int id : ints_of(m, "in")) in.push_back(value(m, "in", id));
    const bool makes = kind == "iota" || kind == "constant";  // from no operand
    const bool variadic = kind == "elementwise" || kind == "concat";
    const size_t arity = makes ? 0 : variadic ? in.size() : kind == "dot" ? 2 : 1;
    if ((!makes && in.empty()) || in.size() != arity || (kind == "elementwise" && in.size() > 3))
      m.fail("in", fmt::format("{} values for a {} op", in.size(), kind));
    when_ = when_of(m);
    if (kind == "copy") {
      const ValueId into = value(m, "into", m.as<int>("into", "an integer"));
      guarded(m, [&] { return b_.copy(name, in[0], into, when_); });
      return;
    }
    const ValueId out = build(m, kind, name, in);
    const int id = m.as<int>("out", "an integer");
    if (id != static_cast<int>(ids_.size()))
      m.fail("out", fmt::format("value {} defined out of order (next is {})", id, ids_.size()));
    ids_.push_back(out);
  }

 private:
  // Runs a builder call; what the IR refuses (shapes that do not broadcast, a reshape that changes
  // the size) becomes an error at the op.
  template <typename Call>
  ValueId guarded(const YamlMap& m, Call call) {
    try {
      return call();
    } catch (const Error& e) {
      yaml_fail(m.file(), m.node(), m.key_path("op"), e.what());
    }
  }

  When when_of(const YamlMap& op) const {
    if (!op.has("when")) return {};
    const YamlMap w = op.map("when", {"kind", "axis"});
    std::vector<std::string> names;
    for (const auto& [k, _] : kWhens) names.push_back(k);
    When when{kWhens.at(w.choice("kind", names)), w.as<int>("axis", "an integer")};
    if (when.axis < 0 || when.axis >= static_cast<int>(grid_rank_))
      w.fail("axis", fmt::format("grid axis {} of a {}-axis grid", when.axis, grid_rank_));
    return when;
  }

  // Reads the op's fields (their errors name themselves), then builds it.
  ValueId build(const YamlMap& m, const std::string& kind, const std::string& name,
                const std::vector<ValueId>& in) {
    auto dtype = [&] { return dtype_of(m.choice("dtype", kDtypeNames)); };
    const When w = when_;
    if (kind == "cast") return guarded(m, [&, t = dtype()] { return b_.cast(name, in[0], t, w); });
    if (kind == "iota") {
      const Shape s = shape_of(m, "shape");
      const int axis = m.as<int>("axis", "an integer");
      return guarded(m, [&, t = dtype()] { return b_.iota(name, s, t, axis, w); });
    }
    if (kind == "constant") {
      const Shape s = shape_of(m, "shape");
      const double v = m.as<double>("value", "a number");
      return guarded(m, [&, t = dtype()] { return b_.fill(name, b_.temp(name, s, t), v, w); });
    }
    if (kind == "reshape") {
      const Shape s = shape_of(m, "shape");
      return guarded(m, [&] { return b_.reshape(name, in[0], s, w); });
    }
    if (kind == "broadcast") {
      const Shape s = shape_of(m, "shape");
      return guarded(m, [&] { return b_.broadcast(name, in[0], s, w); });
    }
    if (kind == "concat") {
      const int axis = m.as<int>("axis", "an integer");
      return guarded(m, [&] { return b_.concat(name, in, axis, w); });
    }
    if (kind == "slice") {
      const int axis = m.as<int>("axis", "an integer");
      const auto start = m.as<int64_t>("start", "an integer");
      const auto size = m.as<int64_t>("size", "an integer");
      return guarded(m, [&] { return b_.slice(name, in[0], axis, start, size, w); });
    }
    if (kind == "reduce") {
      const std::vector<int> axes = ints_of(m, "axes");
      const bool max = m.choice("fn", {"add", "max"}) == "max";
      return guarded(m, [&] {
        return max ? b_.reduce_max(name, in[0], axes, w) : b_.reduce(name, in[0], axes, w);
      });
    }
    if (kind == "dot") {
      const YamlMap d = m.map("dims", {"lhs_contract", "rhs_contract", "lhs_batch", "rhs_batch"});
      const DotDims dims{ints_of(d, "lhs_contract"), ints_of(d, "rhs_contract"),
                         ints_of(d, "lhs_batch"), ints_of(d, "rhs_batch")};
      const Precision p = precision_of(m.choice("precision", {"default", "high", "highest"}));
      return guarded(m, [&, t = dtype()] { return b_.dot(name, in[0], in[1], t, dims, p, w); });
    }
    const EwFn fn = kFunctions.at(m.choice("fn", names_of(kFunctions)));
    if (m.has("scalar")) {
      const double x = m.as<double>("scalar", "a number");
      return guarded(m, [&] { return b_.with_scalar(name, fn, in[0], x, -1, w); });
    }
    return guarded(m, [&] { return b_.elementwise(name, fn, in, -1, w); });
  }

  ValueId value(const YamlMap& m, const std::string& key, int id) const {
    if (id < 0 || id >= static_cast<int>(ids_.size()))
      m.fail(key, fmt::format("value {} is not defined yet ({} are)", id, ids_.size()));
    return ids_[id];
  }

  KernelBuilder& b_;
  std::vector<ValueId> ids_;
  size_t grid_rank_;
  When when_;  // of the op being read
};

std::shared_ptr<const Kernel> kernel_of(const YamlMap& m) {
  KernelBuilder b(m.string("name"),
                  m.choice("origin", {"pallas", "xla"}) == "xla" ? Origin::xla : Origin::pallas);
  const Shape grid = shape_of(m, "grid");
  std::vector<DimSemantics> sem;
  const YAML::Node s = m.need("semantics");
  if (!s.IsSequence() || s.size() != grid.size())
    m.fail("semantics", fmt::format("expected {} entries, one per grid axis", grid.size()));
  for (const auto& x : s) {
    const auto v = yaml_as<std::string>(m.file(), x, m.key_path("semantics"), "a string");
    if (v != "parallel" && v != "arbitrary")
      yaml_fail(m.file(), x, m.key_path("semantics"), "expected parallel or arbitrary");
    sem.push_back(v == "parallel" ? DimSemantics::parallel : DimSemantics::arbitrary);
  }
  b.grid(grid, sem);
  const std::vector<std::string> operand_keys = {"name", "shape", "dtype", "block", "index_map"};
  std::vector<ValueId> refs;
  for (const YamlMap& o : m.list("inputs", operand_keys)) {
    const Operand x = operand_of(o, grid.size());
    refs.push_back(b.input(x.array, x.block, x.index));
  }
  for (const YamlMap& o : m.list("outputs", operand_keys, 1)) {
    const Operand x = operand_of(o, grid.size());
    refs.push_back(b.output(x.array, x.block, x.index));
  }
  for (const YamlMap& t : m.list("scratch", {"name", "shape", "dtype"}))
    refs.push_back(b.scratch(t.string("name"), shape_of(t, "shape"),
                             dtype_of(t.choice("dtype", kDtypeNames))));
  BodyReader body(b, refs, grid.size());
  for (const YamlMap& op : m.list("ops", BodyReader::fields())) body.op(op);
  return b.build();
}

}  // namespace

ImportedProgram import_program(const std::string& file) {
  const YamlMap top(file, yaml_load_file(file), "",
                    {"format", "version", "name", "source", "items", "outputs", "functional"});
  if (top.string("format") != kFormat)
    top.fail("format", fmt::format("expected '{}' (a program of python/tpusim_jax)", kFormat));
  if (top.as<int>("version", "an integer") != kVersion)
    top.fail("version", fmt::format("this tpusim reads version {}", kVersion));
  ImportedProgram p;
  p.file = file;
  p.name = top.string("name");
  p.source = top.string("source", "");
  p.program.name = p.name;
  p.functional = !top.has("functional") || top.as<bool>("functional", "true or false");
  read_items(top, kernel_of, p.program);
  const YAML::Node outs = top.need("outputs");
  if (!outs.IsSequence()) top.fail("outputs", "expected a list of array names");
  for (const auto& o : outs)
    p.outputs.push_back(yaml_as<std::string>(file, o, "outputs", "a string"));
  return p;
}

bool is_program_file(const std::string& file) {
  try {
    const YAML::Node root = yaml_load_file(file);
    return root.IsMap() && root["format"] && root["format"].IsScalar() &&
           root["format"].Scalar() == kFormat;
  } catch (const Error&) {
    return false;
  }
}

kernels::CatalogEntry catalog_entry(const ImportedProgram& p) {
  return {"imported:" + p.name,
          fmt::format("{} (exported from {})", p.file, p.source.empty() ? "JAX" : p.source),
          {},
          [program = p.program](const ChipSpec&, const kernels::KnobValues&) { return program; }};
}

namespace {

HostArray host_array(const std::string& file, const std::string& name, const nlohmann::json& j) {
  try {
    HostArray a;
    a.shape = j.at("shape").get<Shape>();
    a.dtype = dtype_of(j.at("dtype").get<std::string>());
    a.data = j.at("data").get<std::vector<float>>();
    if (static_cast<int64_t>(a.data.size()) != num_elements(a.shape))
      throw Error(fmt::format("{} values for shape {}", a.data.size(), to_string(a.shape)));
    return a;
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: array '{}': {}", file, name, e.what()));
  }
}

// Whether bf16 rounding takes part in computing the outputs: bf16 data or a DEFAULT-precision dot.
}  // namespace

std::vector<OutputCheck> check_program(const ImportedProgram& p, const std::string& check_file) {
  if (!p.functional)
    throw Error(
        fmt::format("{}: the functional check runs programs of Pallas kernels only; this "
                    "one has XLA work outside its kernels, which tpusim times but does "
                    "not execute",
                    p.file));
  const std::string text = read_text_file(check_file);
  nlohmann::json data;
  try {
    data = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: {}", check_file, e.what()));
  }
  if (!data.contains("inputs") || !data.contains("outputs"))
    throw Error(fmt::format("{}: expected the inputs and outputs of `tpusim_jax export --check`",
                            check_file));
  ArrayMap arrays;
  for (const auto& [name, a] : data["inputs"].items())
    arrays[name] = host_array(check_file, name, a);
  execute(p.program, arrays);
  std::vector<OutputCheck> checks;
  for (const std::string& name : p.outputs) {
    if (!data["outputs"].contains(name))
      throw Error(fmt::format("{}: no JAX output '{}'", check_file, name));
    const HostArray want = host_array(check_file, name, data["outputs"][name]);
    const auto it = arrays.find(name);
    if (it == arrays.end() || it->second.data.size() != want.data.size())
      throw Error(fmt::format("{}: the program did not produce '{}' at its shape", p.file, name));
    OutputCheck c{name};
    const Rounding rounding = rounding_of(p.program, want.dtype);
    c.rounding = tpusim::name(rounding);
    for (size_t i = 0; i < want.data.size(); ++i) {
      c.max_abs_reference = std::max(c.max_abs_reference, std::abs(double(want.data[i])));
      const double d = std::abs(double(want.data[i]) - it->second.data[i]);
      c.max_abs_error = std::isnan(d) ? INFINITY : std::max(c.max_abs_error, d);
    }
    c.tolerance = relative_tolerance(rounding) * c.max_abs_reference;
    c.ok = c.max_abs_error <= c.tolerance;
    checks.push_back(c);
  }
  return checks;
}

}  // namespace tpusim
