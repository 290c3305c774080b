// Predicted against measured per op: a measured profile's ops (app/profile_import.h) matched by
// HLO instruction name to the compiled program tpusim imported and simulated (app/hlo_import.h):
// entry instructions to the program's items, while-loop body instructions to the kernels they
// became (every call). Time is per step: the profile's op time over its steps. What matches on
// one side only is reported, never dropped.
#pragma once
#include <string>
#include <vector>

#include "app/hlo_import.h"
#include "app/profile_import.h"
#include "sim/timing/result.h"

namespace tpusim {

struct OpComparison {
  std::string name, op_class;  // op_class: the profile's hlo_category, else the name's prefix
  double count_per_step = 0;   // measured executions per step
  double measured_s = 0, predicted_s = 0;  // per step
  double error_pct() const { return 100.0 * (predicted_s - measured_s) / measured_s; }
};

// A while loop: its body's measured ops against the loop as simulated, per step.
struct LoopComparison {
  std::string name;
  int64_t trips = 0;
  double measured_s = 0, predicted_s = 0;  // per step, every iteration
};

struct ClassComparison {
  std::string op_class;
  double measured_s = 0, predicted_s = 0;
};

struct ProfileComparison {
  std::string device;
  int steps = 1;                  // the profile's steps on the device (1 when it has no Steps line)
  std::vector<OpComparison> ops;  // matched, largest absolute error first
  std::vector<ClassComparison> classes;      // of the matched ops, largest measured first
  std::vector<LoopComparison> loops;         // the program's while loops
  std::vector<OpComparison> measured_only;   // in the profile, not in the program
  std::vector<OpComparison> predicted_only;  // in the program, not in the profile
  double measured_step_s = 0;                // every measured op, per step
};

ProfileComparison compare_profile(const Profile& profile, int device, const HloProgram& h,
                                  const RunResult& r);

// One measured op execution placed on the simulated run's time axis (the GUI's measured lane):
// the ops of the profile's first step (of its first module when it has no Steps line), each at its
// offset from the step's start added to the simulated program's start; with the predicted time
// of one execution of what it matched (its per-step prediction over its count), 0 when unmatched.
struct MeasuredSpan {
  std::string name;
  double start_s = 0, duration_s = 0, predicted_s = 0;
  bool matched = false;
  double error_pct() const { return 100.0 * (predicted_s - duration_s) / duration_s; }
};
std::vector<MeasuredSpan> measured_spans(const Profile& profile, int device,
                                         const ProfileComparison& c, const RunResult& r);

std::string comparison_text(const ProfileComparison& c, size_t top = 20);
std::string comparison_csv(const ProfileComparison& c);
nlohmann::json comparison_json(const ProfileComparison& c);

}  // namespace tpusim
