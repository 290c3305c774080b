#include "app/hlo_pallas_calls.h"

#include <fmt/format.h>

#include <vector>

#include "kernels/generic.h"
#include "kernels/transformer.h"
#include "sim/error.h"

namespace tpusim {

std::shared_ptr<const Kernel> splash_attention_kernel(const HloModule& m,
                                                      const HloComputation& comp,
                                                      const HloInstruction& in,
                                                      const std::string& name) {
  // [batch, heads, seq, head_dim], or [heads, seq, head_dim] for one sequence.
  std::vector<std::vector<int64_t>> qk;
  for (const std::string& o : in.operands)
    if (const HloInstruction* x = comp.find(o);
        x && !x->shape.is_tuple() && x->shape.dtype == "bf16" &&
        (x->shape.dims.size() == 3 || x->shape.dims.size() == 4)) {
      qk.push_back(x->shape.dims);
      if (qk.back().size() == 3) qk.back().insert(qk.back().begin(), 1);
    }
  if (qk.size() < 2)
    throw Error(
        fmt::format("{}:{}: splash attention call '{}' has no [batch, heads, seq, dim] "
                    "q and k operands",
                    m.file, in.line, in.name));
  kernels::AttentionShape a;
  a.batch = qk[0][0];
  a.q_heads = qk[0][1];
  a.seq = qk[0][2];
  a.head_dim = qk[0][3];
  a.kv_heads = qk[1][1];
  const std::string key = "block_q\\\": ";
  for (const auto& [attr, text] : in.attrs)
    if (const auto at = text.find(key); at != std::string::npos)
      a.block = a.block_compute = std::stoll(text.substr(at + key.size()));
  if (name.find("_dkv") != std::string::npos) return kernels::attention_backward_dkv(a);
  if (name.find("_dq") != std::string::npos) return kernels::attention_backward_dq(a);
  return kernels::attention_forward(a);
}

namespace {

// The call's floating-point operands of rank 2 and 3 (the scalar-prefetched group tables are s32).
std::vector<std::vector<int64_t>> float_operands(const HloComputation& comp,
                                                 const HloInstruction& in, size_t rank) {
  std::vector<std::vector<int64_t>> dims;
  for (const std::string& o : in.operands)
    if (const HloInstruction* x = comp.find(o);
        x && !x->shape.is_tuple() && (x->shape.dtype == "bf16" || x->shape.dtype == "f32") &&
        x->shape.dims.size() == rank)
      dims.push_back(x->shape.dims);
  return dims;
}

}  // namespace

std::shared_ptr<const Kernel> megablox_kernel(const HloModule& m, const HloComputation& comp,
                                              const HloInstruction& in, const std::string& name) {
  const bool gmm = name == "jit(gmm)" || name == "gmm";
  const bool tgmm = name == "jit(tgmm)" || name == "tgmm";
  if (!gmm && !tgmm) return nullptr;
  const auto two = float_operands(comp, in, 2), three = float_operands(comp, in, 3);
  const auto& out = in.shape.dims;
  if (gmm && two.size() == 1 && three.size() == 1 && out.size() == 2) {
    const int64_t groups = three[0][0];
    const int64_t rows = kernels::megablox_rows((two[0][0] + groups - 1) / groups);
    return kernels::grouped_matmul(groups * rows, two[0][1], out[1]);
  }
  if (tgmm && two.size() == 2 && out.size() == 3) {
    const int64_t groups = out[0];
    const int64_t rows = kernels::megablox_rows((two[1][0] + groups - 1) / groups);
    return kernels::grouped_matmul(groups * out[1], rows, out[2]);
  }
  throw Error(fmt::format(
      "{}:{}: megablox call '{}' has no {} operands", m.file, in.line, in.name,
      gmm ? "[m, k] and [groups, k, n]" : "[k, m] and [m, n] with a [groups, k, n] output"));
}

}  // namespace tpusim
