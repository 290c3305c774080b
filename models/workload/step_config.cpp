#include "models/workload/step_config.h"

#include <fmt/format.h>

namespace tpusim {

void check_config(const StepConfig& c) {
  const ModelConfig& m = c.model;
  const Mesh& x = c.mesh;
  // Each axis at most the slice first: the product of absurd sizes would overflow.
  for (const auto& [axis, size] : {std::pair{"fsdp", x.fsdp},
                                   {"tensor", x.tensor},
                                   {"context", x.context},
                                   {"expert", x.expert}})
    if (size > c.chips_per_slice)
      throw ConfigError("mesh", fmt::format("{} {} is more than the {} chips of the slice", axis,
                                            size, c.chips_per_slice));
  if (x.fsdp * x.tensor * x.context * x.expert != c.chips_per_slice)
    throw ConfigError(
        "mesh",
        fmt::format("fsdp {} x tensor {} x context {}{} = {} is not the {} chips of the slice",
                    x.fsdp, x.tensor, x.context,
                    x.expert > 1 ? fmt::format(" x expert {}", x.expert) : "",
                    x.fsdp * x.tensor * x.context * x.expert, c.chips_per_slice));
  if (x.expert > 1 && (!m.is_moe() || m.moe.experts % x.expert != 0))
    throw ConfigError("mesh.expert",
                      m.is_moe() ? fmt::format("expert parallelism {} does not divide {} experts",
                                               x.expert, m.moe.experts)
                                 : "expert parallelism needs a mixture-of-experts model");
  if (m.is_moe() && x.tensor > 1 && m.moe.mlp_dim % x.tensor != 0)
    throw ConfigError("mesh.tensor", fmt::format("tensor parallelism {} does not divide the "
                                                 "expert width {}",
                                                 x.tensor, m.moe.mlp_dim));
  if (x.tensor > 1 && (m.q_heads % x.tensor != 0 || m.mlp_dim % x.tensor != 0))
    throw ConfigError("mesh.tensor",
                      fmt::format("tensor parallelism {} does not divide {} heads and MLP {}",
                                  x.tensor, m.q_heads, m.mlp_dim));
  if (c.seq < 1 || c.batch_per_chip < 1)
    throw ConfigError("seq", fmt::format("seq {} and batch per chip {} must be positive", c.seq,
                                         c.batch_per_chip));
  if (c.seq % x.context != 0)
    throw ConfigError("mesh.context",
                      fmt::format("seq {} does not split over context {}", c.seq, x.context));
  const LocalSizes l = c.local();
  if (c.vocab_tiles < 1 || l.tokens % c.vocab_tiles != 0)
    throw ConfigError("vocab_tiling",
                      fmt::format("vocab tiling {} does not split the {} tokens of a chip",
                                  c.vocab_tiles, l.tokens));
  if (m.gdn_layers() > 0 && l.seq % c.gdn_chunk != 0)
    throw ConfigError("gdn.chunk",
                      fmt::format("the local sequence {} (seq {} / context {}) is not a multiple "
                                  "of the GDN chunk {}",
                                  l.seq, c.seq, x.context, c.gdn_chunk));
  if (x.context > 1 && m.gdn_layers() > 0 && !kernels::gdn::uses_lax_scan(c.gdn.build))
    throw ConfigError(
        "gdn.build",
        fmt::format("context parallelism runs the GDN only in MaxText's lax.scan path (PR "
                    "#4968): build '{}' (PR #4348's kernels) does not compose the state across "
                    "context shards; use build main or doubling",
                    kernels::gdn::name(c.gdn.build)));
}

}  // namespace tpusim
