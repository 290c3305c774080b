#include "app/worker_pool.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <optional>
#include <thread>
#include <vector>

#include "sim/error.h"
#include "sim/timing/engine.h"

namespace tpusim {

namespace {
std::atomic<bool> interrupted{false};
struct sigaction previous_sigint;
}  // namespace

InterruptFlag::InterruptFlag() {
  interrupted = false;
  struct sigaction on_sigint {};
  on_sigint.sa_handler = [](int) { interrupted = true; };
  sigemptyset(&on_sigint.sa_mask);
  sigaction(SIGINT, &on_sigint, &previous_sigint);
}
InterruptFlag::~InterruptFlag() { sigaction(SIGINT, &previous_sigint, nullptr); }
const std::atomic<bool>& InterruptFlag::flag() const { return interrupted; }

int default_jobs() { return std::max(1u, std::thread::hardware_concurrency()); }

namespace {

// One line per task: "<index> ok <result>" or "<index> error <message>" (results and messages
// are single lines).
std::string line(int index, bool ok, const std::string& text) {
  std::string t = text;
  std::replace(t.begin(), t.end(), '\n', ' ');
  return fmt::format("{} {} {}\n", index, ok ? "ok" : "error", t);
}

// A worker: takes the next task index until none is left, writes each result line to `fd`.
void work(std::atomic<int>& next, int count, const std::function<std::string(int)>& task, int fd) {
  for (int i; (i = next.fetch_add(1)) < count;) {
    std::string out;
    try {
      out = line(i, true, task(i));
    } catch (const std::exception& e) {
      out = line(i, false, e.what());
    }
    for (size_t at = 0; at < out.size();) {
      const ssize_t n = write(fd, out.data() + at, out.size() - at);
      if (n <= 0) _exit(1);
      at += static_cast<size_t>(n);
    }
  }
}

}  // namespace

void run_in_workers(int count, int jobs, const std::function<std::string(int)>& task,
                    const std::function<void(int, const std::string&)>& done,
                    const std::atomic<bool>* stop) {
  auto stopped = [&] { return stop && stop->load(); };
  jobs = std::max(1, std::min(jobs, count));
  if (jobs <= 1) {
    for (int i = 0; i < count && !stopped(); ++i) done(i, task(i));
    return;
  }
  void* shared = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) throw Error("cannot share a task counter with the workers");
  auto* next = new (shared) std::atomic<int>(0);
  std::vector<pid_t> pids;
  std::vector<pollfd> fds;
  std::fflush(nullptr);
  const pid_t parent = getpid();
  for (int w = 0; w < jobs; ++w) {
    int fd[2];
    if (pipe(fd) != 0) throw Error("cannot create a pipe to a worker");
    const pid_t pid = fork();
    if (pid < 0) throw Error("cannot fork a worker");
    if (pid == 0) {
      // A worker does not outlive the run: it is killed when the parent dies (or has already).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      std::signal(SIGINT, SIG_IGN);          // the parent decides: it stops dealing tasks
      SimOptions::set_default_progress({});  // the parent reports progress, by tasks
      close(fd[0]);
      work(*next, count, task, fd[1]);
      close(fd[1]);
      _exit(0);
    }
    close(fd[1]);
    pids.push_back(pid);
    fds.push_back({fd[0], POLLIN, 0});
  }
  std::vector<std::string> partial(jobs);
  std::optional<std::string> first_error;
  int open = jobs, received = 0;
  while (open > 0) {
    if (stopped()) next->store(count);    // no new tasks; the running ones finish
    for (pollfd& f : fds) f.revents = 0;  // a poll interrupted by a signal leaves them unset
    if (poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR) break;
    for (int w = 0; w < jobs; ++w) {
      if (fds[w].fd < 0 || !(fds[w].revents & (POLLIN | POLLHUP))) continue;
      char buf[65536];
      const ssize_t n = read(fds[w].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[w].fd);
        fds[w].fd = -1;
        --open;
        continue;
      }
      partial[w].append(buf, static_cast<size_t>(n));
      for (size_t nl; (nl = partial[w].find('\n')) != std::string::npos;) {
        const std::string l = partial[w].substr(0, nl);
        partial[w].erase(0, nl + 1);
        const size_t a = l.find(' '), b = l.find(' ', a + 1);
        const int index = std::stoi(l.substr(0, a));
        const std::string status = l.substr(a + 1, b - a - 1), text = l.substr(b + 1);
        ++received;
        if (first_error) continue;
        if (status != "ok") {
          first_error = text;
          next->store(count);  // no new tasks: the run fails anyway
          continue;
        }
        try {
          done(index, text);
        } catch (const std::exception& e) {
          first_error = e.what();
        }
      }
    }
  }
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  munmap(shared, sizeof(std::atomic<int>));
  if (first_error) throw Error(*first_error);
  if (received != count && !stopped())
    throw Error(fmt::format("a worker stopped early ({} of {} tasks done)", received, count));
}

}  // namespace tpusim
