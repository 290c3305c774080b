// Scenario files (scenarios/**/*.yaml): chip, slice and mesh, model, sequence and batch, remat
// policy, GDN kernel knobs, and optionally `measured:` values with their source. Every key is
// checked: an unknown key, a wrong type or an impossible mesh is one Error naming
// file:line:column and the key path, before anything runs.
#pragma once
#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app/compiled_step.h"
#include "models/workload/step.h"

namespace tpusim {

// Metrics a scenario can carry measurements of (and that `run` predicts).
inline const std::vector<std::string> kMetrics = {"step_time_s", "tokens_per_s_per_chip",
                                                  "tflops_per_chip", "mfu", "peak_hbm_bytes"};

struct Scenario {
  std::string file, name, description;
  StepConfig step;
  std::string chip_name, model_name;
  std::string measured_source;
  std::map<std::string, double> measured;  // metric -> value
  // How the measured TFLOP/s and MFU counted attention (`measured.attention_flops`).
  AttentionCount measured_attention = AttentionCount::causal;
  // The TPU compiler's verdict on this step (`compiled: FILE`), and `memory: compiler`.
  std::optional<CompiledStep> compiled;
  bool memory_from_compiler = false;
};

// The compiler's peak and verdict into `p` (nothing without `compiled:`); with `memory: compiler`
// they replace the model's.
void add_compiled(const Scenario& s, StepPrediction& p);

// With a compiled step that holds its optimized HLO, that program simulated on the scenario's
// chip into p.compiled_program_s.
void add_compiled_program(const Scenario& s, StepPrediction& p);

// What loading checks: the configuration and every part's kernels (built and checked against
// VMEM, the default), or only what the file says (keys, types, ranges, the mesh): a caller that
// predicts the step next meets the kernels' problems there.
enum class LoadChecks { kernels, file };

Scenario load_scenario(const std::string& file, LoadChecks checks = LoadChecks::kernels);
// The same from a parsed tree; `file` names it in errors (a sweep point passes its base file).
Scenario load_scenario(const YAML::Node& root, const std::string& file,
                       LoadChecks checks = LoadChecks::kernels);

// The scenario's step predicted, its kernels checked once, as they are built: a configuration
// error names the file, line and key as load_scenario does.
StepPrediction predict_scenario(const YAML::Node& root, const std::string& file);

// A micro-benchmark table (a `rows:` list of kernel or collective timings, calibrate's data)
// rather than a training-step scenario; such tables live beside the scenarios.
// Whether a scenario file may set this key path ("seq", "mesh.tensor", "remat.custom.context").
bool is_scenario_key(const std::string& path);

bool is_micro_benchmark_table(const std::string& file);

// Scenario files under `paths` (files or folders searched recursively, micro-benchmark tables
// skipped), sorted.
std::vector<std::string> scenario_files(const std::vector<std::string>& paths);

// The value of `metric` in a prediction.
double metric(const StepPrediction& p, const std::string& metric);

}  // namespace tpusim
