// What XLA runs around and instead of the GDN Pallas kernels, in the same IR (origin xla):
//  - the chunk-parallel stages (gdn_kernels.md stages 0-2 and 4, and their backward 4'-0');
//  - the baselines the kernels replace (xla_lowering.md sections 1-2):
//    * solve_triangular as XLA's TPU backend compiles it at C <= 128: one custom call
//      (InvertDiagBlocksLowerTriangular) that inverts the B*N*H diagonal blocks one at a time in
//      VMEM, C - 1 dependent row steps each, then a HIGHEST inv x b dot;
//    * lax.scan over the N chunks with the state h in HBM: per iteration four fusions around the
//      five HIGHEST dots (h is read three times and written once); the recompute under remat also
//      stacks the per-iteration residuals; the reverse scan carries dh the same way.
// XLA fusion boundaries are not public: each fusion here is one dot (or dot pair sharing operands)
// with its elementwise producers and consumers, which is how XLA's TPU backend fuses around dots;
// intermediates between fusions round-trip HBM. The inversion's row step (a row-vector x matrix
// product) is taken to run as multiply + reduce on the VPU rather than as an M = 1 MXU matmul.
// The baselines are timing schedules: their ops have the right shapes and costs, but their dynamic
// per-iteration indices (which row, which chunk) are not modelled, so they do not run functionally.
#pragma once
#include <memory>

#include "kernels/gdn/shape.h"
#include "sim/ir/program.h"

namespace tpusim::kernels::gdn {

// Forward chunk-parallel stages.
std::shared_ptr<const Kernel> xla_prep(const GdnShape& s);  // l2norm q, k; chunk-major transposes
std::shared_ptr<const Kernel> xla_gates_s(
    const GdnShape& s);  // g cumsum and S = tril_(beta k k^T e^(g_i - g_j))
std::shared_ptr<const Kernel> xla_wy(
    const GdnShape& s);  // u = A (v beta), w = A (k beta e^g), HIGHEST
// Backward chunk-parallel stages.
std::shared_ptr<const Kernel> xla_wy_backward(const GdnShape& s);
std::shared_ptr<const Kernel> xla_s_backward(const GdnShape& s);
std::shared_ptr<const Kernel> xla_prep_backward(const GdnShape& s);

// Baselines.
Program xla_solve_triangular(const GdnShape& s);
// The solve without its final inv x b product: what XLA's TPU backend runs as the custom call
// InvertDiagBlocksLowerTriangular (docs/kernels/gdn.md, the compiled main path).
Program xla_invert_diagonal_blocks(const GdnShape& s);
// The VJP's transposed solve as the compiler runs it under remat: a HIGHEST product with the
// inverse the recompute's solve made, not a second inversion (docs/kernels/gdn.md).
std::shared_ptr<const Kernel> xla_inverse_product(const GdnShape& s);
std::shared_ptr<const Kernel> xla_solve_vjp_product(const GdnShape& s);  // -tril(ct X^T), HIGHEST
Program xla_lax_scan_forward(const GdnShape& s, bool save_residuals);
Program xla_lax_scan_backward(const GdnShape& s);

// Context parallelism (MaxText PR #4968, gdn_kernels.md 7): the sequence is sharded over a
// context axis and each device holds s.seq local tokens. Before replaying its chunks with
// lax.scan from the incoming state, each device folds its chunks into one affine map
// h -> A h + B (a lax.scan with a checkpointed body: A_i = e^(g_last) I - k_g^T w,
// B_i = k_g^T u, carry (A_i A, A_i B + B_i), f32 HIGHEST), then takes the exclusive prefix of
// the devices' maps: a Hillis-Steele scan of log2(D) ppermute rounds (the merged version) and a
// final shift. The backward transposes both: a reverse scan that recomputes (A_i, B_i) from the
// stacked carries, and the prefix rounds in reverse.
Program xla_cp_compose_local(const GdnShape& s, bool stack_carries);
Program xla_cp_compose_local_backward(const GdnShape& s);
Program xla_cp_prefix(const GdnShape& s, const MeshAxis& context);
Program xla_cp_prefix_backward(const GdnShape& s, const MeshAxis& context);

}  // namespace tpusim::kernels::gdn
