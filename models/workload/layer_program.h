// Builds a layer's program op by op (models/workload/layers.h): XLA dots (int8 with AQT's
// quantize fusions where configured), XLA fusions and Pallas kernels, each with its stage label
// and the program buffers its HBM arrays are (ProgramItem::buffers), so that the layer's
// backward working set is the liveness of its buffers (sim/ir/liveness.h, memory_model.h).
// Every HBM array of every op must be named: an op that leaves one unnamed is a bug here.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/transformer.h"
#include "models/workload/layers.h"
#include "models/workload/step_config.h"
#include "sim/ir/program.h"

namespace tpusim {

// The buffers one operand is: none (held elsewhere: a weight, its gradient, the saved layer
// input), one, or several side by side (the q, k and v gradients as one dot's operand).
using Buffers = std::vector<std::string>;
// An op's HBM arrays (the kernel's names) -> the program's buffers.
using BufferMap = std::map<std::string, Buffers>;

class LayerProgram {
 public:
  // `weights_int8`: the program's dots are weight matmuls that AQT quantizes (not the logits).
  explicit LayerProgram(const StepConfig& c, bool weights_int8 = true)
      : c_(c), int8_(weights_int8 && c.int8_matmuls) {}
  Program p;
  std::vector<WeightRead> forward_weights;

  // Which operand of an int8 dot is a gradient, rounded stochastically (AQT's "jax.uniform"
  // noise on the gradient side of both backward products, MaxText's config_v3).
  enum class Gradient { none, lhs, rhs };
  // z [m, n] = x [m, k] y [k, n]; with int8 matmuls both operands are quantized first.
  void dot(const std::string& stage, int64_t m, int64_t k, int64_t n, const Buffers& x,
           const Buffers& y, const Buffers& z, Gradient g = Gradient::none);
  // The backward of y = x W (x [m, k] named `x`, W [k, n]): dW = x^T dY, then dX = dY W^T. W's
  // gradient is held elsewhere (the gradient accumulators) unless `dw` names it.
  void dot_bwd(const std::string& stage, int64_t m, int64_t k, int64_t n, const Buffers& x,
               const Buffers& dy, const Buffers& dx, const Buffers& dw = {});
  // x [m, k] times the weights [k, n_i] side by side (q, k and v; an MLP's two up projections):
  // one dot, which in the forward pass reads each weight.
  void weight_dot(const std::string& stage, int64_t m, int64_t k,
                  std::initializer_list<int64_t> columns, const Buffers& x, const Buffers& out);
  // The next op reads a weight of `elements` (recorded in the forward pass only: the weights'
  // gathers the step model chains, collective_plan.h).
  void reads(const std::string& stage, int64_t elements);

  void fusion(const std::string& stage, kernels::Fusion f, int64_t rows, int64_t cols,
              BufferMap buffers);
  void kernel(const std::string& stage, std::shared_ptr<const Kernel> k, BufferMap buffers);
  // z = x y by megablox, y the experts' weights (or, transposed, their gradient).
  void grouped_matmul(const std::string& stage, int64_t m, int64_t k, int64_t n, const Buffers& x,
                      const Buffers& y, const Buffers& z);

 private:
  const StepConfig& c_;
  bool int8_;
};

// A layer's forward runs twice: the forward pass computes everything; its recompute in the
// backward skips what the policy saved, and what the backward never reads.
enum class Pass { forward, recompute };
std::string phase_name(Pass pass);
RematPolicy kept_by(Pass pass, const StepConfig& c);

// A named activation's buffer: none when the policy keeps it on device (counted with the saved
// activations), else `name` (recomputed, or brought back from host memory).
Buffers unless_saved(const StepConfig& c, Activation a, const std::string& name);
// The running layer's input: saved, on device (a persistent item) or brought back from host.
Buffers layer_input(const StepConfig& c);

// The buffer of an activation's gradient computed from `up`, the recomputed up projections of its
// shape: `up` itself, which dies with it (XLA gives a fusion's output the buffer of an operand of
// the same shape that dies there: C3 #41's compiled MLP backward holds three [tokens, mlp] arrays
// at its peak, the up projections and the down projection's input gradient, not five;
// docs/compiler_import.md), or `name` when `up` is saved, held elsewhere.
Buffers in_place_of(const Buffers& up, const std::string& name);

// A mixture of experts' MLP (models/workload/moe_layer.cpp): reads "mlp norm", writes "mlp out";
// its backward reads "layer output grad", writes "mlp norm grad".
void moe_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l,
                 const std::string& stage, const RematPolicy& keep);
void moe_backward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l);

}  // namespace tpusim
