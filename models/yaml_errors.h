// One-line errors for YAML inputs: "file:line:column: key 'a.b.c': what is wrong".
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>

namespace tpusim {

[[noreturn]] void yaml_fail(const std::string& file, const YAML::Node& at,
                            const std::string& key_path, const std::string& what);
[[noreturn]] void yaml_fail(const std::string& file, const YAML::Mark& at,
                            const std::string& key_path, const std::string& what);

// Parses `file`; a syntax error becomes an Error with its position.
YAML::Node yaml_load_file(const std::string& file);

// Reads a scalar as T, or fails naming the expected type.
template <typename T>
T yaml_as(const std::string& file, const YAML::Node& n, const std::string& key_path,
          const char* type_name);

}  // namespace tpusim
