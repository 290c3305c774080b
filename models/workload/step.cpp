#include "models/workload/step.h"

#include <fmt/format.h>

#include <algorithm>

#include "models/parallel/collective_plan.h"
#include "models/workload/layers.h"
#include "sim/timing/engine.h"

namespace tpusim {
namespace {

// XLA's async collective fusion runs a layer's FSDP gathers beside its dot fusions: in C1 main's
// compiled step every fusion that carries a gather's ring steps is a dot (the layer body's
// projections, the lax.scan loops' chunk products; 17,847 calls a step), and each runs a scalar
// loop over the gather's devices before its own work (libtpu's final bundles; the chips'
// async_collective_setup_cycles_per_device). So with the FSDP axis over `devices` > 1, each dot
// of a layer's XLA kernels carries one: XLA fuses every dot on its own, so a kernel of n dots
// stands for n carrying fusions (the main build's scan loops: 5, 5 and 11 a trip, where C1's
// compiled loops have 5, 5 and 10 carriers).
int64_t xla_dots(const Kernel& k) {
  if (k.origin != Origin::xla) return 0;
  return std::ranges::count_if(k.body, [](const Op& op) { return op.kind == OpKind::dot; });
}

std::shared_ptr<const Kernel> carrying(const std::shared_ptr<const Kernel>& k, int64_t devices) {
  const int64_t dots = xla_dots(*k);
  if (dots == 0) return k;
  auto carrier = std::make_shared<Kernel>(*k);
  carrier->carried_group = devices * dots;
  return carrier;
}

Program carrying_gathers(Program p, int64_t devices) {
  if (devices <= 1) return p;
  for (ProgramItem& item : p.items) {
    if (auto* call = std::get_if<KernelCall>(&item.what))
      call->kernel = carrying(call->kernel, devices);
    if (auto* loop = std::get_if<Loop>(&item.what))
      for (auto& k : loop->body) k = carrying(k, devices);
  }
  return p;
}

// Whether an item can carry a gather's ring steps (step.h, GatherWindows).
bool carries(const ProgramItem& item) {
  return std::ranges::any_of(kernels_of(item), [](const Kernel* k) { return xla_dots(*k) > 0; });
}

}  // namespace

// Reads sharing an op split it by their elements.
GatherWindows gather_windows(const Program& p, const RunResult& r,
                             const std::vector<WeightRead>& reads, double forward_s,
                             double backward_s) {
  // Forward cycles, and those of carrying items, before each item; the backward's in total.
  std::vector<int64_t> before(r.items.size() + 1, 0), carried(r.items.size() + 1, 0);
  int64_t backward = 0, backward_carried = 0;
  for (size_t i = 0; i < r.items.size(); ++i) {
    const bool fwd = is_forward_stage(r.items[i].stage), carrier = carries(p.items[i]);
    const int64_t cycles = r.items[i].cycles;
    before[i + 1] = before[i] + (fwd ? cycles : 0);
    carried[i + 1] = carried[i] + (fwd && carrier ? cycles : 0);
    backward += fwd ? 0 : cycles;
    backward_carried += !fwd && carrier ? cycles : 0;
  }
  const double total = static_cast<double>(before.back());
  std::vector<double> at;  // where each read starts, in carrying forward cycles
  for (size_t j = 0; j < reads.size(); ++j) {
    int64_t item_elements = 0, earlier = 0;
    for (const WeightRead& other : reads)
      if (other.item == reads[j].item) item_elements += other.elements;
    for (size_t k = 0; k < j; ++k)
      if (reads[k].item == reads[j].item) earlier += reads[k].elements;
    const int item = reads[j].item;
    at.push_back(static_cast<double>(carried[item]) +
                 static_cast<double>(carried[item + 1] - carried[item]) * earlier / item_elements);
  }
  GatherWindows w;
  for (size_t j = 0; j < reads.size(); ++j) {
    const double until = j + 1 < reads.size() ? at[j + 1] : static_cast<double>(carried.back());
    w.forward.push_back({reads[j].elements, total > 0 ? forward_s * (until - at[j]) / total : 0});
  }
  w.backward_s = backward > 0 ? backward_s * backward_carried / backward : 0;
  return w;
}

namespace {

// `in_backward`: whether the part's items other than those of a "fwd" stage run in the backward
// pass (layers, logits) or after it (the optimizer). `reads` (a layer's): its forward's weight
// reads, whose gather windows are returned in `windows`.
StepPart simulate_part(const StepConfig& c, const std::string& name, int64_t count,
                       const Program& p, bool in_backward,
                       const std::vector<WeightRead>& reads = {},
                       GatherWindows* windows = nullptr) {
  ChipSpec chip = c.chip;
  chip.host_dispatch_s = 0;  // one dispatch per step, added once
  const RunResult r = simulate(chip, p);
  int64_t fwd = 0, remat = 0, all = 0;
  for (const ItemResult& item : r.items) {
    all += item.cycles;
    if (is_forward_stage(item.stage)) fwd += item.cycles;
    if (is_recompute_stage(item.stage)) remat += item.cycles;
  }
  const double forward_share = all > 0 ? static_cast<double>(fwd) / all : 0;
  const double recompute_share = all > 0 ? static_cast<double>(remat) / all : 0;
  StepPart part;
  part.name = name;
  part.count = count;
  part.compute_s = r.time_s;
  part.flops = static_cast<double>(r.flops);
  for (int i = 0; i < kNumCauses; ++i) part.time_s[i] = chip.cycles_to_s(r.time[i]);
  std::map<std::string, int> units;
  for (size_t u = 0; u < r.units.size(); ++u) {
    const UnitInfo& unit = r.units[u];
    if (unit.kind == UnitKind::ici) continue;  // the step's collectives are costed analytically
    const std::string group(tpusim::name(unit.kind));  // one group per kind, over cores and indices
    part.unit_busy_s[group] += chip.cycles_to_s(r.unit_busy[u]);
    ++units[group];
  }
  for (auto& [group, busy] : part.unit_busy_s) busy /= units[group];
  part.forward_s = r.time_s * forward_share;
  part.backward_s = in_backward ? r.time_s - part.forward_s : 0;
  part.recompute_s = in_backward ? r.time_s * recompute_share : 0;
  if (windows) *windows = gather_windows(p, r, reads, part.forward_s, part.backward_s);
  return part;
}

// The step as its dense-MLP layers see it (a mixture of experts' moe.dense_layers).
StepConfig with_dense_mlp(const StepConfig& c) {
  StepConfig dense = c;
  dense.model = c.model.without_experts();
  return dense;
}

// Builds one part's program and runs the engine's static checks on it; a failure names `key`.
const Program& program_of(const Program& p) { return p; }
const Program& program_of(const LayerPrograms& l) { return l.program; }

template <typename Build>
auto checked_part(const StepConfig& c, const std::string& key, const std::string& part, Build build)
    -> decltype(build()) {
  try {
    auto built = build();
    validate(c.chip, program_of(built));
    check_work(program_of(built), SimOptions::default_limits());
    return built;
  } catch (const VmemError& e) {
    throw ConfigError(key, fmt::format("the {}: {}", part, e.what()), /*over_vmem=*/true);
  } catch (const WorkLimitError& e) {  // a part's size follows the sequence (and the batch)
    throw ConfigError("seq", fmt::format("the {}: {}", part, e.what()));
  } catch (const Error& e) {
    throw ConfigError(key, fmt::format("the {}: {}", part, e.what()));
  }
}

// The parts are built here exactly as predict_step builds them, so what loads also runs.
LayerPrograms attention_part(const StepConfig& c, const LocalSizes& l) {
  return checked_part(c, "attention", "attention layer", [&] { return attention_layer(c, l); });
}
LayerPrograms gdn_part(const StepConfig& c, const LocalSizes& l) {
  return checked_part(c, "gdn", "GDN layer", [&] { return gdn_layer(c, l); });
}
Program logits_part(const StepConfig& c, const LocalSizes& l) {
  return checked_part(c, "vocab_tiling", "embedding and logits",
                      [&] { return embedding_and_logits(c, l); });
}
Program optimizer_part(const StepConfig& c) {
  return checked_part(c, "", "optimizer update", [&] { return optimizer(c); });
}

}  // namespace

void check(const StepConfig& c) {
  check_config(c);
  const LocalSizes l = c.local();
  if (c.model.attention_layers() > 0) attention_part(c, l);
  if (c.model.moe.dense_layers > 0) attention_part(with_dense_mlp(c), l);
  if (c.model.gdn_layers() > 0) gdn_part(c, l);
  logits_part(c, l);
  optimizer_part(c);
}

Program one_of_each_part(const StepConfig& c) {
  check(c);
  const LocalSizes l = c.local();
  Program p;
  p.name = "one layer of each kind, embedding and logits";
  auto add = [&](const std::string& part, Program q) {  // stages become "part / stage"
    for (ProgramItem& item : q.items)
      item.stage = part + " / " + (item.stage.empty() ? item.name : item.stage);
    p.append(q);
  };
  if (c.model.attention_layers() > 0) add("attention layer", attention_layer(c, l).program);
  if (c.model.moe.dense_layers > 0)
    add(kDenseMlpLayer, attention_layer(with_dense_mlp(c), l).program);
  if (c.model.gdn_layers() > 0) add("gdn layer", gdn_layer(c, l).program);
  add("embedding + logits", embedding_and_logits(c, l));
  return p;
}

StepPrediction predict_memory(const StepConfig& c) {
  check_config(c);
  StepPrediction out;
  out.timed = false;
  // MaxText's per-device batch is fractional under context parallelism (1/context sequence).
  out.model_flops_per_chip = maxtext_flops_per_device(c.model, c.batch_per_chip, c.seq) /
                             static_cast<double>(c.mesh.context);
  MemoryModel memory = memory_model(c, c.local());
  out.memory = std::move(memory.items);
  out.backward_gathers_prefetched = memory.backward_gathers_prefetched;
  for (const MemoryItem& it : out.memory)
    (it.on_device ? out.peak_hbm_bytes : out.host_offload_bytes) += it.bytes;
  out.hbm_capacity_bytes = c.chip.hbm_bytes;
  out.fits_hbm = out.peak_hbm_bytes <= out.hbm_capacity_bytes;
  out.host_capacity_bytes = c.chip.pinned_host_bytes;
  out.fits_host = out.host_offload_bytes <= out.host_capacity_bytes;
  return out;
}

bool is_layer(const StepPart& p) {
  return p.name == "attention layer" || p.name == kDenseMlpLayer || p.name == "gdn layer";
}

StepPrediction predict_step(const StepConfig& c) {
  StepPrediction out = predict_memory(c);  // checks the configuration first
  out.timed = true;
  const LocalSizes l = c.local();
  const ModelConfig& m = c.model;
  // Every part is built and checked before any is simulated, so a configuration whose kernels
  // cannot exist fails at once.
  const LayerPrograms attention = m.attention_layers() > 0 ? attention_part(c, l) : LayerPrograms{};
  const StepConfig dense = with_dense_mlp(c);
  const LayerPrograms dense_mlp =
      m.moe.dense_layers > 0 ? attention_part(dense, l) : LayerPrograms{};
  const LayerPrograms gdn = m.gdn_layers() > 0 ? gdn_part(c, l) : LayerPrograms{};
  const Program logits = logits_part(c, l), update = optimizer_part(c);
  auto layer = [&](const StepConfig& of, const std::string& name, int64_t count,
                   const LayerPrograms& p, int64_t params, PartKind kind) {
    GatherWindows windows;
    const int64_t fsdp = of.mesh.fsdp * of.mesh.context * of.mesh.expert;
    StepPart part = simulate_part(of, name, count, carrying_gathers(p.program, fsdp),
                                  /*in_backward=*/true, p.forward_weights, &windows);
    const CollectiveTime t = layer_collectives(of, params, kind, part.forward_s, windows.backward_s,
                                               out.backward_gathers_prefetched, windows.forward);
    const CollectiveTime host = host_offload(of, kind, part.forward_s, part.backward_s);
    part.collective_s = t.total_s + host.total_s;
    part.exposed_s = t.exposed_s + host.exposed_s;
    out.parts.push_back(part);
  };
  if (m.attention_layers() > m.moe.dense_layers)
    layer(c, "attention layer", m.attention_layers() - m.moe.dense_layers, attention,
          m.attention_layer_params(), PartKind::attention_layer);
  if (m.moe.dense_layers > 0)
    layer(dense, kDenseMlpLayer, m.moe.dense_layers, dense_mlp,
          dense.model.attention_layer_params(), PartKind::attention_layer);
  if (m.gdn_layers() > 0)
    layer(c, "gdn layer", m.gdn_layers(), gdn, m.gdn_layer_params(), PartKind::gdn_layer);
  StepPart emb = simulate_part(c, "embedding + logits", 1, logits, /*in_backward=*/true);
  // Nothing hides the embedding's and the logits' collectives: all of them are exposed.
  emb.collective_s = emb.exposed_s =
      layer_collectives(c, m.embedding_params(), PartKind::embedding, emb.forward_s, emb.backward_s,
                        out.backward_gathers_prefetched)
          .total_s;
  out.parts.push_back(emb);
  out.parts.push_back(simulate_part(c, "optimizer", 1, update, /*in_backward=*/false));
  if (c.mesh.data > 1) {
    StepPart dcn;
    dcn.name = "data-parallel gradient all-reduce (DCN)";
    double layers_backward = 0;
    for (const StepPart& p : out.parts)
      if (is_layer(p)) layers_backward += p.backward_s * p.count;
    const CollectiveTime t = dcn_gradient_all_reduce(c, layers_backward);
    dcn.collective_s = t.total_s;
    dcn.exposed_s = t.exposed_s;
    out.parts.push_back(dcn);
  }
  StepPart dispatch;
  dispatch.name = "host dispatch";
  dispatch.compute_s = c.chip.host_dispatch_s;
  dispatch.time_s[static_cast<int>(Cause::dispatch)] = c.chip.host_dispatch_s;
  out.parts.push_back(dispatch);

  for (const StepPart& p : out.parts) out.step_time_s += p.count * (p.compute_s + p.exposed_s);
  out.tokens_per_s_per_chip = l.tokens / c.mesh.tensor / out.step_time_s;
  out.tflops_per_s_per_chip = out.model_flops_per_chip / out.step_time_s / 1e12;
  out.mfu = out.tflops_per_s_per_chip * 1e12 / c.chip.peak_bf16_flops;
  return out;
}

std::vector<BatchSplit> batch_split(const StepConfig& c, const StepPrediction& at_b) {
  StepConfig doubled = c;
  doubled.batch_per_chip = 2 * c.batch_per_chip;
  const StepPrediction at_2b = predict_step(doubled);
  auto share = [](const StepPart& p) { return p.count * (p.compute_s + p.exposed_s); };
  std::vector<BatchSplit> out;
  for (const StepPart& part : at_b.parts) {
    const auto twice = std::find_if(at_2b.parts.begin(), at_2b.parts.end(),
                                    [&](const StepPart& p) { return p.name == part.name; });
    if (twice == at_2b.parts.end()) continue;
    const double b = static_cast<double>(c.batch_per_chip);
    const double per_sample = (share(*twice) - share(part)) / b;
    out.push_back({part.name, share(part) - b * per_sample, per_sample});
  }
  return out;
}

}  // namespace tpusim
