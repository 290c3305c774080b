#include "app/why_slow.h"

#include <fmt/format.h>

#include <algorithm>

#include "app/op_profile.h"

namespace tpusim {

namespace {

struct CauseText {
  const char* what;    // what the time is
  const char* remedy;  // what usually shortens it
};

CauseText text_of(Cause c) {
  switch (c) {
    case Cause::dma_wait:
      return {
          "blocks not yet in from HBM, or output slots not yet drained: the kernel moves more "
          "bytes than HBM streams in its compute time",
          "move fewer bytes (bf16 blocks, fused stages), or give HBM more compute to hide "
          "behind (larger blocks reuse each byte more)"};
    case Cause::dependency:
      return {
          "an op waiting on the op before it: a sequential chain (a scan's state, a solve's "
          "rows) that no unit can run ahead of",
          "widen each link of the chain instead of lengthening it: batch heads or tiles per "
          "grid cell (head_tile, tile_n), so the same number of dependent steps does more work"};
    case Cause::mxu_fill_drain:
      return {
          "the MXUs filling and draining between dependent products: each product waits for "
          "the one before to leave the array",
          "issue independent products back to back (batch heads per grid cell, batched 3-D "
          "dots), so the pipeline stays full"};
    case Cause::step_overhead:
      return {"scalar work between grid steps: small blocks make many short steps",
              "larger blocks (fewer grid steps), as far as VMEM allows"};
    case Cause::loop_overhead:
      return {"the cost of each iteration of XLA while loops (lax.scan)",
              "fewer, larger iterations, or a Pallas kernel that keeps the loop on chip"};
    case Cause::collective:
      return {"waiting for a collective on ICI or DCN",
              "overlap it with independent work, or shard so less crosses the links"};
    case Cause::dispatch:
      return {"host dispatch before the device starts", "larger programs per launch (jit more)"};
    case Cause::idle:
      return {
          "this TensorCore done while the other still works: the grid splits unevenly over "
          "the two cores",
          "a leading parallel grid axis the cores split evenly"};
    case Cause::vliw_schedule:
      return {
          "the compiled program's VLIW schedule (libtpu's bundles) is longer than the work of "
          "the units modelled: vector work the model does not count (a dot's result pops and "
          "accumulation, a layout change, a scatter)",
          "fuse less vector work into the dot, or keep layouts that need no shuffles"};
    default:
      return {"", ""};
  }
}

}  // namespace

std::vector<std::string> why_slow(const RunResult& r, const ChipSpec& chip) {
  std::vector<std::string> lines;
  if (r.cycles <= 0) return lines;
  auto share = [&](Cause c) { return static_cast<double>(r.time[static_cast<int>(c)]) / r.cycles; };
  lines.push_back(fmt::format("{:.4f} ms; the critical TensorCore is busy {:.0f}% of it",
                              r.time_s * 1e3, 100 * share(Cause::busy)));
  std::vector<Cause> stalls;
  for (int c = 0; c < kNumCauses; ++c)
    if (static_cast<Cause>(c) != Cause::busy && r.time[c] > 0)
      stalls.push_back(static_cast<Cause>(c));
  std::sort(stalls.begin(), stalls.end(), [&](Cause a, Cause b) { return share(a) > share(b); });
  for (size_t i = 0; i < std::min<size_t>(3, stalls.size()); ++i)
    if (share(stalls[i]) >= 0.01)
      lines.push_back(fmt::format("{:.0f}% {}: {}", 100 * share(stalls[i]),
                                  std::string(name(stalls[i])), text_of(stalls[i]).what));
  const std::vector<OpProfileRow> ops = op_profile(r, chip);
  for (size_t i = 0; i < std::min<size_t>(3, ops.size()); ++i)
    if (ops[i].share >= 0.1)
      lines.push_back(fmt::format("{:.0f}% in {} ({} call{}): {}-bound", 100 * ops[i].share,
                                  ops[i].name, ops[i].calls, ops[i].calls == 1 ? "" : "s",
                                  ops[i].bound));
  // The largest stall the device can do something about (dispatch is the host's).
  const auto device =
      std::find_if(stalls.begin(), stalls.end(), [](Cause c) { return c != Cause::dispatch; });
  if (device != stalls.end() && share(*device) >= 0.05)
    lines.push_back(fmt::format("what usually helps with {}: {}", std::string(name(*device)),
                                text_of(*device).remedy));
  return lines;
}

}  // namespace tpusim
