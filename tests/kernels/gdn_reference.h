// Independent double-precision references for the GDN kernels, written from the math
// (gdn_kernels.md sections 3 and 8), not from the schedules:
//  - chunk_scan: the inter-chunk recurrence chunk by chunk, as the lax.scan baseline states it;
//  - recurrent: the per-token recurrence h_t = e^{g_t} h_{t-1} + k_t (b_t (v_t - (e^{g_t}
//  h_{t-1})^T k_t))^T,
//    o_t = h_t^T q_t (FLA naive.py / HF torch_recurrent_gated_delta_rule);
//  - solve_unit_lower: A = (I + S)^-1 by forward substitution, row by row.
// Arrays are flat, row-major, in the kernels' [B, N, H, rows, cols] layout.
#pragma once
#include <Eigen/Dense>
#include <cmath>
#include <vector>

#include "kernels/gdn/shape.h"

namespace tpusim::testing {

using Vec = std::vector<double>;
using Mat = Eigen::MatrixXd;

struct ChunkIndex {
  const kernels::gdn::GdnShape& s;
  int64_t at(int64_t b, int64_t n, int64_t h, int64_t r, int64_t c, int64_t rows,
             int64_t cols) const {
    return ((((b * s.chunks() + n) * s.heads + h) * rows + r) * cols + c);
  }
  Mat get(const Vec& a, int64_t b, int64_t n, int64_t h, int64_t rows, int64_t cols) const {
    Mat m(rows, cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) m(r, c) = a[at(b, n, h, r, c, rows, cols)];
    return m;
  }
  void put(Vec& a, const Mat& m, int64_t b, int64_t n, int64_t h) const {
    for (int64_t r = 0; r < m.rows(); ++r)
      for (int64_t c = 0; c < m.cols(); ++c) a[at(b, n, h, r, c, m.rows(), m.cols())] = m(r, c);
  }
};

struct ScanData {
  Vec w, u, q, k, g, h0;  // g: cumulated within each chunk, [B, N, H, C]
};
struct ScanResult {
  Vec o, h_saved, h_final;
};

inline ScanResult chunk_scan(const kernels::gdn::GdnShape& s, const ScanData& d) {
  const ChunkIndex ix{s};
  const int64_t C = s.chunk, N = s.chunks();
  ScanResult r;
  r.o.assign(s.batch * N * s.heads * C * s.dv, 0);
  r.h_saved.assign(s.batch * N * s.heads * s.dk * s.dv, 0);
  r.h_final.assign(s.batch * s.heads * s.dk * s.dv, 0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      Mat H(s.dk, s.dv);
      for (int64_t i = 0; i < s.dk; ++i)
        for (int64_t j = 0; j < s.dv; ++j)
          H(i, j) = d.h0[((b * s.heads + h) * s.dk + i) * s.dv + j];
      for (int64_t n = 0; n < N; ++n) {
        ix.put(r.h_saved, H, b, n, h);
        const Mat W = ix.get(d.w, b, n, h, C, s.dk), U = ix.get(d.u, b, n, h, C, s.dv);
        const Mat Q = ix.get(d.q, b, n, h, C, s.dk), K = ix.get(d.k, b, n, h, C, s.dk);
        const Mat g = ix.get(d.g, b, n, h, C, 1);
        const Mat v_new = U - W * H;
        Mat attn = Q * K.transpose();
        for (int64_t i = 0; i < C; ++i)
          for (int64_t j = 0; j < C; ++j)
            attn(i, j) = j <= i ? attn(i, j) * std::exp(g(i) - g(j)) : 0;
        Mat qg = Q;
        for (int64_t i = 0; i < C; ++i) qg.row(i) *= std::exp(g(i));
        ix.put(r.o, qg * H + attn * v_new, b, n, h);
        Mat kd = K;
        for (int64_t i = 0; i < C; ++i) kd.row(i) *= std::exp(g(C - 1) - g(i));
        H = std::exp(g(C - 1)) * H + kd.transpose() * v_new;
      }
      for (int64_t i = 0; i < s.dk; ++i)
        for (int64_t j = 0; j < s.dv; ++j)
          r.h_final[((b * s.heads + h) * s.dk + i) * s.dv + j] = H(i, j);
    }
  return r;
}

// Per-token inputs: k, q [B, T, H, Dk], v [B, T, H, Dv], beta, log gate [B, T, H].
struct TokenData {
  Vec q, k, v, beta, gate;
};

inline Vec recurrent(const kernels::gdn::GdnShape& s, const TokenData& d) {
  const int64_t T = s.seq, H = s.heads;
  Vec o(s.batch * T * H * s.dv, 0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      Mat S = Mat::Zero(s.dk, s.dv);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t bt = (b * T + t) * H + h;
        Eigen::VectorXd k(s.dk), q(s.dk), v(s.dv);
        for (int64_t i = 0; i < s.dk; ++i) k(i) = d.k[bt * s.dk + i], q(i) = d.q[bt * s.dk + i];
        for (int64_t i = 0; i < s.dv; ++i) v(i) = d.v[bt * s.dv + i];
        S *= std::exp(d.gate[bt]);
        const Eigen::VectorXd delta = d.beta[bt] * (v - S.transpose() * k);
        S += k * delta.transpose();
        const Eigen::VectorXd out = S.transpose() * q;
        for (int64_t i = 0; i < s.dv; ++i) o[bt * s.dv + i] = out(i);
      }
    }
  return o;
}

inline Mat solve_unit_lower(const Mat& S) {
  const int64_t C = S.rows();
  Mat A = Mat::Identity(C, C);
  for (int64_t i = 0; i < C; ++i)  // row i of (I + S) A = I: A_i = e_i - sum_{j<i} S_ij A_j
    for (int64_t j = 0; j < i; ++j) A.row(i) -= S(i, j) * A.row(j);
  return A;
}

}  // namespace tpusim::testing
