// The collectives of an optimized HLO module: what an instruction moves and over how many devices.
//  - all-gather, all-reduce, reduce-scatter, all-to-all and collective-permute, and their -start
//    halves; XLA's TPU async collective fusions (a fusion whose root is the custom call
//    AsyncCollectiveStart starts the collective inside it; AsyncCollectiveDone ends it).
//  - Replica groups in each form XLA prints: explicit {{0,1},{2,3}}, iota [groups,size]<=[n], and
//    mesh axes mesh['axis_0'=16,'axis_1'=8] {'axis_0'} (with device_ids {'axis_0':(8)2}: 2
//    devices of the axis, 8 apart).
// A group runs as a ring over the torus dimensions the compiler's emitter names (backend_config
// collective_algorithm_config: StrategyND cores:{16 16} is two; 1DAllGather... one), its axis
// named by its replica groups (collectives over one axis share its links). A collective-permute
// is one hop to a neighbour over one link, each direction of a ring its own.
// A multi-slice step reduces over DCN by host transfers to the megascale runtime
// (_xla_megascale_transfer_type ALL_REDUCE or ALL_GATHER): the send starts the collective over
// the slices its _xla_megascale_target names, the recv of the same rendezvous delivers the result.
#pragma once
#include <optional>
#include <string>

#include "app/hlo_text.h"
#include "sim/ir/program.h"

namespace tpusim {

std::optional<Collective> hlo_collective(const HloModule& m, const HloInstruction& in);

// The rendezvous that pairs a host-transfer send with its recv, "" for other instructions.
std::string hlo_host_transfer_rendezvous(const HloInstruction& in);

// "AsyncCollectiveStart" or "AsyncCollectiveDone" for an async collective fusion, else "".
std::string hlo_async_collective_role(const HloModule& m, const HloInstruction& in);

}  // namespace tpusim
