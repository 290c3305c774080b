#include "sim/timing/content_hash.h"

#include <bit>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace tpusim {
namespace {

// The number of fields of an aggregate: the most initializers T{...} accepts.
struct AnyField {
  template <class T>
  operator T() const;
};
template <class T, class... Fields>
constexpr size_t field_count() {
  if constexpr (requires { T{Fields{}..., AnyField{}}; })
    return field_count<T, Fields..., AnyField>();
  else
    return sizeof...(Fields);
}

// Two independent 64-bit lanes (FNV-1a style multiply-xor, then a final avalanche each), so an
// accidental collision needs both to collide.
class Hasher {
 public:
  void word(uint64_t v) {
    hi_ = (hi_ ^ v) * 0x100000001b3ull;
    lo_ = (lo_ ^ (v + 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
    lo_ ^= lo_ >> 29;
  }
  template <class T>
  requires std::is_integral_v<T> || std::is_enum_v<T>
  void operator()(T v) { word(static_cast<uint64_t>(v)); }
  void operator()(double v) { word(std::bit_cast<uint64_t>(v)); }
  void operator()(const std::string& s) {
    word(s.size());
    uint64_t chunk = 0;
    for (size_t i = 0; i < s.size(); i += 8) {
      chunk = 0;
      std::memcpy(&chunk, s.data() + i, std::min<size_t>(8, s.size() - i));
      word(chunk);
    }
  }
  template <class T>
  void operator()(const std::vector<T>& v) {
    word(v.size());
    for (const T& x : v) (*this)(x);
  }
  void operator()(const Tensor& t);
  void operator()(const AffineExpr& e);
  void operator()(const BlockSpec& b);
  void operator()(const Value& v);
  void operator()(const When& w);
  void operator()(const DotDims& d);
  void operator()(const Op& op);

  Digest digest() const { return {avalanche(hi_), avalanche(lo_)}; }

 private:
  static uint64_t avalanche(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
  }
  uint64_t hi_ = 0xcbf29ce484222325ull, lo_ = 0x84222325cbf29ce4ull;
};

// Each count below is the struct's number of fields as the hash saw it: a new field fails here.
static_assert(field_count<Tensor>() == 4, "Tensor changed: hash the new field");
void Hasher::operator()(const Tensor& t) {
  (*this)(t.name), (*this)(t.shape), (*this)(t.dtype), (*this)(t.space);
}

static_assert(field_count<AffineExpr>() == 4, "AffineExpr changed: hash the new field");
void Hasher::operator()(const AffineExpr& e) {
  (*this)(e.offset), (*this)(e.coeff), (*this)(e.min_axis), (*this)(e.max_axis);
}

// IndexMap is a class whose only state is its affine expressions.
static_assert(sizeof(IndexMap) == sizeof(std::vector<AffineExpr>), "IndexMap changed");
static_assert(field_count<BlockSpec>() == 4, "BlockSpec changed: hash the new field");
void Hasher::operator()(const BlockSpec& b) {
  (*this)(b.array), (*this)(b.block_shape), (*this)(b.index.dims()), (*this)(b.buffer_count);
}

static_assert(field_count<Value>() == 5, "Value changed: hash the new field");
void Hasher::operator()(const Value& v) {
  (*this)(v.name), (*this)(v.shape), (*this)(v.dtype), (*this)(v.kind), (*this)(v.ref);
}

static_assert(field_count<When>() == 3, "When changed: hash the new field");
void Hasher::operator()(const When& w) { (*this)(w.kind), (*this)(w.axis), (*this)(w.other); }

static_assert(field_count<DotDims>() == 4, "DotDims changed: hash the new field");
void Hasher::operator()(const DotDims& d) {
  (*this)(d.lhs_contract), (*this)(d.rhs_contract), (*this)(d.lhs_batch), (*this)(d.rhs_batch);
}

static_assert(field_count<Op>() == 16, "Op changed: hash the new field");
void Hasher::operator()(const Op& op) {
  (*this)(op.kind), (*this)(op.name), (*this)(op.inputs), (*this)(op.output), (*this)(op.when);
  (*this)(op.dims), (*this)(op.precision), (*this)(op.fn), (*this)(op.scalar);
  (*this)(op.reduce_axes), (*this)(op.mask), (*this)(op.mask_block), (*this)(op.axis);
  (*this)(op.start), (*this)(op.size), (*this)(op.latency);
}

}  // namespace

static_assert(field_count<Kernel>() == 12, "Kernel changed: hash the new field");
Digest content_hash(const Kernel& k) {
  Hasher h;
  h(k.name), h(k.origin), h(k.grid), h(k.semantics), h(k.inputs), h(k.outputs), h(k.scratch);
  h(k.values), h(k.body), h(k.vmem_limit_bytes), h(k.carried_group), h(k.vliw_floor_cycles);
  return h.digest();
}

static_assert(field_count<ChipSpec>() == 44, "ChipSpec changed: hash the new field");
Digest content_hash(const ChipSpec& c) {
  Hasher h;
  h(c.name), h(c.clock_hz), h(c.tensorcores), h(c.megacore_split), h(c.mxus_per_core);
  h(c.mxu_dim), h(c.mxu_fill_drain_per_dim), h(c.mxu_fill_drain_cycles), h(c.peak_bf16_flops);
  h(c.peak_int8_ops), h(c.vpu_simple_per_cycle), h(c.vpu_divide_per_cycle);
  h(c.vpu_transcendental_per_cycle), h(c.vpu_cross_lane_per_cycle), h(c.vector_rate_scale);
  h(c.vpu_latency_cycles), h(c.xla_row_solve_step_cycles), h(c.xla_row_solve_step_scale),
      h(c.vpu_cast_ops_per_vreg);
  h(c.vmem_bytes), h(c.scoped_vmem_bytes), h(c.hbm_bytes), h(c.hbm_bytes_per_s);
  h(c.hbm_efficiency), h(c.dma_queues), h(c.dma_latency_cycles), h(c.grid_step_overhead_cycles);
  h(c.while_loop_overhead_cycles), h(c.host_dispatch_s), h(c.ici_dims), h(c.ici_wraparound_chips);
  h(c.ici_link_bytes_per_s), h(c.ici_hop_latency_s), h(c.ici_efficiency),
      h(c.routed_weight_gathers), h(c.async_collective_setup_cycles_per_device);
  h(c.dcn_bytes_per_s_per_chip), h(c.dcn_slice_latency_s), h(c.host_link_bytes_per_s),
      h(c.pinned_host_bytes), h(c.chips_per_host), h(c.max_slice_chips);
  // provenance and value_text: the chip file's documentation, which no simulation reads.
  return h.digest();
}

}  // namespace tpusim
