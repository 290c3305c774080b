#include "sim/functional/interpreter.h"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "sim/error.h"

namespace tpusim {
namespace {

using Buffer = std::vector<float>;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

// Calls f(flat index of `out`, flat index into `in`) with `in` broadcast to `out`'s shape.
template <typename F>
void broadcast_walk(const Shape& out, const Shape& in, F&& f) {
  const int64_t n = num_elements(out);
  const size_t r = out.size();
  std::vector<int64_t> in_st(r, 0);
  const std::vector<int64_t> st = strides_of(in);
  for (size_t i = 0; i < in.size(); ++i) in_st[r - in.size() + i] = in[i] == 1 ? 0 : st[i];
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t flat = 0; flat < n; ++flat) {
    f(flat, off);
    for (int d = static_cast<int>(r) - 1; d >= 0; --d) {
      off += in_st[d];
      if (++idx[d] < out[d]) break;
      off -= in_st[d] * out[d];
      idx[d] = 0;
    }
  }
}

// Permutes `data` of shape `s` so that dims `order` come first, in that order.
Buffer permute(const Buffer& data, const Shape& s, const std::vector<int>& order) {
  Buffer out(data.size());
  const std::vector<int64_t> st = strides_of(s);
  Shape ps;
  for (int d : order) ps.push_back(s[d]);
  std::vector<int64_t> idx(order.size(), 0);
  int64_t src = 0;
  for (size_t flat = 0; flat < data.size(); ++flat) {
    out[flat] = data[src];
    for (int d = static_cast<int>(order.size()) - 1; d >= 0; --d) {
      src += st[order[d]];
      if (++idx[d] < ps[d]) break;
      src -= st[order[d]] * ps[d];
      idx[d] = 0;
    }
  }
  return out;
}

float apply(EwFn fn, float a, float b) {
  switch (fn) {
    case EwFn::add:
      return a + b;
    case EwFn::sub:
      return a - b;
    case EwFn::mul:
      return a * b;
    case EwFn::div:
      return a / b;
    case EwFn::neg:
      return -a;
    case EwFn::max:
      return std::max(a, b);
    case EwFn::min:
      return std::min(a, b);
    case EwFn::fill:
      return b;
    case EwFn::eq:
      return a == b;
    case EwFn::ne:
      return a != b;
    case EwFn::lt:
      return a < b;
    case EwFn::le:
      return a <= b;
    case EwFn::gt:
      return a > b;
    case EwFn::ge:
      return a >= b;
    case EwFn::logical_and:
      return a != 0 && b != 0;
    case EwFn::logical_or:
      return a != 0 || b != 0;
    case EwFn::select:  // three operands: handled by the caller
      return a;
    case EwFn::idiv:
      return std::trunc(a / b);
    case EwFn::rem:
      return std::fmod(a, b);
    case EwFn::sign:
      return static_cast<float>((a > 0) - (a < 0));
    case EwFn::exp:
      return std::exp(a);
    case EwFn::log:
      return std::log(a);
    case EwFn::tanh:
      return std::tanh(a);
    case EwFn::logistic:
      return 1.0f / (1.0f + std::exp(-a));
    case EwFn::rsqrt:
      return 1.0f / std::sqrt(a);
    case EwFn::softplus:
      return a > 20 ? a : std::log1p(std::exp(a));
  }
  return a;
}

bool in_mask(MaskKind kind, int64_t i, int64_t j, int64_t rows, int64_t b) {
  switch (kind) {
    case MaskKind::lower:  // b shifts the column: the mask of a sub-block of a wider matrix
      return i >= j - b;
    case MaskKind::strict_lower:
      return i > j - b;
    case MaskKind::sibling_block:
      return i / b != j / b && i / (2 * b) == j / (2 * b);
    case MaskKind::last_row:
      return i == rows - 1;
    case MaskKind::diagonal:
      return i == j;
    case MaskKind::all:
      return true;
  }
  return true;
}

class KernelRun {
 public:
  KernelRun(const Kernel& k, ArrayMap& arrays) : k_(k), arrays_(arrays), v_(k.values.size()) {}

  void run() {
    for (const BlockSpec& s : k_.inputs) {
      auto it = arrays_.find(s.array.name);
      if (it == arrays_.end())
        throw Error(
            fmt::format("kernel '{}': no array '{}' bound for execution", k_.name, s.array.name));
      if (it->second.shape != s.array.shape ||
          it->second.data.size() != static_cast<size_t>(num_elements(s.array.shape)))
        throw Error(fmt::format("kernel '{}': array '{}' is {} but the kernel expects {}", k_.name,
                                s.array.name, to_string(it->second.shape),
                                to_string(s.array.shape)));
    }
    for (const BlockSpec& s : k_.outputs) {
      auto& a = arrays_[s.array.name];
      if (a.shape != s.array.shape) a = HostArray::zeros(s.array.shape, s.array.dtype);
    }
    for (size_t v = 0; v < k_.values.size(); ++v)
      if (k_.values[v].kind == ValueKind::scratch)
        v_[v].assign(num_elements(k_.values[v].shape), kNaN);

    std::vector<std::vector<int64_t>> out_idx(k_.outputs.size());
    GridIndex g(k_.grid.size(), 0);
    for (bool more = true; more;) {
      for (size_t v = 0; v < k_.values.size(); ++v) {
        const Value& val = k_.values[v];
        if (val.kind == ValueKind::input_block) load_block(k_.inputs[val.ref], g, v_[v]);
        if (val.kind == ValueKind::output_block) {
          std::vector<int64_t> idx;
          k_.outputs[val.ref].index.eval(g, idx);
          if (idx != out_idx[val.ref]) {
            if (!out_idx[val.ref].empty())
              store_block(k_.outputs[val.ref], out_idx[val.ref], v_[v]);
            out_idx[val.ref] = idx;
            v_[v].assign(num_elements(val.shape), kNaN);
          }
        }
      }
      for (const Op& op : k_.body)
        if (op.when.holds(g, k_.grid)) eval(op);
      more = false;
      for (int d = static_cast<int>(g.size()) - 1; d >= 0; --d) {
        if (++g[d] < k_.grid[d]) {
          more = true;
          break;
        }
        g[d] = 0;
      }
    }
    for (size_t v = 0; v < k_.values.size(); ++v)
      if (k_.values[v].kind == ValueKind::output_block)
        store_block(k_.outputs[k_.values[v].ref], out_idx[k_.values[v].ref], v_[v]);
  }

 private:
  static constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

  // Visits (array offset, block offset) pairs of the block at block index `idx`.
  template <typename F>
  void walk_block(const BlockSpec& s, const std::vector<int64_t>& idx, F&& f) const {
    const Shape& b = s.block_shape;
    const std::vector<int64_t> ast = strides_of(s.array.shape);
    int64_t base = 0;
    for (size_t d = 0; d < b.size(); ++d) base += idx[d] * b[d] * ast[d];
    std::vector<int64_t> i(b.size(), 0);
    const int64_t n = num_elements(b);
    int64_t off = base;
    for (int64_t flat = 0; flat < n; ++flat) {
      f(off, flat);
      for (int d = static_cast<int>(b.size()) - 1; d >= 0; --d) {
        off += ast[d];
        if (++i[d] < b[d]) break;
        off -= ast[d] * b[d];
        i[d] = 0;
      }
    }
  }

  void load_block(const BlockSpec& s, const GridIndex& g, Buffer& out) const {
    std::vector<int64_t> idx;
    s.index.eval(g, idx);
    const Buffer& src = arrays_.at(s.array.name).data;
    out.resize(num_elements(s.block_shape));
    walk_block(s, idx, [&](int64_t a, int64_t b) { out[b] = src[a]; });
  }

  void store_block(const BlockSpec& s, const std::vector<int64_t>& idx, const Buffer& in) {
    Buffer& dst = arrays_.at(s.array.name).data;
    walk_block(s, idx, [&](int64_t a, int64_t b) { dst[a] = in[b]; });
  }

  const Buffer& in(const Op& op, size_t i) const {
    const Buffer& b = v_[op.inputs.at(i)];
    if (b.empty())
      throw Error(fmt::format("kernel '{}': op '{}' reads '{}' before it is written", k_.name,
                              op.name, k_.values[op.inputs[i]].name));
    return b;
  }

  void eval(const Op& op) {
    const Value& out = k_.values[op.output];
    Buffer r;
    switch (op.kind) {
      case OpKind::dot:
        r = dot(op);
        break;
      case OpKind::elementwise:
      case OpKind::transcendental: {
        r.assign(num_elements(out.shape), 0.0f);
        const float scalar = static_cast<float>(op.scalar);
        if (op.fn == EwFn::fill) {
          std::fill(r.begin(), r.end(), scalar);
          break;
        }
        const Buffer& a = in(op, 0);
        Buffer a_b(r.size());
        broadcast_walk(out.shape, k_.values[op.inputs[0]].shape,
                       [&](int64_t o, int64_t i) { a_b[o] = a[i]; });
        if (op.inputs.size() == 1) {
          for (size_t i = 0; i < r.size(); ++i) r[i] = apply(op.fn, a_b[i], scalar);
        } else if (op.fn == EwFn::select) {
          Buffer x(r.size());
          broadcast_walk(out.shape, k_.values[op.inputs[1]].shape,
                         [&, &b = in(op, 1)](int64_t o, int64_t i) { x[o] = b[i]; });
          const Buffer& c = in(op, 2);
          broadcast_walk(out.shape, k_.values[op.inputs[2]].shape,
                         [&](int64_t o, int64_t i) { r[o] = a_b[o] != 0 ? x[o] : c[i]; });
        } else {
          const Buffer& b = in(op, 1);
          broadcast_walk(out.shape, k_.values[op.inputs[1]].shape,
                         [&](int64_t o, int64_t i) { r[o] = apply(op.fn, a_b[o], b[i]); });
        }
        break;
      }
      case OpKind::reduce: {
        const Shape& is = k_.values[op.inputs[0]].shape;
        r.assign(num_elements(out.shape), 0.0f);
        const Buffer& a = in(op, 0);
        // Accumulate in double, then round once: an f32 tree sum's error is far below bf16's.
        const bool max = op.fn == EwFn::max;
        std::vector<double> acc(r.size(), max ? -std::numeric_limits<double>::infinity() : 0.0);
        broadcast_walk(is, out.shape, [&](int64_t i, int64_t o) {
          acc[o] = max ? std::max<double>(acc[o], a[i]) : acc[o] + a[i];
        });
        for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<float>(acc[i]);
        break;
      }
      case OpKind::iota: {
        const Shape& s = out.shape;
        r.assign(num_elements(s), 0.0f);
        int64_t inner = 1;
        for (size_t d = op.axis + 1; d < s.size(); ++d) inner *= s[d];
        for (size_t i = 0; i < r.size(); ++i)
          r[i] = static_cast<float>((static_cast<int64_t>(i) / inner) % s[op.axis]);
        break;
      }
      case OpKind::mask: {
        const Shape& s = out.shape;
        const int64_t rows = s.size() >= 2 ? s[s.size() - 2] : 1, cols = s.back();
        r.assign(num_elements(s), 0.0f);
        const Buffer& a = in(op, 0);
        broadcast_walk(s, k_.values[op.inputs[0]].shape, [&](int64_t o, int64_t i) {
          const int64_t row = (o / cols) % rows, col = o % cols;
          r[o] = in_mask(op.mask, row, col, rows, op.mask_block) ? a[i]
                                                                 : static_cast<float>(op.scalar);
        });
        break;
      }
      case OpKind::cast:
      case OpKind::reshape:
        r = in(op, 0);
        break;
      case OpKind::copy: {
        r = in(op, 0);
        if (static_cast<int64_t>(r.size()) != num_elements(out.shape))
          throw Error(fmt::format("kernel '{}': copy '{}' of {} elements into {}", k_.name, op.name,
                                  r.size(), to_string(out.shape)));
        break;
      }
      case OpKind::slice: {
        const Shape& is = k_.values[op.inputs[0]].shape;
        const Buffer& a = in(op, 0);
        const int64_t outer =
            std::accumulate(is.begin(), is.begin() + op.axis, int64_t{1}, std::multiplies<>());
        const int64_t inner =
            std::accumulate(is.begin() + op.axis + 1, is.end(), int64_t{1}, std::multiplies<>());
        r.resize(num_elements(out.shape));
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(&r[o * op.size * inner], &a[(o * is[op.axis] + op.start) * inner],
                      sizeof(float) * op.size * inner);
        break;
      }
      case OpKind::concat: {
        const Shape& os = out.shape;
        const int64_t outer =
            std::accumulate(os.begin(), os.begin() + op.axis, int64_t{1}, std::multiplies<>());
        const int64_t inner =
            std::accumulate(os.begin() + op.axis + 1, os.end(), int64_t{1}, std::multiplies<>());
        r.resize(num_elements(os));
        int64_t at = 0;
        for (size_t i = 0; i < op.inputs.size(); ++i) {
          const Buffer& a = in(op, i);
          const int64_t n = k_.values[op.inputs[i]].shape[op.axis];
          for (int64_t o = 0; o < outer; ++o)
            std::memcpy(&r[(o * os[op.axis] + at) * inner], &a[o * n * inner],
                        sizeof(float) * n * inner);
          at += n;
        }
        break;
      }
    }
    round_to(r, out.dtype);
    v_[op.output] = std::move(r);
  }

  Buffer dot(const Op& op) const {
    const Value& lv = k_.values[op.inputs[0]];
    const Value& rv = k_.values[op.inputs[1]];
    const DotShape d = k_.dot_shape(op);
    auto free_dims = [](const Shape& s, const std::vector<int>& batch,
                        const std::vector<int>& contract) {
      std::vector<int> f;
      for (int a = 0; a < static_cast<int>(s.size()); ++a)
        if (std::find(batch.begin(), batch.end(), a) == batch.end() &&
            std::find(contract.begin(), contract.end(), a) == contract.end())
          f.push_back(a);
      return f;
    };
    std::vector<int> lo = op.dims.lhs_batch, ro = op.dims.rhs_batch;
    for (int a : free_dims(lv.shape, op.dims.lhs_batch, op.dims.lhs_contract)) lo.push_back(a);
    for (int a : op.dims.lhs_contract) lo.push_back(a);
    for (int a : op.dims.rhs_contract) ro.push_back(a);
    for (int a : free_dims(rv.shape, op.dims.rhs_batch, op.dims.rhs_contract)) ro.push_back(a);
    Buffer l = permute(in(op, 0), lv.shape, lo);
    Buffer r = permute(in(op, 1), rv.shape, ro);

    Buffer out(d.batch * d.m * d.n, 0.0f);
    const bool bf16_operands = lv.dtype == DType::bf16 && rv.dtype == DType::bf16;
    auto gemm = [&](const Buffer& a, const Buffer& b, float* o) {
      for (int64_t bi = 0; bi < d.batch; ++bi) {
        Eigen::Map<const RowMajor> A(a.data() + bi * d.m * d.k, d.m, d.k);
        Eigen::Map<const RowMajor> B(b.data() + bi * d.k * d.n, d.k, d.n);
        Eigen::Map<RowMajor> O(o + bi * d.m * d.n, d.m, d.n);
        O.noalias() += A * B;
      }
    };
    if (bf16_operands || op.precision == Precision::default_ ||
        op.precision == Precision::bf16x3_manual) {
      round_to(l, DType::bf16);
      round_to(r, DType::bf16);
      gemm(l, r, out.data());
    } else if (op.precision == Precision::high) {
      Buffer lh = l, rh = r;
      round_to(lh, DType::bf16);
      round_to(rh, DType::bf16);
      Buffer ll(l.size()), rl(r.size());
      for (size_t i = 0; i < l.size(); ++i) ll[i] = round_to_bf16(l[i] - lh[i]);
      for (size_t i = 0; i < r.size(); ++i) rl[i] = round_to_bf16(r[i] - rh[i]);
      gemm(lh, rh, out.data());
      gemm(lh, rl, out.data());
      gemm(ll, rh, out.data());
    } else {
      gemm(l, r, out.data());
    }
    return out;
  }

  const Kernel& k_;
  ArrayMap& arrays_;
  std::vector<Buffer> v_;
};

}  // namespace

HostArray HostArray::zeros(Shape shape, DType dtype) {
  HostArray a;
  a.data.assign(num_elements(shape), 0.0f);
  a.shape = std::move(shape);
  a.dtype = dtype;
  return a;
}

float round_to_bf16(float x) {
  if (std::isnan(x)) return x;
  uint32_t bits = std::bit_cast<uint32_t>(x);
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest, ties to even
  return std::bit_cast<float>(bits & 0xffff0000u);
}

void round_to(std::vector<float>& data, DType dtype) {
  if (dtype == DType::bf16)
    for (float& x : data) x = round_to_bf16(x);
}

void execute(const Kernel& k, ArrayMap& arrays) { KernelRun(k, arrays).run(); }

void execute(const Program& p, ArrayMap& arrays) {
  for (const ProgramItem& item : p.items) {
    if (const auto* call = std::get_if<KernelCall>(&item.what)) execute(*call->kernel, arrays);
    if (const auto* loop = std::get_if<Loop>(&item.what))
      for (int64_t t = 0; t < loop->trips; ++t)
        for (const auto& k : loop->body) execute(*k, arrays);
  }
}

}  // namespace tpusim
