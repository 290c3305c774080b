#include "kernels/generic.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "sim/error.h"
#include "sim/ir/validate.h"

namespace tpusim::kernels {
namespace {

constexpr auto kPar = DimSemantics::parallel;
constexpr auto kArb = DimSemantics::arbitrary;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

std::shared_ptr<const Kernel> matmul_nest(std::string name, Origin origin, const MatmulShape& s) {
  for (auto [dim, block, label] : {std::tuple{s.m, s.bm, "m"}, {s.k, s.bk, "k"}, {s.n, s.bn, "n"}})
    if (block < 1 || dim < 1 || dim % block != 0)
      throw Error(
          fmt::format("matmul: block b{} = {} must divide {} = {}", label, block, label, dim));
  KernelBuilder b(std::move(name), origin);
  b.grid({s.m / s.bm, s.n / s.bn, s.k / s.bk}, {kPar, kPar, kArb});
  const ValueId x = b.input({"x", {s.m, s.k}, s.dtype}, {s.bm, s.bk}, IndexMap({axis(0), axis(2)}));
  const ValueId y = b.input({"y", {s.k, s.n}, s.dtype}, {s.bk, s.bn}, IndexMap({axis(2), axis(1)}));
  // An int8 product (AQT) is rescaled to bf16 on the way out.
  const DType out = s.dtype == DType::s8 ? DType::bf16 : s.dtype;
  const ValueId z = b.output({"z", {s.m, s.n}, out}, {s.bm, s.bn}, IndexMap({axis(0), axis(1)}));
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

// The largest tile edge the XLA dot tiling considers.
constexpr int64_t kMaxXlaDotTile = 2048;

namespace {

std::shared_ptr<const Kernel> choose_xla_dot(const ChipSpec& chip, int64_t m, int64_t k, int64_t n,
                                             DType dtype) {
  // Tiles need not divide the operands: XLA pads them to a tile multiple (the last tile is
  // partial), so an awkward dimension such as a 128256-entry vocabulary still gets wide tiles.
  // Tiles are whole lane widths (the (8, 128) layout), up to 2048. On v6e, whose MXU is 256
  // wide, XLA may prefer multiples of 256: no public fact says, so the candidates stay the same.
  auto candidates = [](int64_t dim) {
    std::vector<int64_t> c;
    for (int64_t t = kLanes; t <= kMaxXlaDotTile && t <= round_up(dim, kLanes); t *= 2)
      c.push_back(t);
    if (c.empty()) c.push_back(dim);
    return c;
  };
  const int64_t elem = byte_size(dtype);
  MatmulShape best;
  double best_time = 0, best_traffic = 0;
  for (int64_t bm : candidates(m))
    for (int64_t bn : candidates(n))
      for (int64_t bk : candidates(k)) {
        const int64_t pm = round_up(m, bm), pn = round_up(n, bn), pk = round_up(k, bk);
        MatmulShape s{pm, pk, pn, bm, bk, bn, dtype};
        const auto kernel = matmul_nest("xla dot", Origin::xla, s);
        if (vmem_usage(*kernel).total_bytes > chip.scoped_vmem_bytes) continue;
        // A roofline estimate, as XLA's tiling cost model makes: padded MXU work against the
        // operand traffic (x is re-read per column tile, y per row tile).
        const double traffic = elem * (static_cast<double>(pm) * pk * (pn / bn) +
                                       static_cast<double>(pk) * pn * (pm / bm));
        const double time = std::max(2.0 * pm * pk * pn / chip.peak_bf16_flops,
                                     traffic / chip.hbm_effective_bytes_per_s());
        const bool better = best.m == 0 || time < best_time ||
                            (time == best_time &&
                             (traffic < best_traffic || (traffic == best_traffic && bk > best.bk)));
        if (better) {
          best = s;
          best_time = time;
          best_traffic = traffic;
        }
      }
  if (best.m == 0)
    throw Error(fmt::format("xla dot {}x{}x{}: no tiling fits the {} scoped VMEM limit", m, k, n,
                            format_bytes(chip.scoped_vmem_bytes)));
  return matmul_nest(fmt::format("xla dot {}x{}x{} ({},{},{})", m, k, n, best.bm, best.bk, best.bn),
                     Origin::xla, best);
}

}  // namespace

std::shared_ptr<const Kernel> xla_dot(const ChipSpec& chip, int64_t m, int64_t k, int64_t n,
                                      DType dtype) {
  // The choice builds a kernel per candidate tiling, and a training step asks for the same few
  // dots many times (and a sweep for the same ones at every point): remember the answers, by
  // every input the choice reads.
  using Key = std::tuple<int64_t, int64_t, int64_t, DType, int64_t, double, double>;
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const Kernel>> chosen;
  const Key key{m,
                k,
                n,
                dtype,
                chip.scoped_vmem_bytes,
                chip.peak_bf16_flops,
                chip.hbm_effective_bytes_per_s()};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = chosen.find(key); it != chosen.end()) return it->second;
  }
  auto kernel = choose_xla_dot(chip, m, k, n, dtype);
  std::lock_guard<std::mutex> lock(mutex);
  if (chosen.size() > 4096) chosen.clear();
  return chosen.emplace(key, std::move(kernel)).first->second;
}

int64_t megablox_rows(int64_t rows) {
  const int64_t tile = std::min<int64_t>(512, round_up(rows, 8));
  return round_up(rows, tile);
}

std::shared_ptr<const Kernel> grouped_matmul(int64_t m, int64_t k, int64_t n) {
  // The contraction and output tiles: the largest power of two from `want` down to 128 that
  // divides the dim (a TPU block's lane dims are multiples of 128), else the whole dim.
  auto tile = [](int64_t dim, int64_t want) {
    while (want > 128 && dim % want != 0) want /= 2;
    return dim % want == 0 ? want : dim;
  };
  const int64_t bm = std::min<int64_t>(512, round_up(m, 8));
  const MatmulShape s{
      .m = round_up(m, bm), .k = k, .n = n, .bm = bm, .bk = tile(k, 1024), .bn = tile(n, 1024)};
  return matmul_nest(fmt::format("megablox {}x{}x{} ({},{},{})", s.m, s.k, s.n, s.bm, s.bk, s.bn),
                     Origin::pallas, s);
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
