#include "kernels/catalog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "kernels/catalog_entries.h"
#include "sim/error.h"

namespace tpusim::kernels {
namespace {

std::vector<CatalogEntry>& registry() {
  static std::vector<CatalogEntry> entries = [] {
    // One line per kernel the tool builds.
    std::vector<CatalogEntry> e;
    e.push_back(matmul_entry());
    e.push_back(xla_dot_entry());
    e.push_back(elementwise_entry());
    e.push_back(gdn_layer_entry());
    e.push_back(gdn_scan_forward_entry());
    e.push_back(gdn_scan_backward_entry());
    e.push_back(gdn_lax_scan_entry());
    e.push_back(gdn_invert_entry());
    e.push_back(gdn_solve_triangular_entry());
    return e;
  }();
  return entries;
}

}  // namespace

Knob Knob::integer(std::string name, int64_t min, int64_t max, int64_t default_value,
                   std::string help) {
  Knob k;
  k.name = std::move(name);
  k.type = Type::integer;
  k.min = min;
  k.max = max;
  k.default_int = default_value;
  k.help = std::move(help);
  return k;
}

Knob Knob::choice(std::string name, std::vector<std::string> choices, std::string default_choice,
                  std::string noun, std::string help) {
  Knob k;
  k.name = std::move(name);
  k.type = Type::choice;
  k.choices = std::move(choices);
  k.default_choice = std::move(default_choice);
  k.noun = std::move(noun);
  k.help = std::move(help);
  return k;
}

std::string Knob::key() const {
  std::string k = name;
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}

int64_t KnobValues::integer(const std::string& knob) const {
  const auto it = values_.find(knob);
  if (it == values_.end() || !std::holds_alternative<int64_t>(it->second))
    throw Error(fmt::format("knob '{}' has no integer value", knob));
  return std::get<int64_t>(it->second);
}

const std::string& KnobValues::choice(const std::string& knob) const {
  const auto it = values_.find(knob);
  if (it == values_.end() || !std::holds_alternative<std::string>(it->second))
    throw Error(fmt::format("knob '{}' has no choice value", knob));
  return std::get<std::string>(it->second);
}

KnobValues CatalogEntry::defaults() const {
  KnobValues v;
  for (const Knob& k : knobs) {
    if (k.type == Knob::Type::integer)
      v.set(k.name, k.default_int);
    else
      v.set(k.name, k.default_choice);
  }
  return v;
}

const Knob& CatalogEntry::knob(const std::string& n) const {
  for (const Knob& k : knobs)
    if (k.name == n) return k;
  std::vector<std::string> names;
  for (const Knob& k : knobs) names.push_back(k.name);
  throw Error(
      fmt::format("kernel {} has no knob '{}' (knobs: {})", name, n, fmt::join(names, ", ")));
}

void CatalogEntry::check(const KnobValues& v) const {
  for (const auto& [n, value] : v.all()) knob(n);  // every value names a knob
  for (const Knob& k : knobs) {
    if (!v.has(k.name)) throw Error(fmt::format("kernel {}: knob '{}' has no value", name, k.name));
    if (k.type == Knob::Type::integer) {
      const int64_t x = v.integer(k.name);
      if (x < k.min || x > k.max)
        throw Error(
            fmt::format("kernel {}: {} = {} is outside {}..{}", name, k.name, x, k.min, k.max));
    } else {
      const std::string& x = v.choice(k.name);
      if (std::find(k.choices.begin(), k.choices.end(), x) == k.choices.end())
        throw Error(
            fmt::format("unknown {} '{}' (known: {})", k.noun, x, fmt::join(k.choices, ", ")));
    }
  }
}

Program CatalogEntry::program(const ChipSpec& chip, const KnobValues& v) const {
  check(v);
  Program p = build(chip, v);
  if (p.name.empty()) p.name = "kernel " + name;
  return p;
}

const std::vector<CatalogEntry>& catalog() { return registry(); }

const CatalogEntry& find_kernel(const std::string& name) {
  std::vector<std::string> names;
  for (const CatalogEntry& e : catalog()) {
    if (e.name == name) return e;
    names.push_back(e.name);
  }
  throw Error(fmt::format("unknown kernel '{}' (known: {})", name, fmt::join(names, ", ")));
}

void register_kernel(CatalogEntry entry) {
  for (const CatalogEntry& e : registry())
    if (e.name == entry.name) throw Error(fmt::format("kernel '{}' is already registered", e.name));
  registry().push_back(std::move(entry));
}

}  // namespace tpusim::kernels
