// Static checks on a kernel before it runs: block shapes obey the TPU tiling rule, and the VMEM
// the kernel needs (pipelined blocks x buffer count + scratch + live body temporaries) fits.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/ir/kernel.h"

namespace tpusim {

struct VmemItem {
  std::string what;  // e.g. "input x block [512,1024] bf16 x2 buffers"
  int64_t bytes = 0;
};

struct VmemUsage {
  std::vector<VmemItem> items;  // blocks and scratch, then one item for peak live temporaries
  int64_t total_bytes = 0;
};

// Throws Error for a block whose last two dims are neither multiples of (8, 128) nor the array's
// full dims, for an index map of the wrong rank, and for a grid whose blocks run past the array.
void check_block_shapes(const Kernel& k);

VmemUsage vmem_usage(const Kernel& k);

// Throws VmemError naming the largest buffers, their bytes and the limit when usage exceeds it.
void check_vmem(const Kernel& k, const VmemUsage& usage, int64_t limit_bytes,
                const std::string& limit_name);

std::string format_bytes(int64_t bytes);

}  // namespace tpusim
