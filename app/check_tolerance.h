// How far tpusim's interpreter may be from JAX on the CPU, by the rounding the program involves
// (the functional check of `kernel import --check`):
//  - bf16: a DEFAULT-precision dot with an f32 operand (the TPU and the interpreter round it to
//    bf16, JAX on the CPU does not), a bf16 output, or a computed value cast to bf16 (an f32-level
//    difference before the cast can flip its last bit): 2 bf16 ulps of the largest reference value;
//  - bf16x3: a HIGH dot with an f32 operand (three bf16 passes), or a value split by hand into a
//    bf16 head and the bf16 of its remainder (x -> hi = bf16(x), lo = bf16(x - hi)), whose
//    products keep about 16 significant bits: 4 x 2^-16 of the largest reference value;
//  - f32: otherwise (f32 arithmetic, HIGHEST dots): 1e-5 of the largest reference value.
#pragma once
#include <string>

#include "sim/ir/program.h"

namespace tpusim {

enum class Rounding { f32, bf16x3, bf16 };

// The coarsest rounding on the way to an output of dtype `output`.
Rounding rounding_of(const Program& p, DType output);
double relative_tolerance(Rounding r);
std::string name(Rounding r);

}  // namespace tpusim
