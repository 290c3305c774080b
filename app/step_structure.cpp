#include "app/step_structure.h"

#include <fmt/format.h>

#include <algorithm>

namespace tpusim {

namespace {

constexpr const char* kStep = "step (predicted)";
constexpr const char* kExposed = "exposed collectives";

const StepPart* part_named(const StepPrediction& p, const std::string& name) {
  const auto it = std::find_if(p.parts.begin(), p.parts.end(),
                               [&](const StepPart& s) { return s.name == name; });
  return it == p.parts.end() ? nullptr : &*it;
}

}  // namespace

std::vector<TraceSpan> step_structure(const StepConfig& c, const StepPrediction& p) {
  std::vector<TraceSpan> spans;
  double at = 0;
  auto add = [&](const char* track, std::string name, double seconds,
                 const StepPart* part = nullptr, const char* pass = "") {
    if (seconds <= 0) return;
    spans.push_back({track, std::move(name), at, seconds, part ? part->name : "", pass});
    at += seconds;
  };
  const ModelConfig& m = c.model;
  const StepPart* attention = part_named(p, "attention layer");
  const StepPart* gdn = part_named(p, "gdn layer");
  const StepPart* dense = part_named(p, kDenseMlpLayer);
  // Layer i is full attention when every layer is, or when it ends an interval; a mixture of
  // experts' dense-MLP layers are drawn first (DeepSeek's order; Llama4 interleaves them).
  auto layer = [&](int64_t i) {
    const bool full = m.full_attention_interval == 0 || (i + 1) % m.full_attention_interval == 0;
    if (full && i < m.moe.dense_layers) return std::make_pair(dense, "attention (dense MLP)");
    return full ? std::make_pair(attention, "attention") : std::make_pair(gdn, "gdn");
  };
  if (const StepPart* d = part_named(p, "host dispatch")) add(kStep, "host dispatch", d->compute_s);
  for (int64_t i = 0; i < m.layers; ++i)
    if (const auto [part, kind] = layer(i); part)
      add(kStep, fmt::format("layer {} {} fwd", i, kind), part->forward_s, part, "fwd");
  if (const StepPart* e = part_named(p, "embedding + logits")) {
    add(kStep, "embedding + logits fwd", e->forward_s, e, "fwd");
    add(kStep, "embedding + logits bwd", e->backward_s - e->recompute_s, e, "bwd");
    add(kExposed, "embedding + logits: exposed collectives", e->exposed_s, e);
  }
  for (int64_t i = m.layers - 1; i >= 0; --i)
    if (const auto [part, kind] = layer(i); part) {
      add(kStep, fmt::format("layer {} {} recompute", i, kind), part->recompute_s, part, "remat");
      add(kStep, fmt::format("layer {} {} bwd", i, kind), part->backward_s - part->recompute_s,
          part, "bwd");
      add(kExposed, fmt::format("layer {} {}: exposed collectives", i, kind), part->exposed_s,
          part);
    }
  if (const StepPart* o = part_named(p, "optimizer")) add(kStep, "optimizer", o->compute_s);
  if (const StepPart* d = part_named(p, "data-parallel gradient all-reduce (DCN)"))
    add(kExposed, d->name + ": exposed", d->exposed_s);
  return spans;
}

}  // namespace tpusim
