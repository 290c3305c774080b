// Flash attention schedules: the forward and both backward kernels executed functionally against
// naive causal attention in double (also with values narrower than the keys), and causal block
// skipping in the timing engine.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <random>

#include "kernels/transformer.h"
#include "models/chip_loader.h"
#include "sim/functional/interpreter.h"
#include "sim/timing/engine.h"

namespace tpusim {
namespace {

using Mat = Eigen::MatrixXd;
const kernels::AttentionShape kSmall{.batch = 1,
                                     .seq = 64,
                                     .q_heads = 4,
                                     .kv_heads = 2,
                                     .head_dim = 16,
                                     .block = 16,
                                     .block_compute = 8,
                                     .causal = true,
                                     .dtype = DType::f32};

// Runs the three kernels on random data and compares them with naive attention in double.
void expect_matches_naive_attention(const kernels::AttentionShape& s) {
  const int64_t G = s.q_heads / s.kv_heads, S = s.seq, Sk = s.kv_len(), D = s.head_dim,
                Dv = s.v_dim();
  std::mt19937 gen(9);
  std::normal_distribution<double> nd(0, 1);
  auto random = [&](Shape shape) {
    HostArray a = HostArray::zeros(shape, DType::f32);
    for (float& x : a.data) x = static_cast<float>(nd(gen) * 0.5);
    return a;
  };
  ArrayMap a;
  a["q"] = random({1, s.kv_heads, G, S, D});
  a["k"] = random({1, s.kv_heads, Sk, D});
  a["v"] = random({1, s.kv_heads, Sk, Dv});
  a["do"] = random({1, s.kv_heads, G, S, Dv});
  execute(*kernels::attention_forward(s), a);
  // di = rowsum(o * do), computed by XLA in MaxText.
  HostArray di = HostArray::zeros({1, s.kv_heads, G, S, 1}, DType::f32);
  for (int64_t r = 0; r < s.kv_heads * G * S; ++r)
    for (int64_t c = 0; c < Dv; ++c)
      di.data[r] += a["o"].data[r * Dv + c] * a["do"].data[r * Dv + c];
  a["di"] = di;
  execute(*kernels::attention_backward_dkv(s), a);
  execute(*kernels::attention_backward_dq(s), a);

  double err_o = 0, err_dq = 0, err_dk = 0, err_dv = 0, scale = 0;
  auto get = [&](const HostArray& x, int64_t off, int64_t rows, int64_t cols) {
    Mat m(rows, cols);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < cols; ++c) m(i, c) = x.data[off + i * cols + c];
    return m;
  };
  for (int64_t h = 0; h < s.kv_heads; ++h) {
    const Mat K = get(a["k"], h * Sk * D, Sk, D), V = get(a["v"], h * Sk * Dv, Sk, Dv);
    Mat dK = Mat::Zero(Sk, D), dV = Mat::Zero(Sk, Dv);
    for (int64_t g = 0; g < G; ++g) {
      const int64_t off = (h * G + g) * S * D, off_v = (h * G + g) * S * Dv;
      const Mat Q = get(a["q"], off, S, D), dO = get(a["do"], off_v, S, Dv);
      Mat P = Q * K.transpose();
      for (int64_t i = 0; i < S; ++i) {
        if (s.causal)
          for (int64_t j = i + 1; j < Sk; ++j) P(i, j) = -1e300;
        P.row(i) = (P.row(i).array() - P.row(i).maxCoeff()).exp();
        P.row(i) /= P.row(i).sum();
      }
      const Mat O = P * V;
      const Mat dP = dO * V.transpose();
      Mat dS =
          P.array() * (dP.colwise() - (O.array() * dO.array()).rowwise().sum().matrix()).array();
      err_o = std::max(err_o, (get(a["o"], off_v, S, Dv) - O).cwiseAbs().maxCoeff());
      err_dq = std::max(err_dq, (get(a["dq"], off, S, D) - dS * K).cwiseAbs().maxCoeff());
      dK += dS.transpose() * Q;
      dV += P.transpose() * dO;
      scale = std::max(scale, O.cwiseAbs().maxCoeff());
    }
    err_dk = std::max(err_dk, (get(a["dk"], h * Sk * D, Sk, D) - dK).cwiseAbs().maxCoeff() /
                                  dK.cwiseAbs().maxCoeff());
    err_dv = std::max(err_dv, (get(a["dv"], h * Sk * Dv, Sk, Dv) - dV).cwiseAbs().maxCoeff() /
                                  dV.cwiseAbs().maxCoeff());
  }
  // f32 inputs, but the kernels' dots take bf16 operands (Mosaic's one-pass dot): ~1e-2.
  EXPECT_LT(err_o / scale, 2e-2);
  EXPECT_LT(err_dk, 3e-2);
  EXPECT_LT(err_dv, 3e-2);
  EXPECT_GT(err_dq, 0);
  EXPECT_LT(err_dq, 0.1);
}

TEST(Attention, KernelsMatchNaiveCausalAttention) { expect_matches_naive_attention(kSmall); }

TEST(Attention, KernelsMatchNaiveAttentionOverMoreKeysThanQueries) {
  // Context parallelism: local queries against gathered keys, no causal mask.
  kernels::AttentionShape s = kSmall;
  s.seq = 32;
  s.kv_seq = 80;
  s.causal = false;
  expect_matches_naive_attention(s);
}

TEST(Attention, KernelsMatchNaiveAttentionWithNarrowerValues) {
  // Multi-head latent attention's shape: queries and keys wider than the values (192 and 128 in
  // DeepSeek; 24 and 16 here).
  kernels::AttentionShape s = kSmall;
  s.head_dim = 24;
  s.head_dim_v = 16;
  s.kv_heads = s.q_heads;
  expect_matches_naive_attention(s);
}

TEST(Attention, CausalSkippingHalvesTheWork) {
  const ChipSpec chip = load_chip("v5e");
  kernels::AttentionShape s{
      .batch = 1, .seq = 4096, .q_heads = 32, .kv_heads = 8, .head_dim = 128, .block = 512};
  const RunResult causal = simulate_kernel(chip, kernels::attention_forward(s));
  s.causal = false;
  const RunResult full = simulate_kernel(chip, kernels::attention_forward(s));
  const int64_t n = 4096 / 512;
  EXPECT_EQ(full.flops, 4LL * 4096 * 4096 * 128 * 32);
  EXPECT_EQ(causal.flops * 2 * n, full.flops * (n + 1));  // n(n+1)/2 of n^2 blocks
  // The live blocks alone take (n+1)/2n of the full time; the diagonal blocks' mask and the
  // skipped steps' overhead add at most a fifth of that.
  const double live = (n + 1.0) / (2.0 * n);
  EXPECT_GT(causal.time_s, live * full.time_s);
  EXPECT_LT(causal.time_s, 1.2 * live * full.time_s);
  EXPECT_LT(causal.hbm_read_bytes, 0.65 * full.hbm_read_bytes);  // skipped blocks move no data
}

}  // namespace
}  // namespace tpusim
