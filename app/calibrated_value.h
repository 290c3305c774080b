// A fitted constant and how it was fitted, and the one way tpusim writes such values back into a
// chip file (models/chips/shared.yaml or a chip's own): each key's block of a value and its
// provenance is replaced in place, so the file's comments and order stay as written.
#pragma once
#include <string>
#include <vector>

namespace tpusim {

struct CalibratedValue {
  std::string key;
  double value = 0;
  bool integer = false;
  std::string how;  // becomes the `calibrated:` provenance
};

// The text of the chip file at `path` with each value's block replaced; throws Error naming the
// file and key when a key has no block of a value and a provenance.
std::string chip_file_with(const std::string& path, const std::vector<CalibratedValue>& values);

}  // namespace tpusim
