#include "app/maxtext_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "sim/error.h"
#include "sim/text_file.h"

namespace tpusim {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

MaxTextLog read_maxtext_log(const std::string& file) {
  std::istringstream in(read_text_file(file));
  static const std::regex step_line(R"(completed step: (\d+), seconds: ([0-9.]+))");
  static const std::regex rates(R"(TFLOP/s/device: ([0-9.]+), Tokens/s/device: ([0-9.]+))");
  MaxTextLog log;
  log.file = file;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (text.find("completed profiler activation/deactivation step") != std::string::npos) {
      ++log.steps_without_rates;
      continue;
    }
    if (text.find("completed step:") == std::string::npos) continue;
    std::smatch s, r;
    if (!std::regex_search(text, s, step_line))
      throw Error(fmt::format("{}:{}: a 'completed step' line without 'seconds: S'", file, line));
    if (!std::regex_search(text, r, rates)) {  // a rampup step: MaxText logs no rates
      ++log.steps_without_rates;
      continue;
    }
    try {
      log.steps.push_back({.step = std::stoll(s[1]),
                           .seconds = std::stod(s[2]),
                           .tflops_per_device = std::stod(r[1]),
                           .tokens_per_device = std::stod(r[2]),
                           .line = line});
    } catch (const std::logic_error&) {  // std::stoll/stod: "1.2.3", or out of range
      throw Error(fmt::format("{}:{}: a 'completed step' line whose numbers do not read", file,
                              line));
    }
  }
  if (log.steps.empty())
    throw Error(
        fmt::format("{}: no 'completed step: N, seconds: S, TFLOP/s/device: T, "
                    "Tokens/s/device: K' line (a MaxText training log?)",
                    file));
  return log;
}

std::string measured_block(const MaxTextLog& log, int skip) {
  if (skip < 0 || static_cast<size_t>(skip) >= log.steps.size())
    throw Error(fmt::format("{}: {} steps with rates, so skipping {} leaves none", log.file,
                            log.steps.size(), skip));
  std::vector<double> seconds, tflops, tokens;
  for (size_t i = skip; i < log.steps.size(); ++i) {
    seconds.push_back(log.steps[i].seconds);
    tflops.push_back(log.steps[i].tflops_per_device);
    tokens.push_back(log.steps[i].tokens_per_device);
  }
  const MaxTextStep &first = log.steps[skip], &last = log.steps.back();
  std::string skipped = skip == 0 ? "none skipped"
                                  : fmt::format("the first {} skipped as warm-up (steps {}-{})",
                                                skip, log.steps[0].step, log.steps[skip - 1].step);
  if (log.steps_without_rates > 0)
    skipped += fmt::format("; {} rampup or profiler step{} without rates left out",
                           log.steps_without_rates, log.steps_without_rates == 1 ? "" : "s");
  return fmt::format(
      "measured:\n"
      "  source: \"{}: median of MaxText steps {}-{} ({} steps; {})\"\n"
      "  step_time_s: {:.4g}\n"
      "  tokens_per_s_per_chip: {:.6g}\n"
      "  tflops_per_chip: {:.6g}\n"
      "  # attention_flops: full  # if this MaxText predates mid-2025 (TFLOP/s counted attention "
      "in full)\n",
      log.file, first.step, last.step, seconds.size(), skipped, median(seconds), median(tokens),
      median(tflops));
}

}  // namespace tpusim
