// Content hashes of what decides a simulation: a kernel (every IR field) and a chip (every value
// the engine reads). Two kernels with equal hashes simulate identically on chips with equal
// hashes, so a kernel call's result can be reused across runs (call_cache.h). Completeness is
// checked at compile time: content_hash.cpp counts each hashed struct's fields, so adding a field
// fails the build until the hash covers it.
#pragma once
#include <compare>
#include <cstdint>

#include "sim/chip_spec.h"
#include "sim/ir/kernel.h"

namespace tpusim {

struct Digest {
  uint64_t hi = 0, lo = 0;
  auto operator<=>(const Digest&) const = default;
};

Digest content_hash(const Kernel& k);
// The chip's values; its provenance and value text (documentation) are left out.
Digest content_hash(const ChipSpec& chip);

}  // namespace tpusim
