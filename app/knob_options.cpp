#include "app/knob_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>

namespace tpusim {

using kernels::Knob;

namespace {

// An integer in [lo, hi]; the error says which of the two the value is not.
CLI::Validator integer_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || end != text.data() + text.size())
          return fmt::format("'{}' is not an integer", text);
        if (v < lo || v > hi) return fmt::format("{} is outside {}..{}", v, lo, hi);
        return "";
      },
      fmt::format("{}..{}", lo, hi));
}

}  // namespace

KnobOptions::Slot& KnobOptions::add(CLI::App* cmd, const Knob& knob, const std::string& names,
                                    bool defaults) {
  Slot& s = slots_.emplace_back();
  s.name = knob.name;
  s.type = knob.type;
  s.has_default = defaults;
  // A value outside the knob's range or choices is an error naming the flag and what it takes.
  if (knob.type == Knob::Type::integer) {
    s.integer = knob.default_int;
    s.option = cmd->add_option(names, s.integer, knob.help)->check(integer_in(knob.min, knob.max));
  } else {
    s.choice = knob.default_choice;
    s.option = cmd->add_option(names, s.choice,
                               fmt::format("{}: {}", knob.help, fmt::join(knob.choices, ", ")))
                   ->check(CLI::IsMember(knob.choices));
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
  // A knob of several kernels takes what any of them takes: the widest range, every choice.
  std::vector<Knob> knobs;
  for (const kernels::CatalogEntry& e : entries)
    for (const Knob& k : e.knobs) {
      auto same =
          std::find_if(knobs.begin(), knobs.end(), [&](const Knob& o) { return o.name == k.name; });
      if (same == knobs.end()) {
        knobs.push_back(k);
        continue;
      }
      if (same->type != k.type) continue;  // the first kernel's type names the flag
      same->min = std::min(same->min, k.min);
      same->max = std::max(same->max, k.max);
      for (const std::string& c : k.choices)
        if (std::find(same->choices.begin(), same->choices.end(), c) == same->choices.end())
          same->choices.push_back(c);
    }
  for (const Knob& k : knobs) add(cmd, k, "--" + k.name, /*defaults=*/false);
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
