// The functional engine: executes the same kernels and programs the timing engine plays, on
// numbers, with the dtype and precision rules of the TPU:
//   - bf16 values are stored as f32 rounded to bf16 (round to nearest even);
//   - a dot on bf16 operands, or on f32 operands at DEFAULT precision (Mosaic's default f32 dot),
//     rounds its operands to bf16 and accumulates in f32;
//   - HIGH splits each f32 operand into bf16 hi + lo and sums hi*hi + hi*lo + lo*hi (bf16x3);
//   - HIGHEST is exact f32 (what six bf16 passes achieve).
// Arrays are bound by name. Grid steps run in lexicographic order with Pallas block semantics: an
// output block stays resident while its index does not change and is written back when it does;
// new output blocks and scratch start as NaN so that a schedule reading unwritten data shows it.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "sim/ir/program.h"

namespace tpusim {

struct HostArray {
  Shape shape;
  DType dtype = DType::f32;
  std::vector<float> data;  // row-major

  static HostArray zeros(Shape shape, DType dtype);
};

using ArrayMap = std::map<std::string, HostArray>;

float round_to_bf16(float x);
// Rounds every element to `dtype` (a no-op for f32).
void round_to(std::vector<float>& data, DType dtype);

// Runs `k`: inputs are read from `arrays` by array name (shape and dtype must match the kernel's
// BlockSpec arrays); outputs are created or overwritten.
void execute(const Kernel& k, ArrayMap& arrays);

// Runs every kernel call of `p` in order (loops `trips` times); collectives move no data here.
void execute(const Program& p, ArrayMap& arrays);

}  // namespace tpusim
