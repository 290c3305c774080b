// A mixture of experts' MLP as MaxText runs it (layers/moe.py): the router, the shared experts and
// the routed experts on megablox's path, the dense einsum path or its capacity-factor dispatch.
#include <algorithm>
#include <cmath>

#include "kernels/generic.h"
#include "models/workload/layer_program.h"

namespace tpusim {
namespace {

using kernels::Fusion;
using A = Activation;

// An MoE block's per-chip sizes (MaxText layers/moe.py). Routing is taken as balanced: each local
// expert gets tokens x top_k / experts rows (with expert parallelism on megablox's path the
// all-to-all brings each chip the rows of its experts from the whole expert axis: the same count;
// the dense einsum path runs every expert on the chip's own batch).
struct MoeSizes {
  int64_t experts = 0;   // on this chip (experts / mesh.expert)
  int64_t rows = 0;      // per local expert, padded to megablox's 512-row tile
  int64_t width = 0;     // an expert's MLP width on this chip (/ tensor)
  int64_t capacity = 0;  // per sequence and expert when tokens are dropped (0: none)
};

MoeSizes moe_sizes(const StepConfig& c, const LocalSizes& l) {
  const MoeDims& e = c.model.moe;
  MoeSizes s;
  s.experts = e.experts / c.mesh.expert;
  s.rows = kernels::megablox_rows((l.tokens * e.top_k + e.experts - 1) / e.experts);
  s.width = e.mlp_dim / c.mesh.tensor;
  // moe.py generate_masks (L3783-3796): int(max(ceil(S top_k / E) x cf, cf)) per sequence.
  if (c.capacity_factor > 0)
    s.capacity = static_cast<int64_t>(
        std::max(std::ceil(static_cast<double>(l.seq * e.top_k) / e.experts) * c.capacity_factor,
                 c.capacity_factor));
  return s;
}

// The permutations and weighted sums around the experts are modelled as residual adds of the
// permuted rows (a gather, a scatter-add); their other operands are not the sizes of those adds,
// so they are read as parts (sized by their own writers) or not at all.
const Buffers kNorm{"mlp norm"}, kRouter{"router weights"}, kOutGrad{"layer output grad"},
    kNormGrad{"mlp norm grad"};

// The routed experts, forward (or its recompute without what the policy saved), on the path
// MaxText takes (moe.py __call__ L4689-4727): sparse_matmul sorts the token copies by expert and
// runs megablox's grouped matmuls; otherwise dense_matmul, with a capacity factor dispatching
// into [experts, batch, capacity] slots by one-hot einsums (dropping what overflows), without one
// running every token through every expert.
void moe_experts_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l,
                         const std::string& stage, const RematPolicy& keep) {
  const int64_t M = l.tokens, E = c.model.d_model;
  const MoeSizes s = moe_sizes(c, l);
  const bool up = !(keep.saved(A::mlpwi_0) && keep.saved(A::mlpwi_1)), down = !keep.saved(A::mlpwo);
  const Buffers expert_up = unless_saved(c, A::mlpwi_0, "expert up"), act{"expert act"},
                expert_out = unless_saved(c, A::mlpwo, "expert out");
  if (c.moe_sparse_matmul) {
    const int64_t R = s.experts * s.rows;
    // permute: gather the token copies by expert
    lp.fusion(stage, Fusion::residual_add, R, E,
              {{"x", {"mlp norm", "router weights"}}, {"r", {}}, {"y", {"permuted"}}});
    if (up) {
      lp.reads(stage, s.experts * E * 2 * s.width);
      lp.grouped_matmul(stage, R, E, 2 * s.width, {"permuted"}, {}, expert_up);
    }
    lp.fusion(stage, Fusion::swiglu, R, s.width,
              {{"gate", expert_up}, {"up", expert_up}, {"h", act}});
    if (down) {
      lp.reads(stage, s.experts * s.width * E);
      lp.grouped_matmul(stage, R, s.width, E, act, {}, expert_out);
    }
    // unpermute and the routing-weighted sum
    lp.fusion(stage, Fusion::residual_add, R, E,
              {{"x", expert_out}, {"r", {}}, {"y", {"mlp out"}}});
  } else if (s.capacity > 0) {
    const int64_t slots = l.batch * c.model.moe.experts * s.capacity;
    const Buffers mask{"dispatch mask"};
    lp.fusion(stage, Fusion::residual_add, M, c.model.moe.experts * s.capacity,
              {{"x", {}}, {"r", {}}, {"y", mask}});
    lp.dot(stage, slots, l.seq, E, mask, kNorm, {"dispatched"});  // "BSM,BSEC -> EBCM" over S
    if (up) {
      lp.reads(stage, s.experts * E * 2 * s.width);
      lp.dot(stage, slots, E, 2 * s.width, {"dispatched"}, {}, expert_up);
    }
    lp.fusion(stage, Fusion::swiglu, slots, s.width,
              {{"gate", expert_up}, {"up", expert_up}, {"h", act}});
    if (down) {
      lp.reads(stage, s.experts * s.width * E);
      lp.dot(stage, slots, s.width, E, act, {}, expert_out);
    }
    lp.dot(stage, M, c.model.moe.experts * s.capacity, E, mask, expert_out,
           {"mlp out"});  // combine
  } else {
    if (up) lp.weight_dot(stage, M, E, {2 * s.experts * s.width}, kNorm, expert_up);  // BSM,EMH
    lp.fusion(stage, Fusion::swiglu, M * s.experts, s.width,
              {{"gate", expert_up}, {"up", expert_up}, {"h", act}});
    if (down) {
      lp.reads(stage, s.experts * s.width * E);
      lp.dot(stage, M * s.experts, s.width, E, act, {}, expert_out);
    }
    lp.fusion(stage, Fusion::residual_add, M * s.experts, E,  // the weighted sum
              {{"x", expert_out}, {"r", {}}, {"y", {"mlp out"}}});
  }
}

void moe_experts_backward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l) {
  const int64_t M = l.tokens, E = c.model.d_model;
  const MoeSizes s = moe_sizes(c, l);
  const std::string stage = "bwd: moe";
  const Buffers expert_up = unless_saved(c, A::mlpwi_0, "expert up"), act{"expert act"},
                out_grad{"expert out grad"}, act_grad{"expert act grad"},
                up_grad = in_place_of(expert_up, "expert up grad");
  const BufferMap swiglu_bwd{{"gate", expert_up},
                             {"up", expert_up},
                             {"dh", act_grad},
                             {"dup", up_grad},
                             {"dgate", up_grad}};
  if (c.moe_sparse_matmul) {
    const int64_t R = s.experts * s.rows;
    lp.fusion(stage, Fusion::residual_add, R, E,
              {{"x", {"layer output grad", "router weights"}}, {"r", {}}, {"y", out_grad}});
    lp.grouped_matmul(stage, R, E, s.width, out_grad, {}, act_grad);  // dX of the down projection
    lp.grouped_matmul(stage, s.experts * s.width, s.rows, E, act, out_grad, {});  // its dW (tgmm)
    lp.fusion(stage, Fusion::swiglu_bwd, R, s.width, swiglu_bwd);
    lp.grouped_matmul(stage, R, 2 * s.width, E, up_grad, {}, {"permuted grad"});
    lp.grouped_matmul(stage, s.experts * E, s.rows, 2 * s.width, {"permuted"}, up_grad, {});
    lp.fusion(stage, Fusion::residual_add, R, E,
              {{"x", {"permuted grad"}}, {"r", {}}, {"y", {"mlp norm grad", "permuted grad"}}});
  } else if (s.capacity > 0) {
    const int64_t slots = l.batch * c.model.moe.experts * s.capacity;
    const Buffers mask{"dispatch mask"}, mask_grad{"dispatch mask grad"};
    lp.dot_bwd(stage, M, c.model.moe.experts * s.capacity, E, mask, kOutGrad, mask_grad, out_grad);
    lp.dot_bwd(stage, slots, s.width, E, act, out_grad, act_grad);
    lp.fusion(stage, Fusion::swiglu_bwd, slots, s.width, swiglu_bwd);
    lp.dot_bwd(stage, slots, E, 2 * s.width, {"dispatched"}, up_grad, {"dispatched grad"});
    lp.dot_bwd(stage, slots, l.seq, E, mask, {"dispatched grad"}, mask_grad, kNormGrad);
  } else {
    lp.fusion(stage, Fusion::residual_add, M * s.experts, E,
              {{"x", {"layer output grad", "router weights"}}, {"r", {}}, {"y", out_grad}});
    lp.dot_bwd(stage, M * s.experts, s.width, E, act, out_grad, act_grad);
    lp.fusion(stage, Fusion::swiglu_bwd, M * s.experts, s.width, swiglu_bwd);
    lp.dot_bwd(stage, M, E, 2 * s.experts * s.width, kNorm, up_grad, kNormGrad);
  }
}

}  // namespace

// The router (a dot to the experts' logits, their softmax and top-k), the shared experts (one
// dense SwiGLU MLP of shared x the expert width) and the routed experts.
void moe_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l,
                 const std::string& stage, const RematPolicy& keep) {
  const int64_t M = l.tokens, E = c.model.d_model, experts = c.model.moe.experts;
  lp.weight_dot(stage, M, E, {experts}, kNorm, {"router logits"});
  lp.fusion(stage, Fusion::cross_entropy, M, experts,  // softmax over the experts, top-k
            {{"logits", {"router logits"}}, {"dlogits", kRouter}, {"loss", kRouter}});
  if (const int64_t w = c.model.moe.shared * moe_sizes(c, l).width) {
    const Buffers up = unless_saved(c, A::mlpwi_0, "shared up");
    if (!(keep.saved(A::mlpwi_0) && keep.saved(A::mlpwi_1)))
      lp.weight_dot(stage, M, E, {w, w}, kNorm, up);
    lp.fusion(stage, Fusion::swiglu, M, w, {{"gate", up}, {"up", up}, {"h", {"shared act"}}});
    if (!keep.saved(A::mlpwo))
      lp.weight_dot(stage, M, w, {E}, {"shared act"}, unless_saved(c, A::mlpwo, "shared out"));
  }
  moe_experts_forward(lp, c, l, stage, keep);
}

void moe_backward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l) {
  const int64_t M = l.tokens, E = c.model.d_model;
  moe_experts_backward(lp, c, l);
  if (const int64_t w = c.model.moe.shared * moe_sizes(c, l).width) {
    const Buffers up = unless_saved(c, A::mlpwi_0, "shared up"),
                  up_grad = in_place_of(up, "shared up grad");
    lp.dot_bwd("bwd: moe", M, w, E, {"shared act"}, kOutGrad, {"shared act grad"});
    lp.fusion("bwd: moe", Fusion::swiglu_bwd, M, w,
              {{"gate", up},
               {"up", up},
               {"dh", {"shared act grad"}},
               {"dup", up_grad},
               {"dgate", up_grad}});
    lp.dot_bwd("bwd: moe", M, E, 2 * w, kNorm, up_grad, kNormGrad);
  }
  lp.dot_bwd("bwd: moe", M, E, c.model.moe.experts, kNorm, kRouter, kNormGrad);
}

}  // namespace tpusim
