#include "kernels/gdn/layer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/gdn/invert.h"
#include "kernels/gdn/scan.h"
#include "kernels/gdn/xla.h"
#include "sim/error.h"

namespace tpusim::kernels::gdn {

Build parse_build(const std::string& n) {
  for (Build b : kBuilds)
    if (name(b) == n) return b;
  throw Error(fmt::format("unknown GDN build '{}' (known: {})", n, fmt::join(build_names(), ", ")));
}

std::vector<std::string> build_names() {
  std::vector<std::string> names;
  for (Build b : kBuilds) names.push_back(name(b));
  return names;
}

std::string name(Build b) {
  switch (b) {
    case Build::main:
      return "main";
    case Build::scan:
      return "scan";
    case Build::heads:
      return "heads";
    case Build::ladder:
      return "ladder";
    case Build::doubling:
      return "doubling";
  }
  return "?";
}

std::optional<Build> base(Build b) {
  switch (b) {
    case Build::main:
      return std::nullopt;
    case Build::scan:
    case Build::doubling:
      return Build::main;
    case Build::heads:
      return Build::scan;
    case Build::ladder:
      return Build::heads;
  }
  return std::nullopt;
}

bool uses_lax_scan(Build b) { return b == Build::main || b == Build::doubling; }

Program layer_core(const GdnShape& s, const LayerOptions& o) {
  s.check();
  const bool kernels = !uses_lax_scan(o.build);
  const bool batched = o.build == Build::heads || o.build == Build::ladder;
  const int64_t th_fwd = o.head_tile_fwd > 0 ? o.head_tile_fwd
                         : batched           ? default_tile(s.heads)
                                             : 1;
  const int64_t th_bwd = o.head_tile_bwd > 0 ? o.head_tile_bwd
                         : batched           ? default_tile(s.heads, 4)
                                             : 1;
  const int64_t tile_n = o.tile_n > 0 ? o.tile_n : default_tile(s.chunks());
  const bool cp = o.context && o.context->size > 1;
  if (cp && kernels)
    throw Error(fmt::format(
        "context parallelism over {} devices runs only in MaxText's lax.scan path (PR #4968); "
        "the '{}' build's kernels (PR #4348) do not compose the state across context shards "
        "(gdn_kernels.md 7): use build main or doubling",
        o.context->size, name(o.build)));

  Program p;
  p.name = fmt::format("gdn layer core ({})", name(o.build));
  auto forward = [&](const std::string& phase) {
    p.add_kernel(xla_prep(s), {}, phase + ": prep");
    p.add_kernel(xla_gates_s(s), {}, phase + ": gates + S");
    if (o.build == Build::ladder) {
      p.add_kernel(invert_ladder(s, tile_n), {}, phase + ": inversion");
    } else if (o.build == Build::doubling) {
      p.append(doubling_inverse(s), phase + ": inversion");
    } else {
      p.append(xla_solve_triangular(s), phase + ": inversion");
    }
    p.add_kernel(xla_wy(s), {}, phase + ": WY");
    if (cp) {
      p.append(xla_cp_compose_local(s, phase == "remat"), phase + ": cp compose");
      p.append(xla_cp_prefix(s, *o.context), phase + ": cp prefix");
    }
    if (kernels) {
      p.add_kernel(scan_forward(s, {th_fwd, Precision::default_}), {}, phase + ": scan");
    } else {
      p.append(xla_lax_scan_forward(s, phase == "remat"), phase + ": scan");
    }
  };
  forward("fwd");
  forward("remat");
  if (kernels) {
    p.add_kernel(scan_backward(s, {th_bwd, Precision::default_}), {}, "bwd: scan");
  } else {
    p.append(xla_lax_scan_backward(s), "bwd: scan");
  }
  if (cp) {
    p.append(xla_cp_prefix_backward(s, *o.context), "bwd: cp prefix");
    p.append(xla_cp_compose_local_backward(s), "bwd: cp compose");
  }
  p.add_kernel(xla_wy_backward(s), {}, "bwd: WY");
  if (o.build == Build::ladder) {
    p.append(invert_vjp(s), "bwd: inversion");
  } else if (o.build == Build::doubling) {
    p.append(doubling_vjp(s), "bwd: inversion");
  } else {
    // The transposed solve of the VJP reuses the recompute's inverse: the compiled training step
    // holds two InvertDiagBlocksLowerTriangular calls, not three (docs/kernels/gdn.md).
    p.add_kernel(xla_inverse_product(s), {}, "bwd: inversion");
    p.add_kernel(xla_solve_vjp_product(s), {}, "bwd: inversion");
  }
  p.add_kernel(xla_s_backward(s), {}, "bwd: S");
  p.add_kernel(xla_prep_backward(s), {}, "bwd: prep");
  return p;
}

}  // namespace tpusim::kernels::gdn
