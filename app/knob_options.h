// Command-line options generated from catalog knobs (CLI11), shared by the CLI's kernel commands
// and the GUI's flags, so both spell every knob, its type, default and help the same way.
#pragma once
#include <CLI/CLI.hpp>
#include <deque>
#include <string>

#include "kernels/catalog.h"

namespace tpusim {

class KnobOptions {
 public:
  // The CLI's `kernel NAME`: one option per knob of `entry`, starting at the knob's default;
  // required knobs are required options.
  void add_kernel(CLI::App* cmd, const kernels::CatalogEntry& entry);
  // The GUI: one option per knob name of any catalog kernel, without defaults; a given option
  // sets the knob of that name in every kernel that has one.
  void add_union(CLI::App* cmd, const std::vector<kernels::CatalogEntry>& entries);
  // Writes the options that hold a value (given ones, or all with defaults) into `v`, for the
  // knobs of `entry` they name.
  void apply(const kernels::CatalogEntry& entry, kernels::KnobValues& v) const;

 private:
  struct Slot {
    std::string name;
    kernels::Knob::Type type;
    CLI::Option* option = nullptr;
    int64_t integer = 0;
    std::string choice;
    bool has_default = false;
  };
  Slot& add(CLI::App* cmd, const kernels::Knob& knob, const std::string& names, bool defaults);
  std::deque<Slot> slots_;  // CLI11 keeps pointers into them
};

}  // namespace tpusim
