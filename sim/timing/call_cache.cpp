#include "sim/timing/call_cache.h"

#include <map>
#include <mutex>

namespace tpusim {
namespace {

struct Cache {
  std::mutex mutex;
  std::map<CallKey, std::shared_ptr<const CallRecord>> records;
  size_t events = 0;
};
Cache& cache() {
  static Cache c;
  return c;
}

}  // namespace

std::shared_ptr<const CallRecord> find_call(const CallKey& key) {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  auto it = c.records.find(key);
  return it == c.records.end() ? nullptr : it->second;
}

void keep_call(const CallKey& key, std::shared_ptr<const CallRecord> record) {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  if (c.records.size() + 1 > kMaxRecords || c.events + record->events.size() > kMaxEvents) {
    c.records.clear();
    c.events = 0;
  }
  const size_t events = record->events.size();
  if (events > kMaxEvents) return;
  if (c.records.emplace(key, std::move(record)).second) c.events += events;
}

void clear_call_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  c.records.clear();
  c.events = 0;
}

}  // namespace tpusim
