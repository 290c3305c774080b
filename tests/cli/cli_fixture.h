// The fixture of the end-to-end tests of build/tpusim: a scratch folder per test, a runner that
// captures exit status, stdout and stderr, and the check that a failure is one clean error line.
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace tpusim::testing {

namespace fs = std::filesystem;

struct CmdResult {
  int status = -1;
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("tpusim_cli_{}",
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CmdResult run(const std::string& args) { return run_in("", args); }
  // The same, started in `cwd` (empty: the current directory).
  CmdResult run_in(const fs::path& cwd, const std::string& args) {
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string cmd =
        fmt::format("{}{} {} >{} 2>{}", cwd.empty() ? "" : "cd " + cwd.string() + " && ",
                    TPUSIM_BIN, args, out.string(), err.string());
    const int raw = std::system(cmd.c_str());
    CmdResult r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    fs::remove(out);
    fs::remove(err);
    return r;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  size_t files() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {}));
  }

  fs::path dir_;
};

inline void expect_clean_failure(const CmdResult& r, const std::string& message) {
  EXPECT_EQ(r.status, 2);  // docs/cli.md: bad input exits 2
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("tpusim: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
}

}  // namespace tpusim::testing
