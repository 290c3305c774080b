#include "app/hlo_work.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "app/hlo_collectives.h"
#include "kernels/gdn/xla.h"
#include "kernels/tiling.h"
#include "sim/error.h"
#include "sim/ir/shape.h"
#include "sim/ir/validate.h"

namespace tpusim {

DType dtype_of_hlo(const std::string& t) {
  if (t == "bf16") return DType::bf16;
  if (t == "s8" || t == "u8" || t == "pred") return DType::s8;
  if (t == "s32" || t == "u32") return DType::s32;
  return DType::f32;
}

namespace {

const std::set<std::string> kTranscendental = {"exponential", "exponential-minus-one",
                                               "log",         "log-plus-one",
                                               "tanh",        "logistic",
                                               "rsqrt",       "sqrt",
                                               "cbrt",        "power",
                                               "sine",        "cosine",
                                               "tan",         "atan2",
                                               "erf"};
const std::set<std::string> kArithmetic = {"add",
                                           "subtract",
                                           "multiply",
                                           "divide",
                                           "maximum",
                                           "minimum",
                                           "compare",
                                           "select",
                                           "and",
                                           "or",
                                           "xor",
                                           "not",
                                           "negate",
                                           "abs",
                                           "convert",
                                           "clamp",
                                           "sign",
                                           "floor",
                                           "ceil",
                                           "round-nearest-even",
                                           "round-nearest-afz",
                                           "remainder",
                                           "shift-left",
                                           "shift-right-logical",
                                           "shift-right-arithmetic",
                                           "is-finite",
                                           "popcnt",
                                           "count-leading-zeros"};

std::vector<int64_t> numbers_after(const std::string& text, const std::string& key) {
  std::vector<int64_t> out;
  const auto at = text.find(key + "=");
  if (at == std::string::npos) return out;
  size_t i = at + key.size() + 1;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    size_t used = 0;
    out.push_back(std::stoll(text.substr(i), &used));
    i += used;
    if (i < text.size() && text[i] == 'x') ++i;
  }
  return out;
}

// Every number in an attribute's text, in order: lhs_contracting_dims={1,2} -> 1, 2.
std::vector<int64_t> numbers_in(const std::string& text) {
  std::vector<int64_t> v;
  for (size_t i = 0; i < text.size();)
    if (std::isdigit(static_cast<unsigned char>(text[i]))) {
      size_t used = 0;
      v.push_back(std::stoll(text.substr(i), &used));
      i += used;
    } else {
      ++i;
    }
  return v;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

Precision precision_of(const HloInstruction& in) {
  const std::string p = in.attr("operand_precision");
  if (p.find("highest") != std::string::npos) return Precision::highest;
  if (p.find("high") != std::string::npos) return Precision::high;
  return Precision::default_;
}

// The window taps per output position that land on the input rather than its padding, over the
// spatial dims (stride 1): the TPU backend writes a dot against a weight shared by a batch of
// sequences as a window over the batch on a padded length-1 input, where every output position
// sees one tap, not the window's size.
int64_t input_taps(const std::string& lhs_labels, const HloShape& lhs, const std::string& window,
                   const std::vector<int64_t>& size) {
  if (window.find("stride=") != std::string::npos) return product(size);
  std::vector<std::pair<int64_t, int64_t>> pads;
  if (const auto at = window.find("pad="); at != std::string::npos) {
    std::stringstream ss(window.substr(at + 4, window.find(' ', at) - at - 4));
    for (std::string p; std::getline(ss, p, 'x');)
      pads.emplace_back(std::stoll(p), std::stoll(p.substr(p.find('_') + 1)));
  }
  double taps = 1;
  for (size_t s = 0; s < size.size(); ++s) {
    const auto at = lhs_labels.find(static_cast<char>('0' + s));
    const int64_t len = at < lhs.dims.size() ? lhs.dims[at] : size[s];
    const auto [lo, hi] = s < pads.size() ? pads[s] : std::pair<int64_t, int64_t>{0, 0};
    const int64_t outputs = len + lo + hi - size[s] + 1;
    if (outputs <= 0) continue;
    int64_t pairs = 0;
    for (int64_t o = 0; o < outputs; ++o)
      pairs += std::max<int64_t>(0, std::min(o + size[s], lo + len) - std::max(o, lo));
    taps *= static_cast<double>(pairs) / static_cast<double>(outputs);
  }
  return std::max<int64_t>(1, std::llround(taps));
}

// A convolution as the TPU backend writes dots (dim_labels b: rows, f: columns, i: contracted,
// digits: spatial); or a dot with its batch and contracting dims.
HloDot dot_of(const HloComputation& comp, const HloInstruction& in, const std::string& file) {
  const HloInstruction* lhs = comp.find(in.operands.at(0));
  const HloInstruction* rhs = comp.find(in.operands.at(1));
  if (!lhs || !rhs)
    throw Error(fmt::format("{}:{}: '{}': operands not found", file, in.line, in.name));
  HloDot d;
  d.lhs = dtype_of_hlo(lhs->shape.dtype);
  d.rhs = dtype_of_hlo(rhs->shape.dtype);
  d.precision = precision_of(in);
  if (in.opcode == "dot") {
    for (int64_t i : numbers_in(in.attr("lhs_batch_dims"))) d.batch *= lhs->shape.dims.at(i);
    for (int64_t i : numbers_in(in.attr("lhs_contracting_dims"))) d.k *= lhs->shape.dims.at(i);
    d.m = lhs->shape.elements() / (d.batch * d.k);
    d.n = in.shape.elements() / (d.batch * d.m);
    return d;
  }
  const std::string labels = in.attr("dim_labels");
  const auto us = labels.find('_'), arrow = labels.find("->");
  if (us == std::string::npos || arrow == std::string::npos)
    throw Error(fmt::format("{}:{}: convolution '{}' without dim_labels", file, in.line, in.name));
  const std::string rhs_l = labels.substr(us + 1, arrow - us - 1), out_l = labels.substr(arrow + 2);
  int64_t spatial = 1;
  d.m = d.n = 1;
  for (size_t j = 0; j < out_l.size() && j < in.shape.dims.size(); ++j) {
    if (out_l[j] == 'b')
      d.m *= in.shape.dims[j];
    else if (out_l[j] == 'f')
      d.n *= in.shape.dims[j];
    else
      spatial *= in.shape.dims[j];
  }
  const auto i_at = rhs_l.find('i');
  d.k = i_at < rhs->shape.dims.size() ? rhs->shape.dims[i_at] : 1;
  const std::string window = in.attr("window");
  const auto size = numbers_after(window, "size"), dilate = numbers_after(window, "lhs_dilate");
  if (!dilate.empty() && dilate == size) {
    d.batch = spatial;  // the batched dot: each output position sees one dilated input position
  } else {
    d.m *= spatial;
    d.k *= input_taps(labels.substr(0, us), lhs->shape, window, size);
  }
  return d;
}

// The work of `in` inside `comp` (arithmetic, transcendental, dots), not its traffic.
void add_ops(HloWork& w, const HloComputation& comp, const HloInstruction& in,
             const std::string& file) {
  const int64_t out = in.shape.is_tuple() ? 0 : in.shape.elements();
  if (kTranscendental.count(in.opcode)) {
    w.eup_elements += out;
  } else if (kArithmetic.count(in.opcode)) {
    w.vpu_elements += out;
  } else if (in.opcode == "rng-bit-generator") {
    // The core's random-bit generator (Pallas reaches it as pltpu.prng_random_bits, a vreg of
    // bits per call); its rate is not published: one vector op per element is assumed.
    for (const HloShape& s : in.shape.is_tuple() ? in.shape.tuple : std::vector{in.shape})
      w.vpu_elements += s.elements();
  } else if (in.opcode == "reduce" || in.opcode == "reduce-window") {
    const HloInstruction* x = comp.find(in.operands.at(0));
    const int64_t n = x ? x->shape.elements() : out;
    // A reduction over the lanes (the operand's minor dim) adds up each row's vregs on the VPU
    // and ends in a cross-lane reduction on the XLU per 8 rows (the last vreg of each, which the
    // kernel's reduce charges): libtpu's final bundles of f32[4096,16,128] summed over its 128
    // lanes on v5e issue one vadd.xlane per input vreg, spread over the core's XLUs
    // (tests/jax/lane_reduction.sh).
    int64_t rows = 0;
    if (x && in.opcode == "reduce" && !x->shape.dims.empty()) {
      const int minor = x->shape.minor_dim();
      if (std::ranges::count(numbers_in(in.attr("dimensions")), minor) > 0)
        rows = n / std::max<int64_t>(1, x->shape.dims[minor]);
    }
    w.lane_reduced_rows += rows;
    w.vpu_elements += in.opcode == "reduce" ? std::max<int64_t>(0, n - rows * kLanes)
                                            : n * product(numbers_after(in.attr("window"), "size"));
  } else if (in.opcode == "convolution" || in.opcode == "dot") {
    w.dots.push_back(dot_of(comp, in, file));
  }
}

bool reads_a_slice(const HloInstruction& user) {
  return user.opcode == "dynamic-slice" || user.opcode == "slice" || user.opcode == "gather";
}

// A use of a fusion parameter that costs the TensorCore no load: a collective carried by an async
// collective fusion (the ICI DMAs move its data), or the root tuple passing it through.
bool moves_no_data(const HloInstruction& user) {
  return collective_kind(user.opcode).has_value() || user.opcode == "tuple";
}

// The HBM bytes a fusion reads of parameter `p`: a slice's where it is only sliced, nothing
// where it is only updated in place, all of it otherwise; a nested fusion's use is its own.
int64_t bytes_read(const HloModule& m, const HloComputation& fused, const HloInstruction& p) {
  int64_t part = 0;
  bool whole = false;
  for (const HloInstruction& u : fused.instructions) {
    for (size_t j = 0; j < u.operands.size(); ++j) {
      if (u.operands[j] != p.name) continue;
      if (moves_no_data(u)) {
        continue;
      } else if (j == 0 && reads_a_slice(u)) {
        part += u.shape.bytes();
      } else if (u.opcode == "fusion") {
        const HloComputation& nested = m.computation(u.attr("calls"));
        for (const HloInstruction& q : nested.instructions)
          if (q.opcode == "parameter" && std::stoul(q.literal) == j)
            part += bytes_read(m, nested, q);
      } else if (!(j == 0 && u.opcode == "dynamic-update-slice")) {
        whole = true;
      }
    }
  }
  return whole ? p.shape.bytes() : std::min(part, p.shape.bytes());
}

// Bytes written for one result: an in-place update writes its update.
int64_t bytes_written(const HloComputation& comp, const HloInstruction* r) {
  while (r && r->opcode == "bitcast") r = comp.find(r->operands.at(0));
  if (r && r->opcode == "dynamic-update-slice") {
    const HloInstruction* update = comp.find(r->operands.at(1));
    return update ? update->shape.bytes() : r->shape.bytes();
  }
  return r ? r->shape.bytes() : 0;
}

const HloShape& element(const HloShape& s, size_t i) {
  return s.is_tuple() && i < s.tuple.size() ? s.tuple[i] : s;
}

}  // namespace

std::optional<CollectiveKind> collective_kind(const std::string& opcode) {
  static const std::map<std::string, CollectiveKind> kinds = {
      {"all-reduce", CollectiveKind::all_reduce},
      {"all-reduce-start", CollectiveKind::all_reduce},
      {"all-gather", CollectiveKind::all_gather},
      {"all-gather-start", CollectiveKind::all_gather},
      {"reduce-scatter", CollectiveKind::reduce_scatter},
      {"all-to-all", CollectiveKind::all_to_all},
      {"collective-permute", CollectiveKind::permute},
      {"collective-permute-start", CollectiveKind::permute}};
  const auto it = kinds.find(opcode);
  if (it == kinds.end()) return std::nullopt;
  return it->second;
}

bool hands_on(const HloInstruction& r) {
  return r.opcode == "parameter" || collective_kind(r.opcode).has_value();
}

HloWork work_of(const HloModule& m, const HloComputation& comp, const HloInstruction& in) {
  HloWork w;
  if (in.opcode != "fusion") {
    // A lone op: it reads its operands (or their slices) and writes its result.
    for (size_t j = 0; j < in.operands.size(); ++j) {
      const HloInstruction* x = comp.find(in.operands[j]);
      if (!x || x->shape.memory_space == 1 || x->shape.is_tuple()) continue;
      if (x->opcode == "constant" && x->shape.elements() == 1) continue;  // a literal
      int64_t b = x->shape.bytes();
      if (j == 0 && reads_a_slice(in)) b = in.shape.bytes();
      if (j == 0 && in.opcode == "dynamic-update-slice") b = 0;
      if (b > 0) w.reads.push_back({x->name, dtype_of_hlo(x->shape.dtype), b});
    }
    if (in.shape.memory_space != 1 && !in.shape.is_tuple())
      w.writes.push_back({in.name, dtype_of_hlo(in.shape.dtype), bytes_written(comp, &in)});
    add_ops(w, comp, in, m.file);
    return w;
  }
  const HloComputation& fused = m.computation(in.attr("calls"));
  for (const HloInstruction& p : fused.instructions) {
    if (p.opcode != "parameter") continue;
    const size_t i = std::stoul(p.literal);
    const HloInstruction* x = i < in.operands.size() ? comp.find(in.operands[i]) : nullptr;
    if (p.shape.memory_space == 1 || (x && x->shape.memory_space == 1)) continue;
    const int64_t b = bytes_read(m, fused, p);
    if (b > 0) w.reads.push_back({x ? x->name : p.name, dtype_of_hlo(p.shape.dtype), b});
  }
  const HloInstruction& root = fused.root();
  std::vector<const HloInstruction*> results;
  if (root.opcode == "tuple")
    for (const std::string& o : root.operands) results.push_back(fused.find(o));
  else
    results.push_back(&root);
  for (size_t i = 0; i < results.size(); ++i) {
    const HloShape& s = element(in.shape, i);
    if (s.memory_space == 1 || !results[i]) continue;
    if (hands_on(*results[i])) continue;
    w.writes.push_back({fmt::format("{}.{}", in.name, i), dtype_of_hlo(s.dtype),
                        bytes_written(fused, results[i])});
  }
  for (const HloInstruction& f : fused.instructions) {
    add_ops(w, fused, f, m.file);
    if (collective_kind(f.opcode))  // a fusion the async collective fusion hands a collective on
      if (const auto c = hlo_collective(m, f))
        w.carried_group = std::max(w.carried_group, c->axis.size);
  }
  return w;
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// How a grid of `steps` shares a dot: the batch where the steps divide it, else a tile of rows
// by columns, the split whose smaller side is longest (a weight gradient's few rows against many
// columns keeps its rows whole rather than reloading every weight tile for a handful of them).
struct DotSplit {
  int64_t batch = 1, rows = 1, columns = 1;
};

std::optional<DotSplit> dot_split(const HloDot& d, int64_t steps) {
  if (d.batch % steps == 0) return DotSplit{steps, 1, 1};
  std::optional<DotSplit> best;
  int64_t best_side = 0;
  for (int64_t columns = 1; columns <= steps; columns *= 2) {
    const int64_t rows = steps / columns;
    if (d.m % rows != 0 || d.n % columns != 0) continue;
    const int64_t side = std::min(d.m / rows, d.n / columns);
    if (!best || side > best_side) {
      best = DotSplit{1, rows, columns};
      best_side = side;
    }
  }
  return best;
}

// The kernel for `w` with `steps` grid steps (each step a 1/steps share of everything).
std::shared_ptr<const Kernel> build(const std::string& name, const HloWork& w, int64_t steps) {
  KernelBuilder kb(name, Origin::xla);
  kb.grid({steps}, {DimSemantics::parallel});
  const IndexMap by_step({axis(0), constant(0)});
  // Blocks of whole (8, 128) tiles when the grid splits an array, else the whole array.
  auto stream = [&](const HloTraffic& t) {
    const int64_t elems = ceil_div(t.bytes, byte_size(t.dtype));
    int64_t rows = std::max<int64_t>(1, ceil_div(elems, kLanes * steps));
    if (steps > 1) rows = ceil_div(rows, kSublanes) * kSublanes;
    return Tensor{t.name, {rows * steps, kLanes}, t.dtype};
  };
  for (const HloTraffic& t : w.reads) {
    const Tensor a = stream(t);
    kb.input(a, {a.shape[0] / steps, kLanes}, by_step);
  }
  for (const HloTraffic& t : w.writes) {
    const Tensor a = stream(t);
    kb.output(a, {a.shape[0] / steps, kLanes}, by_step);
  }
  auto per_step_rows = [&](int64_t elements) {
    return std::max<int64_t>(1, ceil_div(elements, kLanes * steps));
  };
  if (w.vpu_elements > 0) {
    const ValueId x = kb.temp("elementwise", {per_step_rows(w.vpu_elements), kLanes}, DType::f32);
    kb.elementwise("VPU work", EwFn::add, {x, x}, -1);
  }
  if (w.lane_reduced_rows > 0) {
    const ValueId x =
        kb.temp("lane-reduced rows", {ceil_div(w.lane_reduced_rows, steps), kLanes}, DType::f32);
    kb.reduce("XLU work", x, {1});
  }
  if (w.eup_elements > 0) {
    const ValueId x =
        kb.temp("transcendental", {per_step_rows(w.eup_elements), kLanes}, DType::f32);
    kb.elementwise("EUP work", EwFn::exp, {x}, -1);
  }
  for (const HloDot& d : w.dots) {
    const DotSplit split = *dot_split(d, steps);
    const int64_t batch = d.batch / split.batch, m = d.m / split.rows, n = d.n / split.columns;
    const ValueId lhs = kb.temp("lhs", {batch, m, d.k}, d.lhs);
    const ValueId rhs = kb.temp("rhs", {batch, d.k, n}, d.rhs);
    kb.dot(fmt::format("dot {}x{}x{}x{}", d.batch, d.m, d.k, d.n), lhs, rhs, DType::f32,
           DotDims::batched(), d.precision);
  }
  return kb.build();
}

}  // namespace

std::shared_ptr<const Kernel> work_kernel(const std::string& name, const HloWork& w) {
  // The fewest steps (largest blocks, as XLA tiles) whose blocks and temporaries fit the budget
  // and split the dots evenly.
  for (int64_t steps = 1; steps <= (int64_t{1} << 20); steps *= 2) {
    bool splits = true;
    for (const HloDot& d : w.dots) splits = splits && dot_split(d, steps).has_value();
    if (!splits) break;
    auto k = build(name, w, steps);
    if (vmem_usage(*k).total_bytes > kernels::kXlaVmemBudget) continue;
    if (w.carried_group == 0) return k;
    auto carrier = std::make_shared<Kernel>(*k);
    carrier->carried_group = w.carried_group;
    return carrier;
  }
  throw Error(fmt::format("'{}': no tiling of its work fits {} MiB of VMEM", name,
                          kernels::kXlaVmemBudget >> 20));
}

Program custom_call_program(const HloModule& m, const HloInstruction& in,
                            const std::string& target) {
  if (target != "InvertDiagBlocksLowerTriangular")
    throw Error(fmt::format("{}:{}: custom call '{}' (target {}) has no model", m.file, in.line,
                            in.name, target));
  // XLA's TPU backend inverts the [C, C] diagonal blocks of a triangular solve in one custom
  // call whose algorithm is not public: one block at a time (its scoped VMEM is five blocks
  // whatever their number), C - 1 dependent row steps each, their latency calibrated on
  // measured_runs.md C4 (kernels/gdn/xla.cpp).
  // Its operand is [N, H, 1, C, C]-like: the first dim counts chunks, the rest heads.
  const auto& d = in.shape.dims;
  if (d.size() < 3 || d[d.size() - 1] != d[d.size() - 2])
    throw Error(fmt::format("{}:{}: '{}': expected [..., C, C] blocks", m.file, in.line, in.name));
  kernels::gdn::GdnShape s;
  s.chunk = d.back();
  s.batch = 1;
  s.seq = d[0] * s.chunk;
  s.heads = in.shape.elements() / (d[0] * s.chunk * s.chunk);
  Program p = kernels::gdn::xla_invert_diagonal_blocks(s);
  p.name = in.name;
  return p;
}

}  // namespace tpusim
