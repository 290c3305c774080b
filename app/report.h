// Turns a RunResult into what people and tools read: a text summary and the results JSON (the
// Chrome trace is app/chrome_trace.h). Output files are staged and only written once everything
// succeeded, so a failed run leaves no partial files.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "sim/chip_spec.h"
#include "sim/ir/liveness.h"
#include "sim/timing/result.h"

namespace tpusim {

std::string summary_text(const RunResult& r, const ChipSpec& chip);

// `v` with a decimal prefix: "1.10 TFLOP", "554.4 MB" (k, M, G, T, P; plain below 1000).
std::string format_si(double v, const char* unit);

// Seconds as "12.34 us" below a millisecond, else "1.234 ms".
std::string format_duration(double s);

// One line: the peak of the HBM buffers the program holds live (sim/ir/liveness.h), where it is
// and its largest buffers.
// One CSV field as RFC 4180 writes it: quoted (quotes doubled) when it holds a comma, a quote or
// a line break.
std::string csv_field(const std::string& v);

std::string live_buffers_text(const Program& p, const Liveness& l);

// Time per stage label (program items without a stage count under their name), in program order.
std::vector<std::pair<std::string, int64_t>> stage_cycles(const RunResult& r);

// One stage of two runs side by side (the GUI's compare view): seconds and share of each run's
// time (0 where a run has no such stage), and the second's seconds minus the first's.
struct StageDifference {
  std::string stage;
  double first_s = 0, second_s = 0, first_share = 0, second_share = 0, delta_s = 0;
};
// Every stage of either run (the first's in its order, then the second's others), and a last row
// "total" with the runs' whole times (host dispatch included).
std::vector<StageDifference> stage_difference(const RunResult& first, const RunResult& second);
// The same for any two lists of named times: shares of each side's total, the first's names in
// order then the second's others, and a last row `total_name` with the totals.
std::vector<StageDifference> side_by_side(const std::vector<std::pair<std::string, double>>& first,
                                          double first_total,
                                          const std::vector<std::pair<std::string, double>>& second,
                                          double second_total, const std::string& total_name);

// `config` echoes the resolved inputs (chip, kernel, knobs) next to the results.
nlohmann::json result_json(const RunResult& r, const ChipSpec& chip, const nlohmann::json& config);

class OutputFiles {
 public:
  // `how_to_open`: a hint printed after the file, e.g. where a trace opens.
  void stage(const std::string& path, std::string content, std::string how_to_open = "");
  // A file too large to hold in memory: `write` streams it into the temporary file at commit.
  void stage(const std::string& path, std::function<void(std::ostream&)> write,
             std::string how_to_open = "");
  // Writes each staged file to a uniquely named temporary file (compressed as gzip when its path
  // ends in .gz), then renames all of them into place, and says on stderr what was written:
  // "wrote PATH (SIZE)". A symlink is written through (the link stays); a FIFO or device is
  // written in place; the path '-' is stdout, written last.
  void commit();
  // Whether an output goes to stdout; where the command's summary goes then (stderr, so stdout
  // holds only the output). Asked before commit().
  bool uses_stdout() const;
  std::ostream& summary_stream() const;

 private:
  struct File {
    std::string path, content, how_to_open;
    std::function<void(std::ostream&)> write;
  };
  std::vector<File> files_;
};

// JSON text of `j` (indented when indent >= 0); bytes that are not UTF-8 (a name from a file)
// become U+FFFD instead of aborting the dump.
std::string json_text(const nlohmann::json& j, int indent = -1);

}  // namespace tpusim
