// Worker processes: every task's result arrives once whatever the number of workers, a task's
// error stops the run with its message, and the workers share the tasks (a slow one does not hold
// up those after it).
#include "app/worker_pool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>

#include "sim/error.h"
#include "tests/error_of.h"

namespace tpusim {
namespace {

std::map<int, std::string> run(int count, int jobs) {
  std::map<int, std::string> out;
  run_in_workers(
      count, jobs, [](int i) { return "task " + std::to_string(i * i); },
      [&](int i, const std::string& r) { EXPECT_TRUE(out.emplace(i, r).second) << i; });
  return out;
}

TEST(WorkerPool, EveryResultOnceWhateverTheWorkers) {
  const auto one = run(40, 1);
  ASSERT_EQ(one.size(), 40u);
  EXPECT_EQ(one.at(7), "task 49");
  EXPECT_EQ(run(40, 2), one);
  EXPECT_EQ(run(40, 5), one);
  EXPECT_EQ(run(3, 8), run(3, 1));  // more workers than tasks
  EXPECT_TRUE(run(0, 2).empty());
}

TEST(WorkerPool, ATaskErrorStopsTheRunWithItsMessage) {
  auto failing = [](int jobs) {
    return testing::error_of([&] {
      run_in_workers(
          10, jobs,
          [](int i) -> std::string {
            if (i == 4) throw Error("scenario 4: bad key");
            return "ok";
          },
          [](int, const std::string&) {});
    });
  };
  EXPECT_EQ(failing(1), "scenario 4: bad key");
  EXPECT_EQ(failing(3), "scenario 4: bad key");
}

TEST(WorkerPool, WorkersTakeTasksFromOneQueue) {
  // Task 0 is slow; with two workers the other worker runs every other task meanwhile, so the
  // slow task's worker does not also take tasks 2, 4, 6, ... as a round-robin deal would.
  std::map<int, std::string> pid_of;
  run_in_workers(
      8, 2,
      [](int i) {
        if (i == 0) usleep(1000000);  // a second: the other worker has long started
        return std::to_string(getpid());
      },
      [&](int i, const std::string& pid) { pid_of[i] = pid; });
  ASSERT_EQ(pid_of.size(), 8u);
  std::set<int> with_slow;
  for (const auto& [i, pid] : pid_of)
    if (pid == pid_of[0]) with_slow.insert(i);
  EXPECT_EQ(with_slow, std::set<int>{0});
}

}  // namespace
}  // namespace tpusim
