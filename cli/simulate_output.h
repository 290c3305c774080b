// What a simulating command writes besides its summary: --json, --trace, --svg (with
// --window-us), the op profile (--profile, app/op_profile.h) and its roofline (--roofline), and
// with --why the summary of why the run takes its time (app/why_slow.h),
// staged and committed together so a failure leaves no partial files.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/report.h"
#include "sim/chip_spec.h"
#include "sim/ir/program.h"
#include "sim/timing/engine.h"

namespace tpusim::cli {

struct Outputs {
  std::string json, trace, svg, profile, roofline;
  std::vector<double> window_us;
  bool why = false;  // print why_slow's lines after the summary (app/why_slow.h)
  void add_to(CLI::App* cmd);
  bool timeline() const { return !trace.empty() || !svg.empty(); }
  // Stages the op profile and the roofline of `r` where asked ('-' prints the profile).
  void stage_profile(const RunResult& r, const ChipSpec& chip, const std::string& title,
                     OutputFiles& files) const;
};

// Simulates `program`, writes the requested files and prints the summary; returns the result.
RunResult run_and_report(const ChipSpec& chip, const Program& program, const nlohmann::json& config,
                         const Outputs& out);

}  // namespace tpusim::cli
