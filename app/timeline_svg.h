// Renders a recorded timeline as an SVG picture: one lane per unit, ops coloured by unit, stalls
// by cause, a time ruler in microseconds, and a legend. Events narrower than a pixel are merged
// per lane so that long runs stay readable (and the file small).
#pragma once
#include <string>

#include "sim/timing/result.h"

namespace tpusim {

struct SvgWindow {
  double from_us = 0, to_us = 0;  // to_us <= from_us: the whole run
  int width_px = 1400;
};

std::string timeline_svg(const RunResult& r, const SvgWindow& window);

}  // namespace tpusim
