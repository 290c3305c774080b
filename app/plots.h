// Charts as SVG text, drawn with PLplot (Debian's libplplot-dev): the roofline of an op profile,
// predicted against measured for a validation, and a sweep's metric over its axes. Each point is
// one filled marker (an SVG polygon) in a colour of its own group, so a reader (and the tests)
// can count them.
#pragma once
#include <string>
#include <vector>

#include "app/op_profile.h"
#include "app/step_report.h"
#include "app/sweep.h"
#include "sim/chip_spec.h"

namespace tpusim {

// Every op with FLOPs and HBM bytes at its arithmetic intensity and achieved FLOP/s, coloured by
// what bounds it, under the chip's roofs (bf16 peak; HBM at the achievable rate). The largest ops
// by time are numbered and named. Ops without FLOPs (copies, elementwise work) have no place on
// the intensity axis and are counted in the caption instead.
std::string roofline_svg(const std::vector<OpProfileRow>& rows, const ChipSpec& chip,
                         const std::string& title);

// Every row, predicted against measured on log axes (rows of every metric share them: each sits
// near the diagonal in its own unit), with the diagonal and the +-10% band, one colour per chip.
std::string validation_svg(const std::vector<ValidationRow>& rows);

// `metric` over the sweep's axes: a line over the one axis that varies, or a heatmap per pair
// of varying axes whose cells hold the best value over the other axes (lowest for times and
// bytes, highest for rates). Points that failed leave their cells empty.
std::string sweep_svg(const Sweep& s, const std::vector<PointResult>& results,
                      const std::string& metric);

}  // namespace tpusim
