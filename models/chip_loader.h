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

// `name_or_path`: a chip name (v5e, v6e, v5p) or a path to a chip YAML file.
ChipSpec load_chip(const std::string& name_or_path);

}  // namespace tpusim
