#include "kernels/generic.h"

#include <fmt/format.h>

#include "sim/error.h"
#include "sim/ir/validate.h"

namespace tpusim::kernels {
namespace {

constexpr auto kPar = DimSemantics::parallel;
constexpr auto kArb = DimSemantics::arbitrary;

std::shared_ptr<const Kernel> matmul_nest(std::string name, Origin origin, const MatmulShape& s) {
  for (auto [dim, block, label] : {std::tuple{s.m, s.bm, "m"}, {s.k, s.bk, "k"}, {s.n, s.bn, "n"}})
    if (block < 1 || dim < 1 || dim % block != 0)
      throw Error(
          fmt::format("matmul: block b{} = {} must divide {} = {}", label, block, label, dim));
  KernelBuilder b(std::move(name), origin);
  b.grid({s.m / s.bm, s.n / s.bn, s.k / s.bk}, {kPar, kPar, kArb});
  const ValueId x = b.input({"x", {s.m, s.k}, s.dtype}, {s.bm, s.bk}, IndexMap({axis(0), axis(2)}));
  const ValueId y = b.input({"y", {s.k, s.n}, s.dtype}, {s.bk, s.bn}, IndexMap({axis(2), axis(1)}));
  const ValueId z =
      b.output({"z", {s.m, s.n}, s.dtype}, {s.bm, s.bn}, IndexMap({axis(0), axis(1)}));
  const ValueId acc = b.scratch("acc", {s.bm, s.bn}, DType::f32);
  const When first_k{When::first, 2}, last_k{When::last, 2};
  b.fill("zero acc", acc, 0.0, first_k);
  const ValueId p = b.dot("x @ y", x, y, DType::f32);
  b.elementwise("acc += x @ y", EwFn::add, {acc, p}, acc);
  b.copy("z = acc", acc, z, last_k);
  return b.build();
}

}  // namespace

std::shared_ptr<const Kernel> pallas_matmul(const MatmulShape& s) {
  return matmul_nest(fmt::format("matmul {}x{}x{} ({},{},{})", s.m, s.k, s.n, s.bm, s.bk, s.bn),
                     Origin::pallas, s);
}

std::shared_ptr<const Kernel> xla_dot(const ChipSpec& chip, int64_t m, int64_t k, int64_t n,
                                      DType dtype) {
  auto candidates = [](int64_t dim) {
    std::vector<int64_t> c;
    for (int64_t t = 128; t <= 2048; t *= 2)
      if (t <= dim && dim % t == 0) c.push_back(t);
    if (c.empty()) c.push_back(dim);
    return c;
  };
  MatmulShape best;
  double best_traffic = 0;
  for (int64_t bm : candidates(m))
    for (int64_t bn : candidates(n))
      for (int64_t bk : candidates(k)) {
        MatmulShape s{m, k, n, bm, bk, bn, dtype};
        const auto kernel = matmul_nest("xla dot", Origin::xla, s);
        if (vmem_usage(*kernel).total_bytes > chip.scoped_vmem_bytes) continue;
        const double traffic =
            static_cast<double>(m) * k * (n / bn) + static_cast<double>(k) * n * (m / bm);
        const bool better =
            best.m == 0 || traffic < best_traffic || (traffic == best_traffic && bk > best.bk);
        if (better) {
          best = s;
          best_traffic = traffic;
        }
      }
  if (best.m == 0)
    throw Error(fmt::format("xla dot {}x{}x{}: no tiling fits the {} scoped VMEM limit", m, k, n,
                            format_bytes(chip.scoped_vmem_bytes)));
  return matmul_nest(fmt::format("xla dot {}x{}x{} ({},{},{})", m, k, n, best.bm, best.bk, best.bn),
                     Origin::xla, best);
}

std::shared_ptr<const Kernel> elementwise_scale(int64_t rows, int64_t cols, int64_t block_rows,
                                                DType dtype) {
  if (block_rows < 1 || rows % block_rows != 0)
    throw Error(fmt::format("elementwise: block rows {} must divide rows {}", block_rows, rows));
  KernelBuilder b(fmt::format("scale {}x{} ({} rows)", rows, cols, block_rows));
  b.grid({rows / block_rows}, {kPar});
  const ValueId x =
      b.input({"x", {rows, cols}, dtype}, {block_rows, cols}, IndexMap({axis(0), constant(0)}));
  const ValueId y =
      b.output({"y", {rows, cols}, dtype}, {block_rows, cols}, IndexMap({axis(0), constant(0)}));
  b.scale("y = x * 2", x, 2.0, y);
  return b.build();
}

}  // namespace tpusim::kernels
