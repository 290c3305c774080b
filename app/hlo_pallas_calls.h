// Pallas kernels of JAX's own libraries met in compiled programs whose kernels the bridge did not
// export (their index maps read scalar-prefetched tables): each call resolved to tpusim's own
// schedule of the kernel, sized from the call's operands.
#pragma once
#include <memory>
#include <string>

#include "app/hlo_text.h"
#include "sim/ir/kernel.h"

namespace tpusim {

// JAX's splash attention call `in` (kernel `name`: splash_mha_fwd..., _dkv..., _dq...) as tpusim's
// own splash schedule (kernels/transformer.h), causal, sized from its q and k operands
// ([batch, heads, seq, head_dim] bf16) and the block size the call records.
std::shared_ptr<const Kernel> splash_attention_kernel(const HloModule& m,
                                                      const HloComputation& comp,
                                                      const HloInstruction& in,
                                                      const std::string& name);

// JAX's megablox grouped matmuls (jax.experimental.pallas.ops.tpu.megablox, the kernel MaxText's
// sparse_matmul runs; `name` gmm or tgmm, as jit(gmm) in the op_name) as tpusim's grouped_matmul
// (kernels/generic.h), routing taken as balanced. gmm: lhs [m, k] and rhs [groups, k, n] (or
// [groups, n, k], transposed in the backward) -> [m, n]; tgmm: lhs transposed [k, m] and the
// output's cotangent [m, n] -> [groups, k, n]. nullptr when `name` is neither.
std::shared_ptr<const Kernel> megablox_kernel(const HloModule& m, const HloComputation& comp,
                                              const HloInstruction& in, const std::string& name);

}  // namespace tpusim
