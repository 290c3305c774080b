#include "models/workload/remat.h"

#include <fmt/format.h>

#include <vector>

#include "sim/error.h"

namespace tpusim {
namespace {

constexpr const char* kNames[kNumActivations] = {"decoder_layer_input",
                                                 "query_proj",
                                                 "key_proj",
                                                 "value_proj",
                                                 "context",
                                                 "out_proj",
                                                 "mlpwi_0",
                                                 "mlpwi_1",
                                                 "mlpwo",
                                                 "qkv_proj",
                                                 "mlpwi"};

constexpr const char* kPlacements[] = {"remat", "device", "offload"};

using A = Activation;
// MaxText 0.2.5's lists (layers/nnx_decoders.py L1258-1387): each preset that saves q, k and v
// saves the fused qkv_proj too, except qkv_proj_offloaded (L1345-1352: query, key, value and
// kv_proj only); the minimal ones save the fused mlpwi with mlpwi_0 and mlpwi_1.
const std::vector<A> kQkv = {A::query_proj, A::key_proj, A::value_proj, A::qkv_proj};
const std::vector<A> kMinimal = {A::query_proj, A::key_proj, A::value_proj,
                                 A::qkv_proj,   A::out_proj, A::mlpwi_0,
                                 A::mlpwi_1,    A::mlpwi,    A::mlpwo};

struct Preset {
  const char* policy;
  std::vector<A> saved;
  Placement where;
};

// xla_lowering.md 3, the table of MaxText's remat_policy values.
const std::vector<Preset>& presets() {
  static const std::vector<Preset> p = {
      {"full", {}, Placement::device},
      {"minimal", kMinimal, Placement::device},
      {"minimal_with_context",
       {A::query_proj, A::key_proj, A::value_proj, A::qkv_proj, A::out_proj, A::mlpwi_0, A::mlpwi_1,
        A::mlpwi, A::mlpwo, A::context},
       Placement::device},
      {"save_dot_except_mlpwi",
       {A::query_proj, A::key_proj, A::value_proj, A::qkv_proj, A::out_proj, A::mlpwo},
       Placement::device},
      {"save_dot_except_mlp",
       {A::query_proj, A::key_proj, A::value_proj, A::qkv_proj, A::out_proj},
       Placement::device},
      {"save_qkv_proj", kQkv, Placement::device},
      {"save_out_proj", {A::out_proj}, Placement::device},
      {"qkv_proj_offloaded", {A::query_proj, A::key_proj, A::value_proj}, Placement::offload},
      {"minimal_offloaded", kMinimal, Placement::offload},
      {"custom", {}, Placement::device},
  };
  return p;
}

}  // namespace

std::string name(Activation a) { return kNames[static_cast<int>(a)]; }
std::string name(Placement p) { return kPlacements[static_cast<int>(p)]; }

std::string RematPolicy::describe() const {
  if (policy != "custom") return policy;
  std::string out;
  for (int i = 0; i < kNumActivations; ++i)
    if (where[i] != Placement::remat)
      out += fmt::format("{}{}: {}", out.empty() ? "" : ", ", kNames[i],
                         kPlacements[static_cast<int>(where[i])]);
  return fmt::format("custom ({})", out);
}

RematPolicy RematPolicy::named(const std::string& policy) {
  std::string known;
  for (const Preset& p : presets()) {
    if (p.policy == policy) {
      RematPolicy r;
      r.policy = policy;
      r.where.fill(Placement::remat);
      r.where[static_cast<int>(A::decoder_layer_input)] = Placement::device;
      for (A a : p.saved) r.where[static_cast<int>(a)] = p.where;
      return r;
    }
    known += (known.empty() ? "" : ", ") + std::string(p.policy);
  }
  throw Error(fmt::format("unknown remat policy '{}' (known: {})", policy, known));
}

RematPolicy RematPolicy::fused(bool qkv, bool mlp) const {
  RematPolicy r = *this;
  if (qkv)
    for (A a : {A::query_proj, A::key_proj, A::value_proj})
      r.where[static_cast<int>(a)] = (*this)[A::qkv_proj];
  if (mlp)
    for (A a : {A::mlpwi_0, A::mlpwi_1}) r.where[static_cast<int>(a)] = (*this)[A::mlpwi];
  return r;
}

Activation parse_activation(const std::string& tensor) {
  std::string names;
  for (int i = 0; i < kNumActivations; ++i) {
    if (tensor == kNames[i]) return static_cast<Activation>(i);
    names += (i ? ", " : "") + std::string(kNames[i]);
  }
  throw Error(fmt::format("unknown tensor '{}' (known: {})", tensor, names));
}

void RematPolicy::set(Activation a, const std::string& placement) {
  int index = -1;
  for (int i = 0; i < 3; ++i)
    if (placement == kPlacements[i]) index = i;
  if (index < 0)
    throw Error(fmt::format("unknown placement '{}' (known: remat, device, offload)", placement));
  if (a == Activation::decoder_layer_input && index == 0)
    throw Error(
        "decoder_layer_input cannot be remat: it is the layer scan's checkpoint (device or "
        "offload)");
  where[static_cast<int>(a)] = static_cast<Placement>(index);
}

}  // namespace tpusim
