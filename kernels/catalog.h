// The kernel catalog: every kernel the tool can build, by name, with its knobs (name, type, range,
// default, help) and a function from knob values to a Program. The CLI's `kernel` subcommands,
// `gdn-builds`, and the GUI's kernel menu and knob panel are generated from it, so a kernel added
// here appears everywhere at once: write its generator, then one registration line in catalog.cpp
// (or call register_kernel at run time, as programs imported from outside do).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "sim/chip_spec.h"
#include "sim/ir/program.h"

namespace tpusim::kernels {

struct Knob {
  enum class Type { integer, choice };
  // As on the command line, without the dashes, and as the scenario files' keys write it with
  // '_' for '-': "head-tile-fwd" (gdn.head_tile_fwd).
  std::string name;
  Type type = Type::integer;
  std::string help;
  // integer knobs
  int64_t min = 0, max = 0, default_int = 0;
  // choice knobs
  std::vector<std::string> choices;
  std::string default_choice;
  std::string noun;  // for errors: "unknown {noun} 'x' (known: ...)"
  // The CLI asks for it (no default there); the default still serves the GUI and the catalog test.
  bool required = false;

  static Knob integer(std::string name, int64_t min, int64_t max, int64_t default_value,
                      std::string help);
  static Knob choice(std::string name, std::vector<std::string> choices, std::string default_choice,
                     std::string noun, std::string help);
  // The JSON key of the knob: its name with '_' for '-'.
  std::string key() const;
};

using KnobValue = std::variant<int64_t, std::string>;

// A value for every knob of one kernel, by knob name.
class KnobValues {
 public:
  int64_t integer(const std::string& knob) const;
  const std::string& choice(const std::string& knob) const;
  void set(const std::string& knob, KnobValue v) { values_[knob] = std::move(v); }
  bool has(const std::string& knob) const { return values_.count(knob) > 0; }
  const std::map<std::string, KnobValue>& all() const { return values_; }
  bool operator==(const KnobValues&) const = default;

 private:
  std::map<std::string, KnobValue> values_;
};

struct CatalogEntry {
  std::string name;  // "gdn-layer"
  std::string help;  // one line
  std::vector<Knob> knobs;
  std::function<Program(const ChipSpec&, const KnobValues&)> build;

  KnobValues defaults() const;
  const Knob& knob(const std::string& name) const;  // throws Error naming the kernel's knobs
  // Throws Error (one line naming the knob) unless every knob has a value of its type within its
  // range or among its choices.
  void check(const KnobValues& v) const;
  // check(), then build, with the program named after the kernel when the generator left it so.
  Program program(const ChipSpec& chip, const KnobValues& v) const;
};

// Every registered kernel, in registration order.
const std::vector<CatalogEntry>& catalog();
// Throws Error listing the known kernels.
const CatalogEntry& find_kernel(const std::string& name);
// Adds a kernel (an imported program, say) at start-up, before anything reads the catalog (it
// invalidates references into it); throws Error if the name is taken.
void register_kernel(CatalogEntry entry);

}  // namespace tpusim::kernels
