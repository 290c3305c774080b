#include "app/knob_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

namespace tpusim {

using kernels::Knob;

KnobOptions::Slot& KnobOptions::add(CLI::App* cmd, const Knob& knob, const std::string& names,
                                    bool defaults) {
  Slot& s = slots_.emplace_back();
  s.name = knob.name;
  s.type = knob.type;
  s.has_default = defaults;
  if (knob.type == Knob::Type::integer) {
    s.integer = knob.default_int;
    s.option = cmd->add_option(names, s.integer, knob.help);
  } else {
    s.choice = knob.default_choice;
    s.option = cmd->add_option(names, s.choice,
                               fmt::format("{}: {}", knob.help, fmt::join(knob.choices, ", ")));
  }
  if (defaults) {
    if (knob.required)
      s.option->required();
    else
      s.option->capture_default_str();
  }
  return s;
}

void KnobOptions::add_kernel(CLI::App* cmd, const kernels::CatalogEntry& entry) {
  for (const Knob& k : entry.knobs) add(cmd, k, "--" + k.name, /*defaults=*/true);
}

void KnobOptions::add_union(CLI::App* cmd, const std::vector<kernels::CatalogEntry>& entries) {
  std::set<std::string> seen;
  for (const kernels::CatalogEntry& e : entries)
    for (const Knob& k : e.knobs)
      if (seen.insert(k.name).second) add(cmd, k, "--" + k.name, /*defaults=*/false);
}

void KnobOptions::apply(const kernels::CatalogEntry& entry, kernels::KnobValues& v) const {
  for (const Slot& s : slots_) {
    if (!s.has_default && s.option->count() == 0) continue;
    for (const Knob& k : entry.knobs)
      if (k.name == s.name && k.type == s.type) {
        if (s.type == Knob::Type::integer)
          v.set(k.name, s.integer);
        else
          v.set(k.name, s.choice);
      }
  }
}

}  // namespace tpusim
