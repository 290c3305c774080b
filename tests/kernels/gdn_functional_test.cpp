// The GDN schedules executed by the functional engine, against the independent references of
// gdn_reference.h. Tolerances are relative to the largest magnitude of the compared tensor:
//  - f32 kernels with HIGHEST dots: 1e-5 (PR #4348's own tolerance; f32 rounding over a few
//    hundred-term sums stays near 1e-6);
//  - gradients: 2e-3 (the PR's), against central differences of the double reference;
//  - bf16 inputs with the TPU's one-pass bf16 dots: 3e-2 (bf16 keeps 8 bits, 2^-9 = 2e-3 relative
//    per rounding; a chunk chains three rounded products plus the bf16 output rounding, and the
//    errors of ~C + Dk terms add up at random, a few times 2^-9);
//  - the inversion ladder with bf16x3 products: 1e-4 (each product keeps ~16 bits; 2 log2 C
//    dependent levels).
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <random>

#include "kernels/gdn/invert.h"
#include "kernels/gdn/scan.h"
#include "kernels/gdn/xla.h"
#include "sim/functional/interpreter.h"
#include "tests/kernels/gdn_reference.h"

namespace tpusim {
namespace {

using kernels::gdn::GdnShape;
using kernels::gdn::ScanOptions;
using testing::Vec;

struct Rng {
  std::mt19937 gen{1234};
  Vec normal(size_t n, double sd) {
    std::normal_distribution<double> d(0, sd);
    Vec v(n);
    for (double& x : v) x = d(gen);
    return v;
  }
  Vec uniform(size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    Vec v(n);
    for (double& x : v) x = d(gen);
    return v;
  }
};

// Stores `v` as a kernel array, rounding to the array's dtype; `v` is rounded alike so that the
// reference sees exactly the kernel's inputs.
HostArray bind(Vec& v, Shape shape, DType t) {
  HostArray a{shape, t, std::vector<float>(v.begin(), v.end())};
  round_to(a.data, t);
  for (size_t i = 0; i < v.size(); ++i) v[i] = a.data[i];
  return a;
}
Vec values(const HostArray& a) { return Vec(a.data.begin(), a.data.end()); }

double max_abs(const Vec& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}
double rel_error(const Vec& got, const Vec& want) {
  double e = 0;
  for (size_t i = 0; i < got.size(); ++i) e = std::max(e, std::abs(got[i] - want[i]));
  return e / max_abs(want);
}

struct ScanCase {
  GdnShape s;
  testing::ScanData d;
  Vec d_o, dh_final;  // cotangents of o and h_final
};

ScanCase make_case(GdnShape s, Rng& rng) {
  ScanCase c{s, {}, {}, {}};
  const size_t tok = s.batch * s.seq * s.heads;
  c.d.w = rng.normal(tok * s.dk, 0.1);
  c.d.u = rng.normal(tok * s.dv, 0.5);
  c.d.q = rng.normal(tok * s.dk, 1 / std::sqrt(double(s.dk)));
  c.d.k = rng.normal(tok * s.dk, 1 / std::sqrt(double(s.dk)));
  const Vec gate = rng.uniform(tok, -0.1, -0.01);  // per-token log decay, cumulated per chunk
  c.d.g.assign(tok, 0);
  for (size_t i = 0; i < tok; i += s.chunk) {
    double acc = 0;
    for (int64_t j = 0; j < s.chunk; ++j) c.d.g[i + j] = acc += gate[i + j];
  }
  c.d.h0 = rng.normal(s.batch * s.heads * s.dk * s.dv, 0.3);  // a non-zero initial state
  c.d_o = rng.normal(tok * s.dv, 1.0);
  c.dh_final = rng.normal(s.batch * s.heads * s.dk * s.dv, 1.0);  // a final-state cotangent
  return c;
}

ArrayMap forward_arrays(ScanCase& c) {
  const GdnShape& s = c.s;
  const int64_t B = s.batch, N = s.chunks(), H = s.heads, C = s.chunk;
  ArrayMap a;
  a["w"] = bind(c.d.w, {B, N, H, C, s.dk}, s.compute);
  a["u"] = bind(c.d.u, {B, N, H, C, s.dv}, s.compute);
  a["q"] = bind(c.d.q, {B, N, H, C, s.dk}, s.compute);
  a["k"] = bind(c.d.k, {B, N, H, C, s.dk}, s.compute);
  a["g"] = bind(c.d.g, {B, N, H, C, 1}, DType::f32);
  a["h0"] = bind(c.d.h0, {B, H, s.dk, s.dv}, DType::f32);
  return a;
}

class ScanForward : public ::testing::TestWithParam<int64_t> {};

TEST_P(ScanForward, MatchesChunkReferenceWithInitialState) {
  Rng rng;
  GdnShape s{.batch = 2,
             .seq = 4 * 16,
             .heads = 6,
             .dk = 32,
             .dv = 24,
             .chunk = 16,
             .compute = DType::f32};
  ScanCase c = make_case(s, rng);
  ArrayMap a = forward_arrays(c);
  execute(*kernels::gdn::scan_forward(s, {GetParam(), Precision::highest}), a);
  const testing::ScanResult want = testing::chunk_scan(s, c.d);
  EXPECT_LT(rel_error(values(a["o"]), want.o), 1e-5);
  EXPECT_LT(rel_error(values(a["h_final"]), want.h_final), 1e-5);
  EXPECT_LT(rel_error(values(a["h_saved"]), want.h_saved), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(HeadTiles, ScanForward, ::testing::Values(1, 2, 3, 6));

TEST(ScanForward, PullRequestShapeF32) {
  // The PR's own test shape: B=2, N=4, H=3 (so th=1), C=128, Dk=Dv=128, f32 compute.
  Rng rng;
  GdnShape s{.batch = 2,
             .seq = 4 * 128,
             .heads = 3,
             .dk = 128,
             .dv = 128,
             .chunk = 128,
             .compute = DType::f32};
  ScanCase c = make_case(s, rng);
  ArrayMap a = forward_arrays(c);
  execute(*kernels::gdn::scan_forward(s, {1, Precision::highest}), a);
  const testing::ScanResult want = testing::chunk_scan(s, c.d);
  EXPECT_LT(rel_error(values(a["o"]), want.o), 1e-5);
  EXPECT_LT(rel_error(values(a["h_final"]), want.h_final), 1e-5);
}

TEST(ScanForward, Bf16InputsWithOnePassDots) {
  Rng rng;
  GdnShape s{.batch = 1,
             .seq = 4 * 64,
             .heads = 4,
             .dk = 64,
             .dv = 64,
             .chunk = 64,
             .compute = DType::bf16};
  ScanCase c = make_case(s, rng);
  ArrayMap a = forward_arrays(c);
  execute(*kernels::gdn::scan_forward(s, {4, Precision::default_}), a);
  const testing::ScanResult want =
      testing::chunk_scan(s, c.d);  // same (bf16-rounded) inputs, in double
  const double e = rel_error(values(a["o"]), want.o);
  std::cout << "bf16 scan forward: max error of o relative to max |o| = " << e << "\n";
  EXPECT_LT(e, 3e-2);
  EXPECT_GT(e, 1e-4);  // the bf16 rounding is really there
  EXPECT_LT(rel_error(values(a["h_final"]), want.h_final), 3e-2);
}

double loss(const GdnShape& s, const testing::ScanData& d, const Vec& d_o, const Vec& dh_final) {
  const testing::ScanResult r = testing::chunk_scan(s, d);
  double l = 0;
  for (size_t i = 0; i < r.o.size(); ++i) l += r.o[i] * d_o[i];
  for (size_t i = 0; i < r.h_final.size(); ++i) l += r.h_final[i] * dh_final[i];
  return l;
}

void check_gradients(GdnShape s, int64_t th, Precision p, double tol) {
  Rng rng;
  ScanCase c = make_case(s, rng);
  ArrayMap a = forward_arrays(c);
  execute(*kernels::gdn::scan_forward(s, {th, p}), a);
  const int64_t B = s.batch, N = s.chunks(), H = s.heads, C = s.chunk;
  a["do"] = bind(c.d_o, {B, N, H, C, s.dv}, s.compute);
  a["dh_final"] = bind(c.dh_final, {B, H, s.dk, s.dv}, DType::f32);
  execute(*kernels::gdn::scan_backward(s, {th, p}), a);

  struct Grad {
    const char* name;
    Vec testing::ScanData::*input;
    const char* output;
  };
  for (const Grad& gr :
       {Grad{"w", &testing::ScanData::w, "dw"}, Grad{"u", &testing::ScanData::u, "du"},
        Grad{"q", &testing::ScanData::q, "dq"}, Grad{"k", &testing::ScanData::k, "dk"},
        Grad{"g", &testing::ScanData::g, "dg"}, Grad{"h0", &testing::ScanData::h0, "dh0"}}) {
    const Vec grad = values(a.at(gr.output));
    const double scale = max_abs(grad);
    ASSERT_GT(scale, 0) << gr.name;
    Vec& x = c.d.*gr.input;
    std::vector<size_t> picks;
    for (int i = 0; i < 12; ++i)
      picks.push_back(std::uniform_int_distribution<size_t>(0, x.size() - 1)(rng.gen));
    picks.push_back(std::max_element(grad.begin(), grad.end(),
                                     [](double l, double r) { return std::abs(l) < std::abs(r); }) -
                    grad.begin());
    for (size_t i : picks) {
      const double saved = x[i], h = 1e-4;
      x[i] = saved + h;
      const double up = loss(s, c.d, c.d_o, c.dh_final);
      x[i] = saved - h;
      const double down = loss(s, c.d, c.d_o, c.dh_final);
      x[i] = saved;
      const double fd = (up - down) / (2 * h);
      EXPECT_NEAR(grad[i], fd, tol * scale) << "d" << gr.name << "[" << i << "]";
    }
  }
}

TEST(ScanBackward, EveryGradientMatchesFiniteDifferences) {
  check_gradients({.batch = 2,
                   .seq = 4 * 16,
                   .heads = 3,
                   .dk = 32,
                   .dv = 24,
                   .chunk = 16,
                   .compute = DType::f32},
                  1, Precision::highest, 2e-3);
}

TEST(ScanBackward, HeadTiledGradientsMatchFiniteDifferences) {
  check_gradients({.batch = 1,
                   .seq = 3 * 16,
                   .heads = 4,
                   .dk = 16,
                   .dv = 32,
                   .chunk = 16,
                   .compute = DType::f32},
                  4, Precision::highest, 2e-3);
}

TEST(ScanBackward, Bf16GradientsMatchFiniteDifferencesLoosely) {
  check_gradients({.batch = 1,
                   .seq = 4 * 32,
                   .heads = 2,
                   .dk = 32,
                   .dv = 32,
                   .chunk = 32,
                   .compute = DType::bf16},
                  2, Precision::default_, 5e-2);
}

TEST(ChunkedPipeline, XlaStagesLadderAndScanReproduceThePerTokenRecurrence) {
  // Per-token q, k, v, beta and log gate through the whole chunked forward as schedules: the XLA
  // gates + S stage, the inversion ladder, the XLA WY stage and the scan kernel, against the
  // per-token recurrence.
  Rng rng;
  GdnShape s{.batch = 1,
             .seq = 4 * 32,
             .heads = 2,
             .dk = 32,
             .dv = 16,
             .chunk = 32,
             .compute = DType::f32};
  const int64_t T = s.seq, H = s.heads, C = s.chunk, N = s.chunks();
  testing::TokenData t;
  t.q = rng.normal(T * H * s.dk, 1 / std::sqrt(double(s.dk)));
  t.k = rng.normal(T * H * s.dk, 1 / std::sqrt(double(s.dk)));
  t.v = rng.normal(T * H * s.dv, 1.0);
  t.beta = rng.uniform(T * H, 0.1, 0.9);
  t.gate = rng.uniform(T * H, -0.2, -0.01);
  const Vec want = testing::recurrent(s, t);

  // Token-major [1, T, H, D] -> chunk-major [1, N, H, C, D].
  const testing::ChunkIndex ix{s};
  auto chunked = [&](const Vec& x, int64_t d) {
    HostArray a = HostArray::zeros({1, N, H, C, d}, DType::f32);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < C; ++i)
          for (int64_t c = 0; c < d; ++c)
            a.data[ix.at(0, n, h, i, c, C, d)] =
                static_cast<float>(x[((n * C + i) * H + h) * d + c]);
    return a;
  };
  ArrayMap a;
  a["q"] = chunked(t.q, s.dk);
  a["k"] = chunked(t.k, s.dk);
  a["v"] = chunked(t.v, s.dv);
  a["beta"] = chunked(t.beta, 1);
  a["g tokens f32"] = chunked(t.gate, 1);
  a["h0"] = HostArray::zeros({1, H, s.dk, s.dv}, DType::f32);
  Program p;
  p.add_kernel(kernels::gdn::xla_gates_s(s));
  p.add_kernel(kernels::gdn::invert_ladder(s, 4));
  p.add_kernel(kernels::gdn::xla_wy(s));
  p.add_kernel(kernels::gdn::scan_forward(s, {2, Precision::highest}));
  execute(p, a);
  Vec got(want.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < C; ++i)
        for (int64_t v = 0; v < s.dv; ++v)
          got[((n * C + i) * H + h) * s.dv + v] = a["o"].data[ix.at(0, n, h, i, v, C, s.dv)];
  EXPECT_LT(rel_error(got, want), 1e-4);
}

}  // namespace
}  // namespace tpusim

namespace tpusim {
namespace {

// Context parallelism (PR #4968): one chunk's affine map (A_i, B_i) applied to any state equals
// the chunk's state update h' = e^{g_last} h + kd^T (u - w h), kd = k e^{g_last - g}; composing
// two chunks' maps equals applying them in turn. The kernels run the fold's loop body once.
TEST(ContextParallelFold, ChunkMapAndComposeMatchTheStateRecurrence) {
  const kernels::gdn::GdnShape s{
      .batch = 1, .seq = 16, .heads = 2, .dk = 8, .dv = 8, .chunk = 8, .compute = DType::f32};
  const Program fold = kernels::gdn::xla_cp_compose_local(s, false);
  const auto& body = std::get<Loop>(fold.items.at(0).what).body;
  ASSERT_EQ(body.size(), 2u);
  std::mt19937 gen(5);
  std::normal_distribution<double> nd(0, 0.5);
  const int64_t H = s.heads, C = s.chunk, D = s.dk;
  auto random = [&](Shape shape, double scale = 1) {
    HostArray a = HostArray::zeros(shape, DType::f32);
    for (float& x : a.data) x = static_cast<float>(nd(gen) * scale);
    return a;
  };
  auto head = [&](const HostArray& a, int64_t h, int64_t rows, int64_t cols) {
    Eigen::MatrixXd m(rows, cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) m(r, c) = a.data[(h * rows + r) * cols + c];
    return m;
  };
  // Two chunks' maps from the chunk-map kernel.
  std::vector<ArrayMap> chunk(2);
  for (ArrayMap& a : chunk) {
    a["w[n]"] = random({1, H, C, D});
    a["u[n]"] = random({1, H, C, D});
    a["k[n]"] = random({1, H, C, D});
    HostArray g = HostArray::zeros({1, H, C, 1}, DType::f32);  // cumulated decays, decreasing
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < C; ++t) g.data[h * C + t] = -0.1f * static_cast<float>(t + 1 + h);
    a["g[n]"] = g;
    execute(*body[0], a);
  }
  const HostArray h0 = random({1, H, D, D});
  double err_map = 0, err_compose = 0;
  ArrayMap c;  // (A_r, B_r) o (A_l, B_l): chunk 1 after chunk 0
  c["A_r"] = chunk[1]["A_i"], c["B_r"] = chunk[1]["B_i"];
  c["A_l"] = chunk[0]["A_i"], c["B_l"] = chunk[0]["B_i"];
  execute(*body[1], c);
  for (int64_t h = 0; h < H; ++h) {
    Eigen::MatrixXd state = head(h0, h, D, D);
    for (ArrayMap& a : chunk) {
      const Eigen::MatrixXd w = head(a["w[n]"], h, C, D), u = head(a["u[n]"], h, C, D),
                            k = head(a["k[n]"], h, C, D), g = head(a["g[n]"], h, C, 1);
      const double g_last = g(C - 1, 0);
      Eigen::MatrixXd kd = k;
      for (int64_t t = 0; t < C; ++t) kd.row(t) *= std::exp(g_last - g(t, 0));
      const Eigen::MatrixXd next = std::exp(g_last) * state + kd.transpose() * (u - w * state);
      const Eigen::MatrixXd mapped = head(a["A_i"], h, D, D) * state + head(a["B_i"], h, D, D);
      err_map = std::max(err_map, (mapped - next).cwiseAbs().maxCoeff());
      state = next;
    }
    const Eigen::MatrixXd both = head(c["A"], h, D, D) * head(h0, h, D, D) + head(c["B"], h, D, D);
    err_compose = std::max(err_compose, (both - state).cwiseAbs().maxCoeff());
  }
  EXPECT_LT(err_map, 1e-4);  // f32 data, HIGHEST dots
  EXPECT_LT(err_compose, 1e-4);
}

}  // namespace
}  // namespace tpusim
