// The bridge's items for work outside Pallas kernels (docs/jax_bridge.md, "Work outside
// kernels"): a fusion written as HLO ops, costed by the same rules as a fusion of the compiled
// program (app/hlo_work: bytes as it touches them, VPU/EUP elements, dots), and a triangular solve,
// run as XLA's TPU backend runs it at C <= 128 (one InvertDiagBlocksLowerTriangular custom call,
// then a HIGHEST product). They are timing schedules: the functional interpreter does not run them.
#pragma once
#include <memory>

#include "models/yaml_map.h"
#include "sim/ir/kernel.h"
#include "sim/ir/program.h"

namespace tpusim {

// {"name", "source", "params": [{name, opcode: parameter, shape, dtype}], "ops": [{name, opcode,
// shape, dtype, operands, dims?, precision?}], "results": [names]}.
std::shared_ptr<const Kernel> xla_fusion_kernel(const YamlMap& m);

// {"name", "a": {...}, "b": {...}, "left_side", "lower", "transpose_a", "unit_diagonal"}.
Program triangular_solve_program(const YamlMap& m);

}  // namespace tpusim
