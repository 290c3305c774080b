// Loads chip specs from models/chips/<name>.yaml plus the shared constants in shared.yaml. Every
// key must be known and carry a value and exactly one provenance (source, derived, calibrated,
// assumed); anything else is an Error naming file:line:column and the key.
#pragma once
#include <string>
#include <vector>

#include "sim/chip_spec.h"

namespace tpusim {

// The folder holding chips/ (the source tree's models/ unless TPUSIM_MODELS_DIR is set).
std::string models_dir();
// `path` relative to the repository (the parent of models_dir()), for reports and docs.
std::string repo_relative(const std::string& path);
// A path of the repository (the parent of models_dir()): its scenarios/, docs/.
std::string repo_path(const std::string& relative);

std::vector<std::string> known_chips();

// Whether `name` can name a file in models/ (or a sweep's outputs): letters, digits, '.', '_'
// and '-', not starting with '.'; never a path.
bool is_bare_name(const std::string& name);
// The file a chip or model is given by: a path ending in .yaml as it is, else a bare name of a
// file in models/<folder>. Anything else is an Error listing `known` (what `noun`s there are).
std::string models_file(const std::string& name_or_path, const std::string& folder,
                        const std::string& noun, const std::vector<std::string>& known);

// `name_or_path`: a chip name (v5e, v6e, v5p) or a path to a chip YAML file.
ChipSpec load_chip(const std::string& name_or_path);

}  // namespace tpusim
