// A MaxText training log read for its measured step (`tpusim import maxtext-log`): the per-step
// lines MaxText's metric logger prints (maxtext/common/metric_logger.py in MaxText 0.2.5:
// "completed step: N, seconds: S, TFLOP/s/device: T, Tokens/s/device: K, total_weights: ...,
// loss: ..."), whatever prefix the logging adds. Rampup and profiler-boundary steps carry no rates
// and are counted apart. The measured block is the median of the steady-state steps: the first
// `skip` steps (compilation, warm-up) are left out, and the block says so.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tpusim {

struct MaxTextStep {
  int64_t step = 0;
  double seconds = 0, tflops_per_device = 0, tokens_per_device = 0;
  int line = 0;
};

struct MaxTextLog {
  std::string file;
  std::vector<MaxTextStep> steps;  // with rates, in log order
  int steps_without_rates = 0;     // rampup and profiler activation/deactivation steps
};

// An Error naming FILE (and LINE for a malformed step line) when the log has no step line.
MaxTextLog read_maxtext_log(const std::string& file);

// The scenario's `measured:` block (YAML) from the steps after the first `skip`; an Error when
// none are left.
std::string measured_block(const MaxTextLog& log, int skip);

}  // namespace tpusim
