// A program: what one chip runs for a jitted call or a training step. Kernel calls (Pallas kernels
// and XLA ops) run one after another on the TensorCores; collectives run asynchronously on ICI and
// overlap compute (collectives over one mesh axis, by name, one after another on its links; other
// axes' beside them); an item starts only after the items it depends on have finished.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "sim/ir/kernel.h"

namespace tpusim {

struct KernelCall {
  std::shared_ptr<const Kernel> kernel;
};

// An XLA while loop: `trips` iterations of the body kernels in order; each iteration pays the
// chip's while-loop overhead once.
struct Loop {
  std::vector<std::shared_ptr<const Kernel>> body;
  int64_t trips = 1;
};

enum class CollectiveKind : uint8_t { all_gather, reduce_scatter, all_reduce, permute, all_to_all };

// One mesh axis a collective runs over. `wraparound` is true for a torus ring on this axis.
struct MeshAxis {
  std::string name;
  int64_t size = 1;
  bool wraparound = false;
  // Torus dimensions the axis spans: each adds its links to the ring; 0: every dimension a group
  // of its size spans on the chip (torus_dims_spanned, sim/timing/collectives.h).
  int torus_dims = 1;
  bool dcn = false;   // across slices over the data-centre network instead of ICI
  bool host = false;  // between the chip and its host's pinned memory, over the host link
};

// The host link as an axis: a copy to or from pinned host memory (the remat policy's offload) is
// a transfer of `bytes` over it, asynchronous like a collective.
inline MeshAxis host_link() { return {"host link", 2, false, 1, false, true}; }

struct Collective {
  CollectiveKind kind = CollectiveKind::all_gather;
  // all_gather: bytes of the gathered result; reduce_scatter / all_reduce: bytes of the full input;
  // permute: bytes each device sends.
  int64_t bytes = 0;
  MeshAxis axis;
};

struct ProgramItem {
  std::string name;
  std::variant<KernelCall, Collective, Loop> what;
  std::vector<int> deps;  // indices of earlier items
  std::string stage;      // a grouping for reports (e.g. "scan fwd"); empty: the item's name
  // Which program buffer each of the kernel's HBM arrays is, for liveness (sim/ir/liveness.h):
  // no entry: the array's own name; no buffers: held elsewhere (a weight, the saved layer input),
  // not this program's; several: the array is their concatenation (q, k and v as one dot's
  // operand), which their other uses size.
  std::map<std::string, std::vector<std::string>> buffers;
};

// The kernels an item runs: its call's, or its loop's body (a collective runs none).
std::vector<const Kernel*> kernels_of(const ProgramItem& item);

// Stage labels of a training step's programs begin with the pass they run in: "fwd: ...",
// "remat: ..." (the recompute) or "bwd: ...".
bool is_forward_stage(const std::string& stage);
bool is_recompute_stage(const std::string& stage);

struct Program {
  std::string name;
  std::vector<ProgramItem> items;

  int add_kernel(std::shared_ptr<const Kernel> k, std::vector<int> deps = {},
                 std::string stage = "");
  int add_loop(std::string name, std::vector<std::shared_ptr<const Kernel>> body, int64_t trips,
               std::vector<int> deps = {});
  // Appends every item of `other` (its dependencies shifted), labelled with `stage` where unset.
  void append(const Program& other, const std::string& stage = "");
  int add_collective(std::string name, Collective c, std::vector<int> deps = {});
};

}  // namespace tpusim
