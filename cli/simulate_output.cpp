#include "cli/simulate_output.h"

#include <fmt/format.h>

#include <cmath>
#include <iostream>

#include "app/chrome_trace.h"
#include "app/op_profile.h"
#include "app/plots.h"
#include "app/report.h"
#include "app/timeline_svg.h"
#include "app/why_slow.h"

namespace tpusim::cli {

void Outputs::add_to(CLI::App* cmd) {
  cmd->add_option("--json", json, "write machine-readable results to FILE");
  cmd->add_option("--trace", trace, "write a Chrome trace-event JSON (open in Perfetto) to FILE");
  cmd->add_option("--svg", svg, "write a timeline picture (SVG) to FILE");
  cmd->add_option("--window-us", window_us,
                  "time window of the SVG picture: FROM TO (microseconds)")
      ->expected(2)
      ->check(CLI::Validator(
          [](const std::string& text) {
            double v = 0;
            return CLI::detail::lexical_cast(text, v) && std::isfinite(v) && v >= 0
                       ? std::string()
                       : fmt::format("{} is not a time in microseconds (a number, 0 or more)",
                                     text);
          },
          "US"));
  cmd->parse_complete_callback([this] {
    if (window_us.size() == 2 && !(window_us[0] < window_us[1]))
      throw CLI::ValidationError(
          "--window-us", fmt::format("FROM {} is not before TO {}", window_us[0], window_us[1]));
  });
  cmd->add_option("--profile", profile,
                  "write the op profile (ops by time, FLOP/s, HBM bandwidth, intensity, bound) "
                  "to FILE: .csv, .json or text ('-': print it)");
  cmd->add_option("--roofline", roofline, "write the ops on the chip's roofline (SVG) to FILE");
  cmd->add_flag("--why", why, "say why the run takes its time: stalls, heaviest kernels, remedy");
}

void Outputs::stage_profile(const RunResult& r, const ChipSpec& chip, const std::string& title,
                            OutputFiles& files) const {
  if (profile.empty() && roofline.empty()) return;
  const std::vector<OpProfileRow> rows = op_profile(r, chip);
  if (profile == "-")
    std::cout << op_profile_text(rows);
  else if (!profile.empty())
    files.stage(profile, op_profile_file(profile, rows, chip));
  if (!roofline.empty())
    files.stage(roofline, roofline_svg(rows, chip, title), "open it in a web browser");
}

RunResult run_and_report(const ChipSpec& chip, const Program& program, const nlohmann::json& config,
                         const Outputs& out) {
  SimOptions opt;
  opt.record_timeline = out.timeline();
  RunResult r = simulate(chip, program, opt);
  OutputFiles files;
  if (!out.json.empty()) files.stage(out.json, json_text(result_json(r, chip, config), 2) + "\n");
  if (!out.trace.empty())  // committed below, while `r` lives
    files.stage(
        out.trace,
        [&r, &config](std::ostream& o) {
          write_chrome_trace(r, o, print_trace_progress, nlohmann::json{{"config", config}});
        },
        kTraceViewer);
  if (!out.svg.empty()) {
    SvgWindow w;
    if (out.window_us.size() == 2) w = {out.window_us[0], out.window_us[1]};
    files.stage(out.svg, timeline_svg(r, w), "open it in a web browser");
  }
  out.stage_profile(r, chip, fmt::format("{} on {}", program.name, chip.name), files);
  std::ostream& summary = files.summary_stream();
  files.commit();
  summary << summary_text(r, chip);
  if (program.items.size() > 1) summary << live_buffers_text(program, hbm_liveness(program));
  if (out.why)
    for (const std::string& line : why_slow(r, chip)) summary << "why: " << line << "\n";
  return r;
}

}  // namespace tpusim::cli
