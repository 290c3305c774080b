// The four builds of the GDN kernel change side by side: per-layer time, the saving of each step
// and where it comes from (HBM traffic, dependent-chain waits, the row-sequential solve), and the
// time per stage. Markdown, generated for docs/kernels/gdn.md.
#pragma once
#include <string>

#include "kernels/gdn/shape.h"
#include "sim/chip_spec.h"

namespace tpusim {

std::string gdn_builds_markdown(const ChipSpec& chip, const kernels::gdn::GdnShape& shape);

}  // namespace tpusim
