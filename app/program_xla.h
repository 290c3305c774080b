// The items of a bridge program (docs/jax_bridge.md), and those for work outside Pallas kernels
// ("Work outside kernels"): a fusion written as HLO ops, costed by the same rules as a fusion of
// the compiled program (app/hlo_work: bytes as it touches them, VPU/EUP elements, dots), and a
// triangular solve, run as XLA's TPU backend runs it at C <= 128 (one
// InvertDiagBlocksLowerTriangular custom call, then a HIGHEST product), a collective over mesh
// axes. They are timing schedules: the functional interpreter does not run them.
#pragma once
#include <functional>
#include <memory>

#include "models/yaml_map.h"
#include "sim/ir/kernel.h"
#include "sim/ir/program.h"

namespace tpusim {

// Reads the program's `items` in order into `program`: kernels (read by `kernel_of`), XLA
// fusions, solves, loops of those, and collectives. A collective waits for the item before it
// (kernels run one after another, so everything before it has finished) and the first items that
// read its results wait for it; the kernels in between overlap it.
void read_items(const YamlMap& top,
                const std::function<std::shared_ptr<const Kernel>(const YamlMap&)>& kernel_of,
                Program& program);

// {"name", "source", "params": [{name, opcode: parameter, shape, dtype}], "ops": [{name, opcode,
// shape, dtype, operands, dims?, precision?}], "results": [names]}.
std::shared_ptr<const Kernel> xla_fusion_kernel(const YamlMap& m);

// {"name", "a": {...}, "b": {...}, "left_side", "lower", "transpose_a", "unit_diagonal"}.
Program triangular_solve_program(const YamlMap& m);

}  // namespace tpusim
