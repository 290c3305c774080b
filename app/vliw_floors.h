// The compiled program's own VLIW schedule as a floor on its kernels' time (`run --hlo
// --vliw-floors`). A compile made with --vliw-floors holds, per HLO instruction, the length in
// cycles of libtpu's final bundles for it (python/tpusim_jax/bundles.py: each loop body times its
// trips, or the busiest MXU's pushes if longer). It leaves out every wait on HBM, DMA and
// collectives but counts the branch-guarded regions of a loop body on every trip, so it is an
// estimate, not a bound (docs/compiler_import.md, "The VLIW schedule as a floor"). Where the
// units modelled here finish sooner, the op's vector work (a dot's result pops and accumulation,
// a layout change, a scatter) was not all counted.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/ir/program.h"

namespace tpusim {

// The record's floors by instruction name ({} if it has none); `path` for errors.
std::map<std::string, int64_t> vliw_floors_of(const nlohmann::json& record,
                                              const std::string& path);

// `p` with each XLA kernel named in `floors` given its floor; returns how many kernels got one.
int apply_vliw_floors(Program& p, const std::map<std::string, int64_t>& floors);

// The floors the compile `record` holds (read from `path`) applied to `p`: an error if none
// applies (a compile made without --vliw-floors).
int apply_recorded_vliw_floors(Program& p, const nlohmann::json& record, const std::string& path);

}  // namespace tpusim
