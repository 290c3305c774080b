// One GDN layer core (gdn_kernels.md stages 0-5 and their backward) for one training step under
// remat "full": the forward, its recompute in the backward pass, then the backward. Each build of
// the kernel change (MaxText PR #4348) swaps one part:
//   main    XLA solve_triangular + lax.scan over chunks (state in HBM)
//   scan    + the inter-chunk scan kernels (state in VMEM), one head per grid cell
//   heads   + head batching: scan forward 8 heads, backward 4 heads per grid cell
//   ladder  + the inversion ladder kernel (8 chunk tiles per cell) and its XLA VJP
// and beside them, from a later MaxText change (PR #4577, measured_runs.md C4):
//   doubling  main with solve_triangular replaced by the log-depth doubling inverse in XLA
// Under context parallelism (main only) each pass also folds the local chunks into an affine map
// and takes the prefix across devices before the scan replays the chunks (gdn_kernels.md 7).
// Items carry stage labels ("fwd: inversion", "bwd: scan", ...) for the per-stage breakdown.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "kernels/gdn/shape.h"
#include "sim/ir/program.h"

namespace tpusim::kernels::gdn {

enum class Build { main, scan, heads, ladder, doubling };

struct LayerOptions {
  Build build = Build::ladder;
  // 0: the build's default, MaxText's _head_tile (the first of 8, 4, 2 dividing the heads; at
  // most 4 in the backward) in the batched builds, 1 otherwise.
  int64_t head_tile_fwd = 0;
  int64_t head_tile_bwd = 0;
  int64_t tile_n = 0;  // 0: the build's default (MaxText's first of 8, 4, 2 dividing N)
  // Context parallelism: the sequence is sharded over this axis and the shape holds the local
  // tokens. Only the lax.scan path composes the state across devices (MaxText PR #4968), so
  // only the main build runs with it.
  std::optional<MeshAxis> context = std::nullopt;
};

inline constexpr Build kBuilds[] = {Build::main, Build::scan, Build::heads, Build::ladder,
                                    Build::doubling};

Build parse_build(const std::string& name);  // throws Error listing the builds
std::string name(Build b);
// The build each one changes: scan <- main, heads <- scan, ladder <- heads, doubling <- main.
std::optional<Build> base(Build b);
// Whether the build runs MaxText's lax.scan path (main, doubling), the only one whose GDN
// composes the state across context-parallel shards (PR #4968).
bool uses_lax_scan(Build b);
std::vector<std::string> build_names();  // of kBuilds, in order

Program layer_core(const GdnShape& s, const LayerOptions& o);

}  // namespace tpusim::kernels::gdn
