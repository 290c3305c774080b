// The HBM buffers a program holds live, from the arrays its kernels read and write: each array
// name is one buffer (or the buffers its item maps it to, ProgramItem::buffers), allocated at its
// first write (or, never written, held from the start: an argument) and freed after its last read
// (never read after its last write: an output, held to the end). Inside a while loop, "x[n]" is
// iteration n's slice of the array x (trips slices); an array the body writes without reading it
// first and that is read after the loop is stacked per iteration (a scan's residuals: trips
// copies); a carry (read, then written) and the body's intermediates are one copy. Sizes are padded
// to the TPU's HBM tiling: size-1 dims aside (XLA lays them out of the way), the minor dim to 128
// lanes, the second-minor to 8 rows of 32-bit words (16 of bf16, 32 of int8).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/ir/program.h"

namespace tpusim {

struct LiveBuffer {
  std::string name;
  int64_t bytes = 0;
  int first = 0, last = 0;  // the items (of those considered) it is live over, inclusive
};

struct Liveness {
  std::vector<LiveBuffer> buffers;
  int64_t peak_bytes = 0;
  int peak_item = -1;               // index into the program's items
  std::vector<LiveBuffer> at_peak;  // the buffers live there, largest first
};

// Over the items `include` accepts (all when empty); collectives hold no buffers here.
Liveness hbm_liveness(const Program& p,
                      const std::function<bool(const ProgramItem&)>& include = {});

}  // namespace tpusim
