// The inter-chunk scan of the Gated Delta Net as Pallas kernels (MaxText PR #4348,
// gated_delta_network.py; gdn_kernels.md stage 5 and 5'): grid (B, H/th, N) with semantics
// (parallel, parallel, arbitrary); the recurrent state (forward) or its cotangent (backward) lives
// in a VMEM scratch for the whole chunk walk; all dots are batched over the th heads of a cell.
//
// Arrays (all [B, N, H, C, .] chunk-major as the kernel sees them):
//   forward  in:  w, q, k [.., Dk], u [.., Dv] (compute dtype), g [.., C, 1] f32 (cumulated gate),
//                 h0 [B, H, Dk, Dv] f32
//            out: o [.., Dv] (compute dtype), h_saved [B, N, H, Dk, Dv] f32 (state entering each
//                 chunk), h_final [B, H, Dk, Dv] f32
//   backward in:  w, q, k, u, g, h_saved, do [.., Dv] (compute dtype), dh_final [B, H, Dk, Dv] f32
//            out: dw, dq, dk [.., Dk], du [.., Dv], dg [.., C, 1], dh0 [B, H, Dk, Dv], all f32;
//                 the walk runs the chunks in reverse (index map N - 1 - n).
#pragma once
#include <memory>

#include "kernels/gdn/shape.h"

namespace tpusim::kernels::gdn {

std::shared_ptr<const Kernel> scan_forward(const GdnShape& s, const ScanOptions& o);
std::shared_ptr<const Kernel> scan_backward(const GdnShape& s, const ScanOptions& o);

}  // namespace tpusim::kernels::gdn
