#include "sim/timing/collectives.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace tpusim {

int torus_dims_spanned(const ChipSpec& chip, int64_t chips) {
  const int log2_chips = std::bit_width(static_cast<uint64_t>(std::max<int64_t>(1, chips))) - 1;
  return std::min(chip.ici_dims, std::max(2, log2_chips));
}

double collective_seconds(const ChipSpec& chip, const Collective& c) {
  return collective_link_seconds(chip, c) + collective_latency_seconds(chip, c);
}

double collective_link_seconds(const ChipSpec& chip, const Collective& c) {
  const double n = static_cast<double>(c.axis.size);
  if (n <= 1 || c.bytes <= 0) return 0;
  const double bytes = static_cast<double>(c.bytes);
  if (c.axis.host) return bytes / chip.host_link_bytes_per_s;
  if (c.axis.dcn) {
    const double share = c.kind == CollectiveKind::all_reduce ? 2 * (n - 1) / n : (n - 1) / n;
    return share * bytes / chip.dcn_bytes_per_s_per_chip;
  }
  // A wraparound ring sends half the data each way; a line without wraparound effectively one way.
  // An axis over several torus dimensions drives each dimension's links at once.
  const int dims = c.axis.torus_dims > 0 ? c.axis.torus_dims
                                         : torus_dims_spanned(chip, c.axis.size);
  const double bw =
      chip.ici_efficiency * chip.ici_link_bytes_per_s * (c.axis.wraparound ? 2.0 : 1.0) * dims;
  const double side = std::pow(n, 1.0 / dims);
  const double hops = dims * (c.axis.wraparound ? side / 2 : side - 1);
  switch (c.kind) {
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
      return (n - 1) / n * bytes / bw + hops * chip.ici_hop_latency_s;
    case CollectiveKind::all_reduce:  // reduce-scatter followed by all-gather
      return 2 * ((n - 1) / n * bytes / bw + hops * chip.ici_hop_latency_s);
    case CollectiveKind::permute:
      return bytes / (chip.ici_efficiency * chip.ici_link_bytes_per_s) + chip.ici_hop_latency_s;
    case CollectiveKind::all_to_all: {
      // [derived] Each chip sends (n-1)/n of its bytes, a share to every other chip, routed
      // dimension by dimension: a share crosses on average s^2 / (4 (s - 1)) links of each
      // dimension of side s on a ring ((s + 1) / 3 on a line), every link busy at once.
      const double mean_hops = c.axis.wraparound ? side * side / (4 * (side - 1)) : (side + 1) / 3;
      return (n - 1) / n * bytes * dims * mean_hops / bw + hops * chip.ici_hop_latency_s;
    }
  }
  return 0;
}

double collective_latency_seconds(const ChipSpec& chip, const Collective& c) {
  const double n = static_cast<double>(c.axis.size);
  if (!c.axis.dcn || n <= 1 || c.bytes <= 0) return 0;
  const double ring_steps = c.kind == CollectiveKind::all_reduce ? 2 * (n - 1) : n - 1;
  return ring_steps * chip.dcn_slice_latency_s;
}

}  // namespace tpusim
