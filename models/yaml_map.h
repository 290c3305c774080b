// One reader for the mappings of every YAML input (scenarios, chips, models, sweeps, calibration
// tables): only known keys, required keys present, values of the right type and range. Every
// error is one line naming file:line:column and the key path (models/yaml_errors.h), pointing at
// the value, or at the mapping when the key is missing.
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "models/yaml_errors.h"

namespace tpusim {

class YamlMap {
 public:
  // Fails unless `node` is a mapping whose keys are all `known` ("unknown {noun} (known: ...)").
  // `path` is the mapping's key path ("" at the top of the file).
  YamlMap(std::string file, const YAML::Node& node, std::string path,
          const std::vector<std::string>& known, const std::string& noun = "key");

  bool has(const std::string& key) const { return static_cast<bool>(node_[key]); }
  YAML::Node node(const std::string& key) const { return node_[key]; }  // null when absent
  const YAML::Node& node() const { return node_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  std::string key_path(const std::string& key) const;

  // Required values: a missing key fails.
  YAML::Node need(const std::string& key) const;
  std::string string(const std::string& key) const;
  int64_t positive(const std::string& key) const;        // an integer >= 1
  // An integer in [1, max]; `max` bounds what tpusim can size without overflowing (the caller
  // says why in its name).
  int64_t positive(const std::string& key, int64_t fallback, int64_t max) const;
  double positive_number(const std::string& key) const;  // finite, > 0
  template <typename T>
  T as(const std::string& key, const char* type_name) const {
    return yaml_as<T>(file_, need(key), key_path(key), type_name);
  }
  // One of `choices`, else "expected {what}" (when empty: "expected a or b", "expected one of a,
  // b, c").
  std::string choice(const std::string& key, const std::vector<std::string>& choices,
                     const std::string& what = "") const;

  // Optional values: `fallback` when the key is absent.
  std::string string(const std::string& key, const std::string& fallback) const;
  int64_t positive(const std::string& key, int64_t fallback) const;

  // A nested mapping.
  YamlMap map(const std::string& key, const std::vector<std::string>& known,
              const std::string& noun = "key") const;

  // A list of mappings (key paths "key[i]"), each with only `known` keys, at least `min_size`.
  std::vector<YamlMap> list(const std::string& key, const std::vector<std::string>& known,
                            size_t min_size = 0) const;

  // Fails at the key's value (or at this mapping when the key is absent).
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

 private:
  std::string file_, path_;
  YAML::Node node_;
};

}  // namespace tpusim
