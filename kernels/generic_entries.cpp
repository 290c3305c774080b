// Catalog entries of the generic kernels: the Pallas guide's matmul, XLA's dot, an elementwise
// kernel.
#include <fmt/format.h>

#include "kernels/catalog_entries.h"
#include "kernels/generic.h"
#include "sim/error.h"

namespace tpusim::kernels {
namespace {

// Array dimensions the knobs accept: large enough for any layer of a real model, small enough
// that FLOP and byte counts stay far from int64 overflow.
constexpr int64_t kMaxDim = int64_t{1} << 20;

Knob required_dim(const std::string& name, int64_t default_value, const std::string& help) {
  Knob k = Knob::integer(name, 1, kMaxDim, default_value, help);
  k.required = true;
  return k;
}

Program one_kernel(std::shared_ptr<const Kernel> k) {
  Program p;
  p.name = k->name;
  p.add_kernel(std::move(k));
  return p;
}

}  // namespace

DType dtype_of(const std::string& s) {
  if (const auto t = dtype_named(s)) return *t;
  throw Error(fmt::format("unknown dtype '{}' (known: bf16, f32, int8)", s));
}

CatalogEntry matmul_entry() {
  return {
      "matmul",
      "blocked Pallas matmul (the Pallas TPU guide's kernel)",
      {required_dim("m", 4096, "rows of x and z"), required_dim("k", 4096, "contracting dimension"),
       required_dim("n", 4096, "columns of y and z"), required_dim("bm", 512, "block rows"),
       required_dim("bk", 1024, "block contracting size"),
       required_dim("bn", 1024, "block columns"),
       Knob::choice("dtype", {"bf16", "f32"}, "bf16", "dtype", "input and output dtype")},
      [](const ChipSpec&, const KnobValues& v) {
        return one_kernel(
            pallas_matmul({v.integer("m"), v.integer("k"), v.integer("n"), v.integer("bm"),
                           v.integer("bk"), v.integer("bn"), dtype_of(v.choice("dtype"))}));
      }};
}

CatalogEntry xla_dot_entry() {
  return {"xla-dot",
          "an XLA dot with XLA's own tiling",
          {required_dim("m", 4096, "rows"), required_dim("k", 4096, "contracting dimension"),
           required_dim("n", 4096, "columns"),
           Knob::choice("dtype", {"bf16", "f32", "int8"}, "bf16", "dtype", "operand dtype")},
          [](const ChipSpec& chip, const KnobValues& v) {
            return one_kernel(xla_dot(chip, v.integer("m"), v.integer("k"), v.integer("n"),
                                      dtype_of(v.choice("dtype"))));
          }};
}

CatalogEntry elementwise_entry() {
  return {
      "elementwise",
      "y = 2x, HBM-bound",
      {required_dim("rows", 32768, "array rows"), required_dim("cols", 2048, "array columns"),
       required_dim("block-rows", 512, "rows per block"),
       Knob::choice("dtype", {"bf16", "f32"}, "bf16", "dtype", "dtype")},
      [](const ChipSpec&, const KnobValues& v) {
        return one_kernel(elementwise_scale(v.integer("rows"), v.integer("cols"),
                                            v.integer("block-rows"), dtype_of(v.choice("dtype"))));
      }};
}

}  // namespace tpusim::kernels
