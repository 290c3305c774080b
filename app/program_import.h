// Programs exported from JAX by the bridge (python/tpusim_jax, docs/jax_bridge.md) read into the
// same IR the kernel builders produce, strictly: an unknown field, a missing one, a bad shape, a
// dangling value id or an op the IR cannot hold is one error naming file:line:column and the key.
// The functional check runs tpusim's interpreter on the inputs JAX ran and compares the outputs.
#pragma once
#include <string>
#include <vector>

#include "kernels/catalog.h"
#include "sim/functional/interpreter.h"
#include "sim/ir/program.h"

namespace tpusim {

struct ImportedProgram {
  std::string file, name, source;
  Program program;
  std::vector<std::string> outputs;  // the function's results, by array name
  bool functional = true;  // false: it has XLA work outside kernels, which only has timing
};

ImportedProgram import_program(const std::string& file);

// Whether `file` is a program of the bridge (its "format"), so the GUI can tell it from a scenario.
bool is_program_file(const std::string& file);

// The program as a catalog kernel without knobs ("imported:NAME"), so the GUI's menu lists it.
kernels::CatalogEntry catalog_entry(const ImportedProgram& p);

// One output of the functional check: JAX's result against tpusim's interpreter.
struct OutputCheck {
  std::string name;
  double max_abs_error = 0, max_abs_reference = 0, tolerance = 0;
  std::string rounding;  // what sets the tolerance: bf16, bf16x3 or f32 (app/check_tolerance.h)
  bool ok = false;
};

// Reads the check data the bridge wrote (`export --check FILE`: inputs and JAX's outputs), runs
// the program on the inputs and compares every output, within the tolerance of the rounding the
// program involves (app/check_tolerance.h).
std::vector<OutputCheck> check_program(const ImportedProgram& p, const std::string& check_file);

}  // namespace tpusim
