// What one HLO instruction (a fusion, or a lone op) costs, read from the compiled program, and a
// kernel that does that work in tpusim's IR:
//  - HBM bytes per operand as the fusion touches them: a (dynamic-)slice reads its slice, a
//    dynamic-update-slice writes its update in place, an operand or result the compiler placed in
//    VMEM (S(1)) moves nothing;
//  - VPU elements (arithmetic, comparisons, selects, converts, reductions over their inputs,
//    reduce-windows over their windows), EUP elements (exp, log, tanh, logistic, rsqrt, ...);
//    data movement (broadcast, transpose, slices, concatenate, pad, iota) is taken as free
//    [assume: it rides along the loads and stores of the fused loop];
//  - dots and convolutions with their batch, M, K, N, operand dtypes and operand precision
//    (a convolution whose lhs_dilate equals its window is the TPU's batched dot: its spatial
//    dims are the batch).
// The kernel streams the bytes through a 1-D grid whose steps fit XLA's scoped VMEM budget,
// each step doing its share of the elementwise, transcendental and MXU work.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/hlo_text.h"
#include "sim/ir/kernel.h"
#include "sim/ir/program.h"

namespace tpusim {

struct HloDot {
  int64_t batch = 1, m = 1, k = 1, n = 1;
  DType lhs = DType::bf16, rhs = DType::bf16;
  Precision precision = Precision::default_;
};

struct HloTraffic {
  std::string name;
  DType dtype = DType::f32;
  int64_t bytes = 0;
};

struct HloWork {
  std::vector<HloTraffic> reads, writes;
  int64_t vpu_elements = 0, eup_elements = 0;
  int64_t lane_reduced_rows = 0;  // rows a reduction sums over the lanes (the XLU's work)
  std::vector<HloDot> dots;
  // The devices of the async collective a fusion carries (XLA's async collective fusion runs a
  // collective's ring steps inside the fusions beside it; 0: none): Kernel::carried_group.
  int64_t carried_group = 0;
};

HloWork work_of(const HloModule& m, const HloComputation& comp, const HloInstruction& in);
std::shared_ptr<const Kernel> work_kernel(const std::string& name, const HloWork& w);

// A custom call XLA's TPU backend emits itself (not a Pallas kernel); an Error for targets
// without a model.
Program custom_call_program(const HloModule& m, const HloInstruction& in,
                            const std::string& target);

DType dtype_of_hlo(const std::string& hlo_dtype);

// The collective an opcode runs (all-gather, all-reduce, reduce-scatter, all-to-all,
// collective-permute, and their -start halves), nullopt for any other.
std::optional<CollectiveKind> collective_kind(const std::string& opcode);

// Whether a fused computation's result `r` hands on what the fusion was given rather than
// computing it: a parameter passed through, or a collective the fusion carries (XLA's async
// collective fusions) - not the core's work.
bool hands_on(const HloInstruction& r);

}  // namespace tpusim
