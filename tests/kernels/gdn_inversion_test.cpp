// The inversion ladder and its VJP, executed functionally, against a forward-substitution solve in
// double; and the two numerical reasons for its design: it never forms powers of S (a power series
// overflows f32 once |S| > 1), and its products are bf16x3 (a plain bf16-rounding dot breaks
// (I + S) A = I by orders of magnitude more).
#include <gtest/gtest.h>

#include <iostream>
#include <random>

#include "kernels/gdn/invert.h"
#include "sim/functional/interpreter.h"
#include "tests/kernels/gdn_reference.h"

namespace tpusim {
namespace {

using kernels::gdn::GdnShape;
using testing::Mat;

enum class Kind { random, ones, gaussian };

// S for every (b, n, h) tile: strictly lower, by kind.
std::vector<Mat> make_s(const GdnShape& s, Kind kind, std::mt19937& gen) {
  std::normal_distribution<double> nd(0, 1);
  std::vector<Mat> tiles;
  for (int64_t t = 0; t < s.batch * s.chunks() * s.heads; ++t) {
    Mat m = Mat::Zero(s.chunk, s.chunk);
    for (int64_t i = 0; i < s.chunk; ++i)
      for (int64_t j = 0; j < i; ++j)
        m(i, j) = kind == Kind::ones ? 1.0 : kind == Kind::gaussian ? nd(gen) : 0.1 * nd(gen);
    tiles.push_back(m);
  }
  return tiles;
}

HostArray pack(const GdnShape& s, const std::vector<Mat>& tiles) {
  HostArray a = HostArray::zeros({s.batch, s.chunks(), s.heads, s.chunk, s.chunk}, DType::f32);
  const int64_t cc = s.chunk * s.chunk;
  for (size_t t = 0; t < tiles.size(); ++t)
    for (int64_t i = 0; i < s.chunk; ++i)
      for (int64_t j = 0; j < s.chunk; ++j)
        a.data[t * cc + i * s.chunk + j] = static_cast<float>(tiles[t](i, j));
  return a;
}

std::vector<Mat> unpack(const GdnShape& s, const HostArray& a) {
  std::vector<Mat> tiles;
  const int64_t cc = s.chunk * s.chunk;
  for (size_t t = 0; t < a.data.size() / cc; ++t) {
    Mat m(s.chunk, s.chunk);
    for (int64_t i = 0; i < s.chunk; ++i)
      for (int64_t j = 0; j < s.chunk; ++j) m(i, j) = a.data[t * cc + i * s.chunk + j];
    tiles.push_back(m);
  }
  return tiles;
}

std::vector<Mat> run_ladder(const GdnShape& s, const std::vector<Mat>& S,
                            kernels::gdn::LadderProducts p) {
  ArrayMap arrays;
  arrays["S"] = pack(s, S);
  execute(*kernels::gdn::invert_ladder(s, kernels::gdn::default_tile(s.chunks()), p), arrays);
  return unpack(s, arrays["A"]);
}

// max |(I + S) A - I| over all tiles, relative to max |A|.
double residual(const std::vector<Mat>& S, const std::vector<Mat>& A) {
  double r = 0, scale = 0;
  for (size_t t = 0; t < S.size(); ++t) {
    const Mat I = Mat::Identity(S[t].rows(), S[t].cols());
    r = std::max(r, ((I + S[t]) * A[t] - I).cwiseAbs().maxCoeff());
    scale = std::max(scale, A[t].cwiseAbs().maxCoeff());
  }
  return r / scale;
}

// MaxText PR #4577's doubling inverse (XLA, default precision) on the same tiles.
std::vector<Mat> run_doubling(const GdnShape& s, const std::vector<Mat>& S) {
  ArrayMap arrays;
  arrays["S"] = pack(s, S);
  execute(kernels::gdn::doubling_inverse(s), arrays);
  return unpack(s, arrays["A"]);
}

double rel_error(const std::vector<Mat>& got, const std::vector<Mat>& want) {
  double e = 0, scale = 0;
  for (size_t t = 0; t < got.size(); ++t) {
    e = std::max(e, (got[t] - want[t]).cwiseAbs().maxCoeff());
    scale = std::max(scale, want[t].cwiseAbs().maxCoeff());
  }
  return e / scale;
}

const GdnShape kShape{.batch = 1,
                      .seq = 8 * 64,
                      .heads = 2,
                      .dk = 128,
                      .dv = 128,
                      .chunk = 64,
                      .compute = DType::f32};

// The VJP checks' shape: small enough for central differences of a solve in double per entry.
const GdnShape kVjpShape{.batch = 1,
                         .seq = 2 * 16,
                         .heads = 1,
                         .dk = 128,
                         .dv = 128,
                         .chunk = 16,
                         .compute = DType::f32};

// A random cotangent dA per tile.
std::vector<Mat> cotangents(const GdnShape& s, std::mt19937& gen) {
  std::normal_distribution<double> nd(0, 1);
  std::vector<Mat> R;
  for (int64_t t = 0; t < s.batch * s.chunks() * s.heads; ++t)
    R.push_back(Mat::NullaryExpr(s.chunk, s.chunk, [&] { return nd(gen); }));
  return R;
}

// dS of sum((I + S)^-1 * R) against central differences at every third row and second column of
// each tile's strictly lower part, within `tolerance` of dS's largest magnitude; on and above the
// diagonal dS must be 0 when `strictly_lower` (S has no entries there to reach).
void expect_vjp_matches_differences(std::vector<Mat> S, const std::vector<Mat>& R,
                                    const std::vector<Mat>& dS, double tolerance,
                                    bool strictly_lower) {
  double scale = 0;
  for (const Mat& m : dS) scale = std::max(scale, m.cwiseAbs().maxCoeff());
  for (size_t t = 0; t < S.size(); ++t) {
    auto loss = [&] { return (testing::solve_unit_lower(S[t]).array() * R[t].array()).sum(); };
    for (int64_t i = 0; i < S[t].rows(); i += 3)
      for (int64_t j = 0; j < S[t].cols(); j += 2) {
        if (j >= i) {
          if (strictly_lower) {
            EXPECT_EQ(dS[t](i, j), 0.0) << "dS must be strictly lower";
          }
          continue;
        }
        const double saved = S[t](i, j), h = 1e-5 * std::max(1.0, std::abs(saved));
        S[t](i, j) = saved + h;
        const double up = loss();
        S[t](i, j) = saved - h;
        const double down = loss();
        S[t](i, j) = saved;
        EXPECT_NEAR(dS[t](i, j), (up - down) / (2 * h), tolerance * scale)
            << "tile " << t << " (" << i << "," << j << ")";
      }
  }
}

class Inversion : public ::testing::TestWithParam<Kind> {};

TEST_P(Inversion, LadderMatchesTriangularSolve) {
  std::mt19937 gen(7);
  const std::vector<Mat> S = make_s(kShape, GetParam(), gen);
  std::vector<Mat> want;
  for (const Mat& m : S) want.push_back(testing::solve_unit_lower(m));
  const auto got = run_ladder(kShape, S, kernels::gdn::LadderProducts::bf16x3);
  // The unnormalised Gaussian inverse grows to ~1e10 and is ill-conditioned: the solve in double
  // itself is only as good as the condition number allows, so it is held to its scale at 1e-3.
  const double tol = GetParam() == Kind::gaussian ? 1e-3 : 1e-4;
  EXPECT_LT(rel_error(got, want), tol);
}

TEST_P(Inversion, VjpMatchesFiniteDifferences) {
  std::mt19937 gen(11);
  const std::vector<Mat> S = make_s(kVjpShape, GetParam(), gen);
  const std::vector<Mat> R = cotangents(kVjpShape, gen);
  ArrayMap arrays;
  arrays["S"] = pack(kVjpShape, S);
  execute(*kernels::gdn::invert_ladder(kVjpShape, kernels::gdn::default_tile(kVjpShape.chunks())),
          arrays);
  arrays["dA"] = pack(kVjpShape, R);
  execute(kernels::gdn::invert_vjp(kVjpShape), arrays);
  expect_vjp_matches_differences(S, R, unpack(kVjpShape, arrays["dS"]), 2e-3, true);
}

INSTANTIATE_TEST_SUITE_P(Kinds, Inversion,
                         ::testing::Values(Kind::random, Kind::ones, Kind::gaussian),
                         [](const auto& info) {
                           return std::string(info.param == Kind::random ? "random"
                                              : info.param == Kind::ones ? "all_ones"
                                                                         : "unnormalised_gaussian");
                         });

TEST(Inversion, DoublingMatchesTriangularSolveToBf16Accuracy) {
  // Default precision rounds every product's operands to bf16 (2^-9 relative); the log2(64) = 6
  // levels chain those roundings, so the doubling is held to 5e-3 where the bf16x3 ladder meets
  // 1e-4. Its identity residual sits between the ladder's and a bf16-rounding ladder's.
  std::mt19937 gen(7);
  const std::vector<Mat> S = make_s(kShape, Kind::random, gen);
  std::vector<Mat> want;
  for (const Mat& m : S) want.push_back(testing::solve_unit_lower(m));
  const auto got = run_doubling(kShape, S);
  const double err = rel_error(got, want);
  const double r3 = residual(S, run_ladder(kShape, S, kernels::gdn::LadderProducts::bf16x3));
  const double rd = residual(S, got);
  std::cout << "doubling: error " << err << ", residual " << rd << " (bf16x3 ladder " << r3
            << ")\n";
  EXPECT_LT(err, 5e-3);
  EXPECT_GT(err, 1e-5);  // it really rounds: an f32-exact doubling would be near 1e-7
  EXPECT_GT(rd, 10 * r3);
}

TEST(Inversion, DoublingVjpMatchesFiniteDifferences) {
  // dS = -(A^T dA A^T) unmasked: only its strictly lower part reaches S (S is strictly lower).
  // bf16 operands in both products: 2^-8 relative, summed over C terms.
  std::mt19937 gen(11);
  const std::vector<Mat> S = make_s(kVjpShape, Kind::random, gen);
  const std::vector<Mat> R = cotangents(kVjpShape, gen);
  ArrayMap arrays;
  arrays["S"] = pack(kVjpShape, S);
  execute(kernels::gdn::doubling_inverse(kVjpShape), arrays);
  arrays["dA"] = pack(kVjpShape, R);
  execute(kernels::gdn::doubling_vjp(kVjpShape), arrays);
  expect_vjp_matches_differences(S, R, unpack(kVjpShape, arrays["dS"]), 1e-2, false);
}

TEST(Inversion, PowerSeriesOverflowsWhereTheLadderStaysAtTheInverseScale) {
  // S = 2 x (ones below the diagonal), C = 128. (I + S)^-1 = sum_k (-S)^k is a finite sum (S is
  // nilpotent), but (S^k)_ij = 2^k binom(i-j-1, k-1) reaches 2^63 binom(126, 63) ~ 1e56: in f32 the
  // series overflows. The inverse itself is tiny: A_ij = -2 (-1)^(i-j-1) below the diagonal.
  const GdnShape s{.batch = 1,
                   .seq = 128,
                   .heads = 1,
                   .dk = 128,
                   .dv = 128,
                   .chunk = 128,
                   .compute = DType::f32};
  std::vector<Mat> S{Mat::Zero(128, 128)};
  for (int i = 0; i < 128; ++i)
    for (int j = 0; j < i; ++j) S[0](i, j) = 2.0;
  const Eigen::MatrixXf Sf = S[0].cast<float>();
  Eigen::MatrixXf term = Eigen::MatrixXf::Identity(128, 128), series = term;
  for (int p = 1; p < 128; ++p) {
    term = -(term * Sf);
    series += term;
  }
  const auto ladder = run_ladder(s, S, kernels::gdn::LadderProducts::bf16x3);
  const Mat want = testing::solve_unit_lower(S[0]);
  std::cout << "power series finite: " << series.allFinite() << "; inverse max |A| "
            << want.cwiseAbs().maxCoeff() << ", ladder max |A| " << ladder[0].cwiseAbs().maxCoeff()
            << ", ladder error " << (ladder[0] - want).cwiseAbs().maxCoeff() << "\n";
  EXPECT_FALSE(series.allFinite());
  EXPECT_TRUE(ladder[0].allFinite());
  // The doubling squares S: its E reach S^64 (entries ~1e56) and overflow the same way.
  const auto doubling = run_doubling(s, S);
  EXPECT_FALSE(doubling[0].allFinite());
  EXPECT_DOUBLE_EQ(want.cwiseAbs().maxCoeff(), 2.0);
  EXPECT_LT((ladder[0] - want).cwiseAbs().maxCoeff(), 1e-4 * 2.0);
}

TEST(Inversion, Bf16x3KeepsTheIdentityThatPlainBf16DotsBreak) {
  std::mt19937 gen(5);
  const std::vector<Mat> S = make_s(kShape, Kind::random, gen);
  const double r3 = residual(S, run_ladder(kShape, S, kernels::gdn::LadderProducts::bf16x3));
  const double r1 = residual(S, run_ladder(kShape, S, kernels::gdn::LadderProducts::bf16_rounded));
  std::cout << "max |(I+S)A - I| / max |A|: bf16x3 " << r3 << ", bf16-rounding dot " << r1 << "\n";
  EXPECT_LT(r3, 1e-4);
  EXPECT_GT(r1, 30 * r3);
}

}  // namespace
}  // namespace tpusim
