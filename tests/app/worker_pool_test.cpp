// Worker processes: every task's result arrives once whatever the number of workers, a task's
// error stops the run with its message, and the workers share the tasks (a slow one does not hold
// up those after it).
#include "app/worker_pool.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
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

// Whether process `pid` has ended (gone, or a zombie nobody has reaped yet).
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
}

TEST(WorkerPool, WorkersDieWithTheRun) {
  int fd[2];
  ASSERT_EQ(pipe(fd), 0);
  const pid_t runner = fork();
  ASSERT_GE(runner, 0);
  if (runner == 0) {  // a run whose two workers each report their pid, then hang
    close(fd[0]);
    run_in_workers(
        2, 2,
        [&](int) {
          const pid_t me = getpid();
          if (write(fd[1], &me, sizeof me) != sizeof me) _exit(1);
          sleep(60);
          return std::string();
        },
        [](int, const std::string&) {});
    _exit(0);
  }
  close(fd[1]);
  pid_t workers[2];
  for (pid_t& w : workers) ASSERT_EQ(read(fd[0], &w, sizeof w), static_cast<ssize_t>(sizeof w));
  close(fd[0]);
  kill(runner, SIGKILL);
  waitpid(runner, nullptr, 0);
  for (pid_t w : workers) {
    for (int tries = 0; tries < 200 && !ended(w); ++tries) usleep(10000);
    EXPECT_TRUE(ended(w)) << "worker " << w << " outlived its run";
  }
}

}  // namespace
}  // namespace tpusim
