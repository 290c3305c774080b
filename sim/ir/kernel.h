// The kernel IR: a Pallas call (or an XLA fusion expressed the same way) is a grid with dimension
// semantics, BlockSpecs that move array blocks between HBM and VMEM, VMEM scratch, and the ops of
// one grid step. The timing engine plays it; the functional engine executes the same ops.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/ir/dtype.h"
#include "sim/ir/index_map.h"
#include "sim/ir/shape.h"

namespace tpusim {

enum class MemSpace : uint8_t { hbm, vmem, smem };

// An array as a whole, living in one memory space (kernel operands live in HBM).
struct Tensor {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  MemSpace space = MemSpace::hbm;
};

enum class DimSemantics : uint8_t { parallel, arbitrary };

// How one kernel operand is tiled: block `block_shape` of `array`, chosen per grid step by `index`.
struct BlockSpec {
  Tensor array;
  Shape block_shape;
  IndexMap index;
  int buffer_count = 2;  // Pallas default: double buffering
};

// Who wrote the kernel: a Pallas kernel or XLA's own emitter (an XLA fusion, dot or loop body).
enum class Origin : uint8_t { pallas, xla };

// ---- body values and ops -------------------------------------------------------------------

enum class ValueKind : uint8_t { input_block, output_block, scratch, temp };
using ValueId = int32_t;

struct Value {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  ValueKind kind = ValueKind::temp;
  int ref = -1;  // index into inputs / outputs / scratch for the non-temp kinds
};

enum class OpKind : uint8_t {
  dot,
  elementwise,
  transcendental,
  reduce,
  mask,
  cast,
  copy,
  slice,
  concat,
  reshape,  // layout: views where aligned, copies otherwise
  iota      // each element's index along `axis` (masks are built from iotas and comparisons)
};

// Elementwise functions (the functional engine needs the exact function, timing only its class).
// Binary functions with one input take `scalar` as the second operand. Inputs broadcast
// numpy-style (size-1 dims stretch). Comparisons give 1 or 0; select(c, a, b) takes three inputs
// and gives a where c is not 0, else b; idiv and rem are integer division and remainder,
// truncating towards zero, and sign is -1, 0 or 1 (index arithmetic on iotas: JAX's floor
// division is built from them).
enum class EwFn : uint8_t {
  add,
  sub,
  mul,
  div,
  neg,
  max,
  min,
  fill,
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  logical_and,
  logical_or,
  select,
  idiv,
  rem,
  sign,  // VPU arithmetic
  exp,
  log,
  tanh,
  logistic,
  rsqrt,
  softplus  // transcendental (EUP)
};

// Masks over the last two dims (row i, column j); elements outside the mask become `scalar`.
enum class MaskKind : uint8_t {
  lower,          // i >= j
  strict_lower,   // i > j
  sibling_block,  // i/b != j/b and i/2b == j/2b: the off-diagonal b x b blocks of each 2b x 2b
  last_row,       // i == rows - 1
  diagonal,       // i == j
  all,            // every element: a broadcast of the input to the mask's shape
};

// MXU precision as XLA/Pallas request it; the number of bf16 passes follows JAX-prec.
enum class Precision : uint8_t { default_, high, highest, bf16x3_manual };

struct DotDims {
  std::vector<int> lhs_contract{1}, rhs_contract{0};
  std::vector<int> lhs_batch, rhs_batch;
  static DotDims matmul() { return {}; }
  // dot_general with batch dim 0 on both sides, contracting lhs dim 2 with rhs dim 1.
  static DotDims batched() { return {{2}, {1}, {0}, {0}}; }
};

// Which grid steps an op runs on: always; when grid axis `axis` is at its first / last index; or,
// for causal attention, comparing axis `axis` (query block) with axis `other` (key block).
struct When {
  enum Kind : uint8_t {
    always,
    first,
    last,
    not_first,
    not_last,
    at_or_below,  // g[axis] >= g[other]: the block is at least partly unmasked
    on_diagonal,  // g[axis] == g[other]: the block needs the causal mask
    first_both,   // g[axis] and g[other] both at their first index
    last_both,    // g[axis] and g[other] both at their last index
  } kind = always;
  int axis = -1;
  int other = -1;

  bool holds(const GridIndex& g, const std::vector<int64_t>& grid) const;
};

// Where an op's result latency comes from: the unit that computes it, or (for the reduction of
// each row step of XLA's triangular inversion, whose algorithm is not public) the chip's
// calibrated xla_row_solve_step_cycles (docs/kernels/gdn.md).
enum class Latency : uint8_t { unit, xla_row_solve_step };

struct Op {
  OpKind kind = OpKind::elementwise;
  std::string name;
  std::vector<ValueId> inputs;
  ValueId output = -1;
  When when;
  // dot
  DotDims dims;
  Precision precision = Precision::default_;
  // elementwise / transcendental
  EwFn fn = EwFn::add;
  double scalar = 0;  // fill value, or a scalar operand
  // reduce (sum, or max when fn is EwFn::max; reduced dims are kept with size 1)
  std::vector<int> reduce_axes;
  // mask (for lower / strict_lower masks, mask_block shifts the column index: j + mask_block)
  MaskKind mask = MaskKind::lower;
  int64_t mask_block = 0;
  // slice / concat
  int axis = 0;
  int64_t start = 0, size = 0;
  Latency latency = Latency::unit;
};

// Problem sizes of a dot_general after resolving dimension numbers.
struct DotShape {
  int64_t batch = 1, m = 1, k = 1, n = 1;
  int64_t flops() const { return 2 * batch * m * k * n; }
};

struct Kernel {
  std::string name;
  Origin origin = Origin::pallas;
  std::vector<int64_t> grid;
  std::vector<DimSemantics> semantics;
  std::vector<BlockSpec> inputs, outputs;
  std::vector<Tensor> scratch;  // VMEM scratch, alive for the whole grid
  std::vector<Value> values;
  std::vector<Op> body;
  int64_t vmem_limit_bytes = 0;  // 0: the chip's scoped default (CompilerParams(vmem_limit_bytes))
  // The devices of the asynchronous collective whose ring steps this kernel carries (an XLA
  // fusion the async collective fusion runs the collective beside; 0: none), summed over the
  // carrying fusions the kernel stands for: before its work it runs a scalar loop over them (the
  // chip's async_collective_setup_cycles_per_device each).
  int64_t carried_group = 0;
  // The length of the compiled program's own VLIW schedule for this kernel, in cycles (libtpu's
  // final bundles, each loop body times its trips, or its busiest MXU's pushes if longer; 0:
  // unknown): a floor on its time, which the units modelled here may not reach (docs/
  // compiler_import.md, "The VLIW schedule as a floor").
  int64_t vliw_floor_cycles = 0;

  int64_t grid_steps() const;  // saturates at INT64_MAX
  DotShape dot_shape(const Op& op) const;
  // Shape of an elementwise result: the inputs broadcast numpy-style.
  Shape broadcast_shape(const std::vector<ValueId>& inputs) const;
  // bf16 MXU passes of a dot: bf16 operands always take one pass; f32 operands take 1 (DEFAULT,
  // operands truncated to bf16), 3 (HIGH) or 6 (HIGHEST).
  int mxu_passes(const Op& op) const;
};

// Builds kernels readably: operands and values are declared, body ops appended in program order.
class KernelBuilder {
 public:
  explicit KernelBuilder(std::string name, Origin origin = Origin::pallas);

  KernelBuilder& grid(std::vector<int64_t> grid, std::vector<DimSemantics> semantics);
  ValueId input(Tensor array, Shape block, IndexMap index, int buffers = 2);
  ValueId output(Tensor array, Shape block, IndexMap index, int buffers = 2);
  ValueId scratch(std::string name, Shape shape, DType dtype);
  ValueId temp(std::string name, Shape shape, DType dtype);

  ValueId dot(std::string name, ValueId lhs, ValueId rhs, DType out,
              DotDims dims = DotDims::matmul(), Precision p = Precision::default_, When when = {});
  // The same, writing into an existing buffer (a scratch or an output block).
  ValueId dot_into(std::string name, ValueId lhs, ValueId rhs, ValueId out, DotDims dims,
                   Precision p = Precision::default_, When when = {});
  // out = fn(inputs...) with `out` an existing value (scratch or output block) or a new temp.
  ValueId elementwise(std::string name, EwFn fn, std::vector<ValueId> inputs, ValueId out,
                      When when = {});
  // out = in * factor (a VPU multiply by a scalar); `out` < 0 makes a new temp.
  ValueId scale(std::string name, ValueId in, double factor, ValueId out = -1, When when = {});
  // out = fn(in, scalar) for a binary VPU function with a scalar right operand.
  ValueId with_scalar(std::string name, EwFn fn, ValueId in, double scalar, ValueId out = -1,
                      When when = {});
  ValueId cast(std::string name, ValueId in, DType to, When when = {});
  ValueId copy(std::string name, ValueId from, ValueId to, When when = {});
  ValueId fill(std::string name, ValueId to, double value, When when = {});
  ValueId reduce(std::string name, ValueId in, std::vector<int> axes, When when = {});
  ValueId reduce_max(std::string name, ValueId in, std::vector<int> axes, When when = {});
  // where(mask, in, fill); `shape` broadcasts `in` to a larger shape (empty: in's shape). `block`
  // is the sibling block size, or for lower masks a column offset (j + block compared with i).
  ValueId mask(std::string name, ValueId in, MaskKind kind, double fill = 0, int64_t block = 0,
               Shape shape = {}, When when = {}, ValueId out = -1);
  // `in` materialized at a larger shape (size-1 dims stretched): one VPU store pass.
  ValueId broadcast(std::string name, ValueId in, Shape shape, When when = {});
  ValueId slice(std::string name, ValueId in, int axis, int64_t start, int64_t size,
                When when = {});
  ValueId concat(std::string name, std::vector<ValueId> inputs, int axis, When when = {});
  ValueId reshape(std::string name, ValueId in, Shape shape, When when = {});
  ValueId iota(std::string name, Shape shape, DType dtype, int axis, When when = {});

  const Value& value(ValueId v) const { return k_->values.at(v); }
  std::shared_ptr<const Kernel> build();
  Kernel& kernel() { return *k_; }

 private:
  ValueId add_value(Value v);
  ValueId push(Op op, ValueId out);
  std::shared_ptr<Kernel> k_;
};

}  // namespace tpusim
