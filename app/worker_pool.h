// Runs independent tasks in worker processes (the engine's SystemC kernel is per process, so
// parallel simulations need processes, not threads). Workers take task indices from one shared
// counter, so a slow task does not hold up the ones dealt after it; each finished task's result
// (one line of text) goes back to the parent through a pipe. Workers die with the parent.
#pragma once
#include <atomic>
#include <functional>
#include <string>

namespace tpusim {

// The number of workers a `--jobs` of 0 means: the machine's cores.
int default_jobs();

// Calls `task(i)` for every i in [0, count) in `jobs` forked workers (in this process when jobs
// or count is 1) and `done(i, result)` in this process as results arrive, in arrival order. A
// task's Error is rethrown here (the first one, naming the task's message) once the workers
// have stopped; a worker that dies is an Error too. Once `*stop` turns true no task starts and
// the ones running finish (workers ignore SIGINT: a Ctrl-C reaches the parent, which sets it).
void run_in_workers(int count, int jobs, const std::function<std::string(int)>& task,
                    const std::function<void(int, const std::string&)>& done,
                    const std::atomic<bool>* stop = nullptr);

// While it lives, SIGINT (Ctrl-C) sets flag() instead of ending the process, so a long run can
// stop dealing work, let what runs finish and save it (run_in_workers' `stop`).
class InterruptFlag {
 public:
  InterruptFlag();
  ~InterruptFlag();
  InterruptFlag(const InterruptFlag&) = delete;
  InterruptFlag& operator=(const InterruptFlag&) = delete;
  const std::atomic<bool>& flag() const;
};

}  // namespace tpusim
