// Runs the GUI's simulations one at a time on a worker thread (SystemC's kernel is global). There
// is one waiting slot per kind of job (knobs, scenario file): the newest request replaces the
// waiting one of its kind, so dragging a knob never queues up stale runs nor drops an opened file.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "gui/simulation.h"

namespace tpusim::gui {

class Worker {
 public:
  enum Slot { knobs, scenario, slots };
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void submit(Slot slot, std::function<Outcome()> job) {
    {
      std::lock_guard<std::mutex> l(m_);
      pending_[slot] = std::move(job);
      busy_ = true;
    }
    cv_.notify_all();
  }
  bool busy() const { return busy_; }
  std::optional<Outcome> take() {
    std::lock_guard<std::mutex> l(m_);
    if (done_.empty()) return std::nullopt;
    Outcome o = std::move(done_.front());
    done_.erase(done_.begin());
    return o;
  }

 private:
  bool any_pending() const { return pending_[0] || pending_[1]; }
  void loop() {
    for (;;) {
      std::function<Outcome()> job;
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return stop_ || any_pending(); });
        if (stop_) return;
        auto& next = pending_[0] ? pending_[0] : pending_[1];
        job = std::move(next);
        next = nullptr;
      }
      Outcome o = job();
      std::lock_guard<std::mutex> l(m_);
      done_.push_back(std::move(o));
      busy_ = any_pending();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::function<Outcome()> pending_[slots];
  std::vector<Outcome> done_;
  std::atomic<bool> busy_{false};
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tpusim::gui
