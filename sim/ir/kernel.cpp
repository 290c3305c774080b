#include "sim/ir/kernel.h"

#include <fmt/format.h>

#include <limits>

#include "sim/error.h"

namespace tpusim {

bool When::holds(const GridIndex& g, const std::vector<int64_t>& grid) const {
  switch (kind) {
    case always:
      return true;
    case first:
      return g[axis] == 0;
    case last:
      return g[axis] == grid[axis] - 1;
    case not_first:
      return g[axis] != 0;
    case not_last:
      return g[axis] != grid[axis] - 1;
    case at_or_below:
      return g[axis] >= g[other];
    case on_diagonal:
      return g[axis] == g[other];
    case first_both:
      return g[axis] == 0 && g[other] == 0;
    case last_both:
      return g[axis] == grid[axis] - 1 && g[other] == grid[other] - 1;
  }
  return true;
}

int64_t Kernel::grid_steps() const {
  int64_t n = 1;
  for (int64_t g : grid)
    if (__builtin_mul_overflow(n, g, &n)) return std::numeric_limits<int64_t>::max();
  return n;
}

DotShape Kernel::dot_shape(const Op& op) const {
  const Shape& l = values.at(op.inputs.at(0)).shape;
  const Shape& r = values.at(op.inputs.at(1)).shape;
  auto contains = [](const std::vector<int>& v, int x) {
    for (int y : v)
      if (y == x) return true;
    return false;
  };
  DotShape d;
  for (int a : op.dims.lhs_batch) d.batch *= l.at(a);
  for (int a : op.dims.lhs_contract) d.k *= l.at(a);
  for (int a = 0; a < static_cast<int>(l.size()); ++a)
    if (!contains(op.dims.lhs_batch, a) && !contains(op.dims.lhs_contract, a)) d.m *= l[a];
  int64_t rk = 1;
  for (int a : op.dims.rhs_contract) rk *= r.at(a);
  for (int a = 0; a < static_cast<int>(r.size()); ++a)
    if (!contains(op.dims.rhs_batch, a) && !contains(op.dims.rhs_contract, a)) d.n *= r[a];
  if (rk != d.k)
    throw Error(
        fmt::format("kernel '{}': dot '{}' contracts {} with {} elements", name, op.name, d.k, rk));
  return d;
}

Shape Kernel::broadcast_shape(const std::vector<ValueId>& inputs) const {
  Shape out;
  for (ValueId v : inputs)
    if (!broadcast_into(out, values.at(v).shape))
      throw Error(fmt::format("kernel '{}': shapes do not broadcast: {} with {}", name,
                              to_string(out), to_string(values.at(v).shape)));
  return out;
}

int Kernel::mxu_passes(const Op& op) const {
  const bool bf16_operands =
      values.at(op.inputs[0]).dtype == DType::bf16 && values.at(op.inputs[1]).dtype == DType::bf16;
  if (bf16_operands) return 1;
  switch (op.precision) {
    case Precision::default_:
      return 1;
    case Precision::high:
      return 3;
    case Precision::highest:
      return 6;
    case Precision::bf16x3_manual:
      return 1;  // the schedule spells out its three dots
  }
  return 1;
}

KernelBuilder::KernelBuilder(std::string name, Origin origin) : k_(std::make_shared<Kernel>()) {
  k_->name = std::move(name);
  k_->origin = origin;
}

KernelBuilder& KernelBuilder::grid(std::vector<int64_t> grid, std::vector<DimSemantics> semantics) {
  if (grid.size() != semantics.size())
    throw Error(fmt::format("kernel '{}': grid has {} dims but {} dimension semantics", k_->name,
                            grid.size(), semantics.size()));
  k_->grid = std::move(grid);
  k_->semantics = std::move(semantics);
  return *this;
}

ValueId KernelBuilder::add_value(Value v) {
  k_->values.push_back(std::move(v));
  return static_cast<ValueId>(k_->values.size() - 1);
}

ValueId KernelBuilder::input(Tensor array, Shape block, IndexMap index, int buffers) {
  Value v{array.name, block, array.dtype, ValueKind::input_block,
          static_cast<int>(k_->inputs.size())};
  k_->inputs.push_back({std::move(array), std::move(block), std::move(index), buffers});
  return add_value(std::move(v));
}

ValueId KernelBuilder::output(Tensor array, Shape block, IndexMap index, int buffers) {
  Value v{array.name, block, array.dtype, ValueKind::output_block,
          static_cast<int>(k_->outputs.size())};
  k_->outputs.push_back({std::move(array), std::move(block), std::move(index), buffers});
  return add_value(std::move(v));
}

ValueId KernelBuilder::scratch(std::string name, Shape shape, DType dtype) {
  k_->scratch.push_back({name, shape, dtype, MemSpace::vmem});
  return add_value({std::move(name), std::move(shape), dtype, ValueKind::scratch,
                    static_cast<int>(k_->scratch.size() - 1)});
}

ValueId KernelBuilder::temp(std::string name, Shape shape, DType dtype) {
  return add_value({std::move(name), std::move(shape), dtype, ValueKind::temp, -1});
}

ValueId KernelBuilder::push(Op op, ValueId out) {
  op.output = out;
  k_->body.push_back(std::move(op));
  return out;
}

ValueId KernelBuilder::dot(std::string name, ValueId lhs, ValueId rhs, DType out, DotDims dims,
                           Precision p, When when) {
  Op op;
  op.kind = OpKind::dot;
  op.name = name;
  op.inputs = {lhs, rhs};
  op.dims = dims;
  op.precision = p;
  op.when = when;
  const DotShape d = k_->dot_shape(op);
  Shape s;
  if (d.batch > 1 || !dims.lhs_batch.empty()) s.push_back(d.batch);
  s.push_back(d.m);
  s.push_back(d.n);
  return push(std::move(op), temp(std::move(name), std::move(s), out));
}

ValueId KernelBuilder::dot_into(std::string name, ValueId lhs, ValueId rhs, ValueId out,
                                DotDims dims, Precision p, When when) {
  Op op;
  op.kind = OpKind::dot;
  op.name = std::move(name);
  op.inputs = {lhs, rhs};
  op.dims = dims;
  op.precision = p;
  op.when = when;
  const DotShape d = k_->dot_shape(op);
  if (num_elements(value(out).shape) != d.batch * d.m * d.n)
    throw Error(fmt::format("kernel '{}': dot '{}' of {}x{}x{} into {}", k_->name, op.name, d.batch,
                            d.m, d.n, to_string(value(out).shape)));
  return push(std::move(op), out);
}

ValueId KernelBuilder::elementwise(std::string name, EwFn fn, std::vector<ValueId> inputs,
                                   ValueId out, When when) {
  Op op;
  op.kind = fn >= EwFn::exp ? OpKind::transcendental : OpKind::elementwise;
  op.name = name;
  op.fn = fn;
  op.inputs = std::move(inputs);
  op.when = when;
  if (out < 0) {
    // A select takes its operands' type (not the predicate's); a comparison gives a predicate,
    // held in 32-bit lanes.
    const bool select = fn == EwFn::select, predicate = fn >= EwFn::eq && fn <= EwFn::logical_or;
    if (select && op.inputs.size() != 3)
      throw Error(fmt::format("kernel '{}': select '{}' takes 3 operands", k_->name, name));
    // The others are unary or binary (a binary one's second operand may be the op's scalar): a
    // third operand would be neither computed nor charged.
    if (!select && op.inputs.size() > 2)
      throw Error(fmt::format("kernel '{}': '{}' takes at most 2 operands, not {}", k_->name, name,
                              op.inputs.size()));
    DType t = value(op.inputs.at(select ? 1 : 0)).dtype;
    for (size_t i = select ? 1 : 0; i < op.inputs.size(); ++i)
      if (value(op.inputs[i]).dtype == DType::f32) t = DType::f32;  // the VPU computes in f32
    out = temp(name, k_->broadcast_shape(op.inputs), predicate ? DType::s32 : t);
  }
  return push(std::move(op), out);
}

ValueId KernelBuilder::scale(std::string name, ValueId in, double factor, ValueId out, When when) {
  return with_scalar(std::move(name), EwFn::mul, in, factor, out, when);
}

ValueId KernelBuilder::with_scalar(std::string name, EwFn fn, ValueId in, double scalar,
                                   ValueId out, When when) {
  elementwise(std::move(name), fn, {in}, out, when);
  k_->body.back().scalar = scalar;
  return k_->body.back().output;
}

ValueId KernelBuilder::cast(std::string name, ValueId in, DType to, When when) {
  Op op;
  op.kind = OpKind::cast;
  op.name = name;
  op.inputs = {in};
  op.when = when;
  const Shape s = value(in).shape;
  return push(std::move(op), temp(std::move(name), s, to));
}

ValueId KernelBuilder::copy(std::string name, ValueId from, ValueId to, When when) {
  Op op;
  op.kind = OpKind::copy;
  op.name = std::move(name);
  op.inputs = {from};
  op.when = when;
  return push(std::move(op), to);
}

ValueId KernelBuilder::fill(std::string name, ValueId to, double v, When when) {
  Op op;
  op.kind = OpKind::elementwise;
  op.fn = EwFn::fill;
  op.scalar = v;
  op.name = std::move(name);
  op.when = when;
  return push(std::move(op), to);
}

ValueId KernelBuilder::reduce(std::string name, ValueId in, std::vector<int> axes, When when) {
  Op op;
  op.kind = OpKind::reduce;
  op.name = name;
  op.inputs = {in};
  op.reduce_axes = axes;
  op.when = when;
  Shape s = value(in).shape;
  for (int a : axes) s.at(a) = 1;
  return push(std::move(op), temp(std::move(name), std::move(s), value(in).dtype));
}

ValueId KernelBuilder::reduce_max(std::string name, ValueId in, std::vector<int> axes, When when) {
  const ValueId v = reduce(std::move(name), in, std::move(axes), when);
  k_->body.back().fn = EwFn::max;
  return v;
}

ValueId KernelBuilder::mask(std::string name, ValueId in, MaskKind kind, double fill, int64_t block,
                            Shape shape, When when, ValueId out) {
  Op op;
  op.kind = OpKind::mask;
  op.name = name;
  op.inputs = {in};
  op.mask = kind;
  op.scalar = fill;
  op.mask_block = block;
  op.when = when;
  const Value& v = value(in);
  if (shape.empty()) shape = v.shape;
  const DType t = v.dtype;
  Shape check = shape;
  if (!broadcast_into(check, v.shape) || check != shape)
    throw Error(fmt::format("kernel '{}': mask '{}' cannot broadcast {} to {}", k_->name, op.name,
                            to_string(v.shape), to_string(shape)));
  if (out < 0) out = temp(std::move(name), std::move(shape), t);
  return push(std::move(op), out);
}

ValueId KernelBuilder::broadcast(std::string name, ValueId in, Shape shape, When when) {
  return mask(std::move(name), in, MaskKind::all, 0, 0, std::move(shape), when);
}

ValueId KernelBuilder::slice(std::string name, ValueId in, int axis, int64_t start, int64_t size,
                             When when) {
  const Value& v = value(in);
  if (axis < 0 || axis >= static_cast<int>(v.shape.size()) || start < 0 || size < 1 ||
      start + size > v.shape[axis])
    throw Error(fmt::format("kernel '{}': slice '{}' [{}, {}) on axis {} of {}", k_->name, name,
                            start, start + size, axis, to_string(v.shape)));
  Op op;
  op.kind = OpKind::slice;
  op.name = name;
  op.inputs = {in};
  op.axis = axis;
  op.start = start;
  op.size = size;
  op.when = when;
  Shape s = v.shape;
  s[axis] = size;
  const DType t = v.dtype;
  return push(std::move(op), temp(std::move(name), std::move(s), t));
}

ValueId KernelBuilder::concat(std::string name, std::vector<ValueId> inputs, int axis, When when) {
  Shape s = value(inputs.at(0)).shape;
  DType t = value(inputs[0]).dtype;
  s.at(axis) = 0;
  for (ValueId v : inputs) {
    Shape other = value(v).shape;
    other.at(axis) = 0;
    if (other != s)
      throw Error(fmt::format("kernel '{}': concat '{}' of {} and {}", k_->name, name,
                              to_string(value(inputs[0]).shape), to_string(value(v).shape)));
    if (value(v).dtype == DType::f32) t = DType::f32;
  }
  for (ValueId v : inputs) s[axis] += value(v).shape[axis];
  Op op;
  op.kind = OpKind::concat;
  op.name = name;
  op.inputs = std::move(inputs);
  op.axis = axis;
  op.when = when;
  return push(std::move(op), temp(std::move(name), std::move(s), t));
}

ValueId KernelBuilder::reshape(std::string name, ValueId in, Shape shape, When when) {
  const Value& v = value(in);
  if (num_elements(shape) != num_elements(v.shape))
    throw Error(fmt::format("kernel '{}': reshape '{}' from {} to {}", k_->name, name,
                            to_string(v.shape), to_string(shape)));
  Op op;
  op.kind = OpKind::reshape;
  op.name = name;
  op.inputs = {in};
  op.when = when;
  const DType t = v.dtype;
  return push(std::move(op), temp(std::move(name), std::move(shape), t));
}

ValueId KernelBuilder::iota(std::string name, Shape shape, DType dtype, int axis, When when) {
  if (axis < 0 || axis >= static_cast<int>(shape.size()))
    throw Error(fmt::format("kernel '{}': iota '{}' along axis {} of {}", k_->name, name, axis,
                            to_string(shape)));
  Op op;
  op.kind = OpKind::iota;
  op.name = name;
  op.axis = axis;
  op.when = when;
  return push(std::move(op), temp(std::move(name), std::move(shape), dtype));
}

std::shared_ptr<const Kernel> KernelBuilder::build() { return k_; }

}  // namespace tpusim
