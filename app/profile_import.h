// A measured TPU profile as jax.profiler writes it for Perfetto (`perfetto_trace.json.gz`, or the
// same Chrome trace-event JSON uncompressed): per device process ("/device:TPU:N"), the lines
// "Steps", "XLA Modules" and "XLA Ops" with every executed HLO op and Pallas kernel, its start and
// duration. `tpusim import profile` writes the compact summary; `tpusim compare` matches the ops
// to a simulated program (app/profile_compare.h).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tpusim {

struct ProfileEvent {
  std::string name;
  double start_us = 0, duration_us = 0;
  std::map<std::string, std::string> args;  // the event's args as text (long_name, flops, ...)
  int64_t thread = 0;  // the trace's tid: ops on other threads may run at the same time
  // On the "XLA Ops" line a control-flow op (a while loop) spans the ops it runs: the index of
  // the innermost op of the same thread whose span holds this one (-1: none), and whether any op
  // lies inside it.
  int parent = -1;
  bool has_children = false;
  double end_us() const { return start_us + duration_us; }
};

struct ProfileDevice {
  std::string name;  // "/device:TPU:0"
  std::vector<ProfileEvent> steps, modules, ops;
  std::map<std::string, int> other_lines;  // events on lines not read, by line name
};

struct Profile {
  std::string path;
  std::vector<ProfileDevice> devices;  // the TPU devices in pid order, then the CPU ones
};

// Device `index` of the profile; an Error naming the file when it has no such device.
const ProfileDevice& profile_device(const Profile& p, int index);

// Reads a Chrome trace-event JSON file, gzip-compressed or not, or the one trace in a profile
// directory (jax.profiler's plugins/profile/RUN/); an .xplane.pb is an Error saying how the
// bridge converts it. A file that is not one, or has no
// device, is an Error naming the file. Devices are the TPU processes and, for a profile of XLA on
// the CPU (no device process), /device:CPU:N from the host threads' thunks named by HLO op. Each
// device's ops come sorted by start (the enclosing op first) with their nesting set; a device's op
// time is that of its leaf ops (an enclosing op's span is its children's time and the gaps between
// them).
Profile load_profile(const std::string& path_or_directory);

// {"tool", "file", "devices": [{"name", "steps", "modules", "ops": [{"name", "count",
// "total_us", "category", "holds_ops", and "flops", "model_flops", "bytes_accessed",
// "raw_bytes_accessed" where the ops carry them, summed}], "other_lines"}]}: per device each op
// name once, with its count and time (0 for an op holding others, a loop, whose time is theirs).
nlohmann::json profile_summary_json(const Profile& p);

}  // namespace tpusim
