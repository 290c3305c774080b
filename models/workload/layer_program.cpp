#include "models/workload/layer_program.h"

#include <fmt/format.h>

#include <stdexcept>

#include "kernels/generic.h"

namespace tpusim {

using kernels::Fusion;

namespace {

void add_named(Program& p, const std::string& stage, std::shared_ptr<const Kernel> k,
               BufferMap buffers) {
  for (const auto* specs : {&k->inputs, &k->outputs})
    for (const BlockSpec& b : *specs)
      if (b.array.space == MemSpace::hbm && !buffers.count(b.array.name))
        throw std::logic_error(fmt::format("layer op '{}' ({}) leaves its array '{}' unnamed",
                                           k->name, stage, b.array.name));
  p.add_kernel(std::move(k), {}, stage);
  p.items.back().buffers = std::move(buffers);
}

}  // namespace

void LayerProgram::dot(const std::string& stage, int64_t m, int64_t k, int64_t n, const Buffers& x,
                       const Buffers& y, const Buffers& z, Gradient g) {
  if (!int8_) {
    add_named(p, stage, kernels::xla_dot(c_.chip, m, k, n, DType::bf16),
              {{"x", x}, {"y", y}, {"z", z}});
    return;
  }
  // A weight's quantized copy is what FSDP gathers under int8 (held elsewhere, as the weight).
  const Buffers lhs = x.empty() ? Buffers{} : Buffers{"int8 lhs"},
                rhs = y.empty() ? Buffers{} : Buffers{"int8 rhs"};
  fusion(stage, g == Gradient::lhs ? Fusion::quantize_stochastic : Fusion::quantize, m, k,
         {{"x", x}, {"x int8", lhs}, {"scale", lhs}});
  fusion(stage, g == Gradient::rhs ? Fusion::quantize_stochastic : Fusion::quantize, k, n,
         {{"x", y}, {"x int8", rhs}, {"scale", rhs}});
  add_named(p, stage, kernels::xla_dot(c_.chip, m, k, n, DType::s8),
            {{"x", lhs}, {"y", rhs}, {"z", z}});
}

void LayerProgram::dot_bwd(const std::string& stage, int64_t m, int64_t k, int64_t n,
                           const Buffers& x, const Buffers& dy, const Buffers& dx,
                           const Buffers& dw) {
  // dW first: then x dies before dX is written, as XLA's memory-minimising scheduler orders them
  // (C3 #41's compiled MLP backward holds the up projections and the down projection's input
  // gradient at its peak, not also the activation: docs/compiler_import.md).
  dot(stage, k, m, n, x, dy, dw, Gradient::rhs);
  dot(stage, m, n, k, dy, {}, dx, Gradient::lhs);
}

void LayerProgram::weight_dot(const std::string& stage, int64_t m, int64_t k,
                              std::initializer_list<int64_t> columns, const Buffers& x,
                              const Buffers& out) {
  int64_t n = 0;
  for (int64_t each : columns) {
    reads(stage, k * each);
    n += each;
  }
  if (n > 0) dot(stage, m, k, n, x, {}, out);
}

void LayerProgram::reads(const std::string& stage, int64_t elements) {
  if (elements > 0 && is_forward_stage(stage))
    forward_weights.push_back({static_cast<int>(p.items.size()), elements});
}

void LayerProgram::fusion(const std::string& stage, Fusion f, int64_t rows, int64_t cols,
                          BufferMap buffers) {
  add_named(p, stage, kernels::xla_fusion(f, rows, cols), std::move(buffers));
}

void LayerProgram::kernel(const std::string& stage, std::shared_ptr<const Kernel> k,
                          BufferMap buffers) {
  add_named(p, stage, std::move(k), std::move(buffers));
}

void LayerProgram::grouped_matmul(const std::string& stage, int64_t m, int64_t k, int64_t n,
                                  const Buffers& x, const Buffers& y, const Buffers& z) {
  add_named(p, stage, kernels::grouped_matmul(m, k, n), {{"x", x}, {"y", y}, {"z", z}});
}

std::string phase_name(Pass pass) { return pass == Pass::forward ? "fwd" : "remat"; }

RematPolicy kept_by(Pass pass, const StepConfig& c) {
  static const RematPolicy compute_all = RematPolicy::named("full");
  return pass == Pass::forward ? compute_all : c.layer_remat();
}

Buffers unless_saved(const StepConfig& c, Activation a, const std::string& name) {
  const RematPolicy remat = c.layer_remat();
  if (remat.saved(a) && remat[a] != Placement::offload) return {};
  return {name};
}

Buffers in_place_of(const Buffers& up, const std::string& name) {
  return up.empty() ? Buffers{name} : up;
}

Buffers layer_input(const StepConfig& c) {
  if (c.remat[Activation::decoder_layer_input] == Placement::offload) return {"layer input"};
  return {};
}

}  // namespace tpusim
