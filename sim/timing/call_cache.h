// Kernel calls kept for reuse. A call that starts with HBM idle does not depend on when it starts
// or on what ran before it (every core begins the call at its start, the pipe is free), so what it
// did replays an identical call exactly: in the same run (a loop's next iteration, the recompute
// of a forward kernel) and in later runs of the process (a sweep's next point, the GUI after a
// knob change that left the kernel as it was). Calls are identified by content (content_hash.h),
// not by object, so a kernel rebuilt with the same shapes and knobs is the same call.
#pragma once
#include <array>
#include <compare>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/timing/content_hash.h"
#include "sim/timing/result.h"

namespace tpusim {

// What a kernel call did, relative to its start.
struct CallRecord {
  std::vector<std::array<int64_t, kNumCauses>> time;  // per core, by cause
  std::vector<int64_t> cursor;                        // per core: where its clock ended
  std::vector<int64_t> busy;                          // per unit
  int64_t read = 0, write = 0, flops = 0, mxu_pass_flops = 0, cycles = 0;
  int64_t hbm_busy_after = 0;  // how long the HBM pipe stays busy (Hbm::busy_after)
  // Its timeline (when recorded): events relative to the start, and the text of the labels the
  // busy events and spans refer to (their `label` indexes this).
  std::vector<TimelineEvent> events;
  std::vector<std::string> labels;
};

struct CallKey {
  Digest kernel, chip;
  bool loop_iteration = false;  // the first body kernel of a loop iteration pays its overhead
  bool timeline = false;        // a record made with a timeline carries its events
  auto operator<=>(const CallKey&) const = default;
};

// The process's cache, shared by every simulation (thread-safe). It holds at most
// kMaxRecords records and kMaxEvents timeline events and starts over when either would overflow.
std::shared_ptr<const CallRecord> find_call(const CallKey& key);
void keep_call(const CallKey& key, std::shared_ptr<const CallRecord> record);
void clear_call_cache();
inline constexpr size_t kMaxRecords = 1 << 16;
inline constexpr size_t kMaxEvents = 1 << 21;

}  // namespace tpusim
