// Generic kernels that exercise the engine: the blocked Pallas matmul of the Pallas TPU guide,
// XLA's dot (its own tiling), and an HBM-bound elementwise kernel.
#pragma once
#include <cstdint>
#include <memory>

#include "sim/chip_spec.h"
#include "sim/ir/kernel.h"

namespace tpusim::kernels {

struct MatmulShape {
  int64_t m = 0, k = 0, n = 0;
  int64_t bm = 0, bk = 0, bn = 0;
  DType dtype = DType::bf16;  // inputs and output (s8 inputs give a bf16 output); accumulation is
                              // f32 (s32 for s8) in VMEM scratch
};

// The Pallas guide's kernel: grid (m/bm, n/bn, k/bk), semantics (parallel, parallel, arbitrary),
// x block (bm, bk) at (i, k), y block (bk, bn) at (k, j), z block (bm, bn) at (i, j); an f32
// accumulator zeroed at k == 0, acc += x @ y each step, z = acc at the last k.
std::shared_ptr<const Kernel> pallas_matmul(const MatmulShape& s);

// An XLA dot: the same loop nest with tiles XLA would pick: the largest tiles from
// {128 ... 2048} that fit the scoped VMEM limit, preferring the least HBM traffic.
std::shared_ptr<const Kernel> xla_dot(const ChipSpec& chip, int64_t m, int64_t k, int64_t n,
                                      DType dtype = DType::bf16);

// MaxText's megablox grouped matmul (a Pallas kernel, base.yml wi_tile_* and wo_tile_*: 512 rows x
// 1024 x 1024) with routing taken as balanced: each row tile belongs to one group and reads that
// group's weight tiles, which moves the bytes and does the work of one blocked matmul of m rows,
// the groups' rows each padded to the row tile (megablox_rows). Its transposed form (tgmm, the
// weights' gradient) is the same nest with m = groups x the output rows and k = a group's rows.
std::shared_ptr<const Kernel> grouped_matmul(int64_t m, int64_t k, int64_t n);

// A group's rows padded to megablox's row tile: 512, or the rows rounded up to 8 when fewer.
int64_t megablox_rows(int64_t rows);

// y = x * 2 over a [rows, cols] array in blocks of (block_rows, cols): one load, one multiply and
// one store per element, so HBM bandwidth bounds it.
std::shared_ptr<const Kernel> elementwise_scale(int64_t rows, int64_t cols, int64_t block_rows,
                                                DType dtype = DType::f32);

}  // namespace tpusim::kernels
