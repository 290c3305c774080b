#include "models/yaml_map.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace tpusim {

YamlMap::YamlMap(std::string file, const YAML::Node& node, std::string path,
                 const std::vector<std::string>& known, const std::string& noun)
    : file_(std::move(file)), path_(std::move(path)), node_(node) {
  if (!node_.IsMap()) yaml_fail(file_, node_, path_, "expected a mapping");
  for (const auto& kv : node_) {
    const std::string k = yaml_as<std::string>(file_, kv.first, key_path("?"), "a string key");
    if (std::find(known.begin(), known.end(), k) == known.end())
      yaml_fail(file_, kv.first, key_path(k),
                fmt::format("unknown {} (known: {})", noun, fmt::join(known, ", ")));
  }
}

std::string YamlMap::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void YamlMap::fail(const std::string& key, const std::string& what) const {
  const YAML::Node n = node_[key];
  yaml_fail(file_, n ? n : node_, key_path(key), what);
}

YAML::Node YamlMap::need(const std::string& key) const {
  const YAML::Node n = node_[key];
  if (!n) fail(key, "missing");
  return n;
}

std::string YamlMap::string(const std::string& key) const {
  return as<std::string>(key, "a string");
}

std::string YamlMap::string(const std::string& key, const std::string& fallback) const {
  return has(key) ? string(key) : fallback;
}

int64_t YamlMap::positive(const std::string& key) const {
  const auto v = as<int64_t>(key, "an integer");
  if (v < 1) fail(key, fmt::format("must be a positive integer, got {}", v));
  return v;
}

int64_t YamlMap::positive(const std::string& key, int64_t fallback) const {
  return has(key) ? positive(key) : fallback;
}

int64_t YamlMap::positive(const std::string& key, int64_t fallback, int64_t max) const {
  if (!has(key)) return fallback;
  const int64_t v = positive(key);
  if (v > max) fail(key, fmt::format("{} is more than {}, the most tpusim sizes", v, max));
  return v;
}

double YamlMap::positive_number(const std::string& key) const {
  const auto v = as<double>(key, "a number");
  if (!(v > 0) || !std::isfinite(v))
    fail(key, fmt::format("must be a positive finite number, got {}", node_[key].Scalar()));
  return v;
}

std::string YamlMap::choice(const std::string& key, const std::vector<std::string>& choices,
                            const std::string& what) const {
  const std::string v = string(key);
  if (std::find(choices.begin(), choices.end(), v) == choices.end())
    fail(key, !what.empty() ? "expected " + what
              : choices.size() <= 2
                  ? fmt::format("expected {}, got '{}'", fmt::join(choices, " or "), v)
                  : fmt::format("expected one of {}, got '{}'", fmt::join(choices, ", "), v));
  return v;
}

YamlMap YamlMap::map(const std::string& key, const std::vector<std::string>& known,
                     const std::string& noun) const {
  return YamlMap(file_, need(key), key_path(key), known, noun);
}

std::vector<YamlMap> YamlMap::list(const std::string& key, const std::vector<std::string>& known,
                                   size_t min_size) const {
  const YAML::Node n = need(key);
  if (!n.IsSequence() || n.size() < min_size)
    fail(key, min_size > 0 ? fmt::format("expected a list of at least {} entries", min_size)
                           : "expected a list");
  std::vector<YamlMap> items;
  for (size_t i = 0; i < n.size(); ++i)
    items.emplace_back(file_, n[i], fmt::format("{}[{}]", key_path(key), i), known);
  return items;
}

}  // namespace tpusim
