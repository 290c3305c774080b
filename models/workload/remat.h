// MaxText remat policies (xla_lowering.md 3) as the placement of each named activation of a
// decoder layer in the backward pass: recomputed, kept in HBM, or offloaded to pinned host memory.
// The named policies are presets; `custom` starts from MaxText's defaults (everything recomputed,
// the layer input on device) and takes per-tensor overrides, as MaxText's config keys do.
#pragma once
#include <array>
#include <string>

namespace tpusim {

enum class Placement { remat, device, offload };

// The checkpoint names of MaxText's decoder layers (attentions.py, linears.py, attention_op.py).
// `context` is the splash attention's residuals (its output and log-sum-exp); `mlpwi_0` stands for
// the single up projection of a GELU MLP. `qkv_proj` and `mlpwi` name the fused projections
// (fused_qkv: one [E, H + 2 KV, D] weight, attentions.py L762-785; fused_mlp: one
// [E, activations, F] weight, linears.py L689-, L800-808): they stand in for q, k, v and for
// mlpwi_0, mlpwi_1 when the step fuses them, and name nothing otherwise.
enum class Activation {
  decoder_layer_input,
  query_proj,
  key_proj,
  value_proj,
  context,
  out_proj,
  mlpwi_0,
  mlpwi_1,
  mlpwo,
  qkv_proj,
  mlpwi,
};
inline constexpr int kNumActivations = 11;
std::string name(Activation a);
std::string name(Placement p);  // "remat", "device" or "offload", as MaxText's keys take it
Activation parse_activation(const std::string& name);  // throws Error listing the names

struct RematPolicy {
  std::string policy = "full";                                      // MaxText's remat_policy
  std::array<Placement, kNumActivations> where{Placement::device};  // only the layer input kept

  Placement operator[](Activation a) const { return where[static_cast<int>(a)]; }
  bool saved(Activation a) const { return (*this)[a] != Placement::remat; }
  // "full", or "custom (decoder_layer_input: offload, query_proj: offload, ...)" for custom.
  std::string describe() const;

  // The policy as a layer with fused projections sees it: q, k and v placed as `qkv_proj`, the up
  // projections as `mlpwi` (MaxText's checkpoint names for the fused outputs).
  RematPolicy fused(bool qkv, bool mlp) const;

  // A named MaxText policy; throws Error listing the known ones.
  static RematPolicy named(const std::string& policy);
  // `custom`: places one tensor: "remat", "device" or "offload"; throws Error for an unknown
  // placement (and for recomputing the layer input: it is the layer scan's checkpoint).
  void set(Activation a, const std::string& placement);
};

}  // namespace tpusim
