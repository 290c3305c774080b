// The triangular inversion A = (I + S)^-1 of the GDN's intra-chunk system (S strictly lower):
//  - invert_ladder: the Pallas kernel of MaxText PR #4348 (gdn_invert_unit_lower, gdn_kernels.md
//    stage 3): grid (B, H, N / tile_n), all parallel, one (1, tile_n, 1, C, C) block of S and of A
//    per cell. X starts at I; for b = 1, 2, ..., C/2: X <- X - X (S_b X), S_b being S restricted
//    to the off-diagonal b x b blocks of each 2b x 2b diagonal block. 2 log2(C) dependent C^3
//    matmuls, each as three bf16 dots (hi*hi + hi*lo + lo*hi). It never forms powers of S.
//  - invert_vjp: its custom VJP in XLA: dS = -A^T (dA A^T), HIGHEST, masked strictly lower, in two
//    fusions as the compiler emits them.
//  - doubling_inverse: the log-depth inverse MaxText PR #4577 wrote in XLA in place of
//    solve_triangular (measured_runs.md C4): from A = I, E = -S, ceil(log2 C) levels of
//    A <- tril(A + A E) and E <- tril(E E, -1) at default precision (one bf16 pass), each level
//    two fusions whose results go through HBM (the compiled program's structure,
//    docs/kernels/gdn.md); doubling_vjp: its custom VJP dS = -(A^T dA A^T), default precision,
//    unmasked, in two fusions.
// Arrays: S, A, dA, dS are [B, N, H, C, C] f32.
#pragma once
#include <memory>

#include "kernels/gdn/shape.h"
#include "kernels/tiling.h"
#include "sim/ir/program.h"

namespace tpusim::kernels::gdn {

// MaxText's tile choice for the ladder's chunks and the scan's heads (kernels/tiling.h).
using kernels::default_tile;

// How the ladder's products are formed: the kernel's manual bf16x3, or (to show why it does that)
// a single Mosaic-default f32 dot, which rounds both operands to bf16.
enum class LadderProducts { bf16x3, bf16_rounded };

std::shared_ptr<const Kernel> invert_ladder(const GdnShape& s, int64_t tile_n,
                                            LadderProducts products = LadderProducts::bf16x3);
Program invert_vjp(const GdnShape& s);
Program doubling_inverse(const GdnShape& s);
Program doubling_vjp(const GdnShape& s);

}  // namespace tpusim::kernels::gdn
