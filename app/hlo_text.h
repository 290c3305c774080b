// Reads XLA's HLO text (as `compiled.as_text()` prints an optimized module, or the lowering
// before optimization) into computations of instructions: each with its shape (dtype, dims,
// the memory space the compiler chose: S(1) is VMEM), opcode, operands by name and attributes.
// It knows HLO's syntax, not what the ops cost (app/hlo_import does that).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tpusim {

struct HloShape {
  std::string dtype;  // pred, s32, bf16, f32, ...; empty for a tuple
  std::vector<int64_t> dims;
  int memory_space = 0;  // 0: HBM; 1: VMEM (the layout's S(1))
  int minor = -1;        // the layout's minor-most dim ({2,1,0}: 2); -1: none given (the last)
  std::vector<HloShape> tuple;

  int minor_dim() const { return minor >= 0 ? minor : static_cast<int>(dims.size()) - 1; }

  bool is_tuple() const { return dtype.empty(); }
  int64_t elements() const;
  int64_t bytes() const;  // of every element of a tuple
};

struct HloInstruction {
  std::string name;  // without the '%'
  std::string opcode;
  HloShape shape;
  std::vector<std::string> operands;
  std::map<std::string, std::string> attrs;  // raw text: calls=%f, direction=LT, metadata={...}
  std::string literal;  // inside the parentheses of constant(0), parameter(1), iota()
  bool root = false;
  int line = 0;

  std::string attr(const std::string& key) const;  // "" when absent
  // The metadata's op_name, e.g. "jit(f)/jvp()/while/body/dot_general".
  std::string op_name() const;
};

struct HloComputation {
  std::string name;
  bool entry = false;
  std::vector<HloInstruction> instructions;
  std::map<std::string, size_t> index;  // name -> position

  const HloInstruction& root() const;
  const HloInstruction* find(const std::string& name) const;
};

struct HloModule {
  std::string name, file;
  std::vector<HloComputation> computations;
  std::map<std::string, size_t> index;

  const HloComputation& entry() const;
  // The computation `name` (with or without '%'); throws an Error naming the file otherwise.
  const HloComputation& computation(const std::string& name) const;
};

// Parses HLO text; a line it cannot read is an Error "FILE:LINE:COLUMN: what".
HloModule parse_hlo(const std::string& text, const std::string& file);
HloModule load_hlo(const std::string& file);

// Bytes of one element of an HLO dtype (pred and s8 1, bf16 2, f32 4, s4 rounds up to 1).
int64_t hlo_dtype_bytes(const std::string& dtype);

}  // namespace tpusim
