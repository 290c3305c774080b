// End-to-end tests of what bounds a run: the work limits (--max-grid-steps, --max-events), a step
// over HBM (or its pinned host memory) reported without timing unless --simulate-anyway, one that
// fits only by gathering
// synchronously, and outputs to a read-only
// filesystem (a clean error and no file committed, not an abort).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_fixture.h"

namespace {

using tpusim::testing::Cli;
using tpusim::testing::CmdResult;
using tpusim::testing::expect_clean_failure;
using tpusim::testing::slurp;
namespace fs = std::filesystem;

// Gemma 3 12B at sequence 32768 on v6e-256 does not fit HBM in tpusim's memory model (nor in the
// compiler's: its logits and their gradient alone are over, so no gather schedule helps).
const std::string kOverHbm =
    std::string(TPUSIM_SOURCE_DIR) + "/scenarios/blind/b5_19_v6e-256_gemma3-12b.yaml";

TEST_F(Cli, AStepOverHbmIsReportedUntimedUnlessSimulatedAnyway) {
  CmdResult r = run(fmt::format("run {} --json {}", kOverHbm, path("untimed.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("step not timed: it does not fit HBM (--simulate-anyway times it)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("does NOT fit"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("step time"), std::string::npos) << r.out;
  const auto untimed = nlohmann::json::parse(slurp(path("untimed.json")));
  EXPECT_EQ(untimed["timed"], false);
  EXPECT_EQ(untimed["fits_hbm"], false);
  EXPECT_TRUE(untimed["step_time_s"].is_null());
  EXPECT_TRUE(untimed["parts"].empty());
  EXPECT_GT(untimed["peak_hbm_bytes"].get<double>(), untimed["hbm_capacity_bytes"].get<double>());

  r = run(fmt::format("run {} --simulate-anyway --json {}", kOverHbm, path("timed.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("step time"), std::string::npos) << r.out;
  const auto timed = nlohmann::json::parse(slurp(path("timed.json")));
  EXPECT_EQ(timed["timed"], true);
  EXPECT_GT(timed["step_time_s"].get<double>(), 0);
  EXPECT_FALSE(timed["parts"].empty());
  // Timing changes nothing of the memory and FLOP count.
  for (const char* key : {"peak_hbm_bytes", "hbm_capacity_bytes", "model_flops_per_chip", "memory"})
    EXPECT_EQ(timed[key], untimed[key]) << key;
}

// B5 #33 (DeepSeek-V3 671B, v5p-1024) offloads five tensors a layer: 538 GiB a chip, over the
// 128 GiB of pinned host memory a chip may hold (the compiler refuses it for the same reason). It
// fits HBM, and is reported untimed all the same.
TEST_F(Cli, AStepOverItsPinnedHostMemoryIsReportedUntimed) {
  const std::string scenario =
      std::string(TPUSIM_SOURCE_DIR) + "/scenarios/blind/b5_33_v5p-1024_deepseek3-671b.yaml";
  const CmdResult r = run(fmt::format("run {} --json {}", scenario, path("host.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("step not timed: it does not fit its pinned host memory"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("pinned host memory (remat offload) 537.56 GiB of 128.00 GiB (does NOT "
                       "fit: over by 409.56 GiB)"),
            std::string::npos)
      << r.out;
  const auto j = nlohmann::json::parse(slurp(path("host.json")));
  EXPECT_EQ(j["timed"], false);
  EXPECT_EQ(j["fits_hbm"], true);
  EXPECT_EQ(j["fits_host"], false);
  EXPECT_EQ(j["host_capacity_bytes"], int64_t{128} << 30);
}

// C5 #14 (GPT-3 175B, v6e-256) fits only without prefetching the next layer's weights in the
// backward: it is timed, and the report and the JSON say its backward gathers are synchronous.
TEST_F(Cli, AStepThatFitsOnlyWithoutPrefetchSaysItsGathersAreSynchronous) {
  const std::string scenario =
      std::string(TPUSIM_SOURCE_DIR) + "/scenarios/calibration/c5/c5_14_v6e-256_gpt3-175b.yaml";
  const CmdResult r = run(fmt::format("run {} --json {}", scenario, path("s.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(fits)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gathers synchronous: the next layer's prefetch would not fit"),
            std::string::npos)
      << r.out;
  const auto j = nlohmann::json::parse(slurp(path("s.json")));
  EXPECT_EQ(j["timed"], true);
  EXPECT_EQ(j["backward_gathers_prefetched"], false);
}

TEST_F(Cli, WorkLimitsRefuseBeforeSimulatingAndStopARunningTimeline) {
  const std::string matmul = "kernel matmul --m 2048 --k 2048 --n 2048 --bm 128 --bk 128 --bn 128";
  // 16 x 16 x 16 = 4096 grid steps.
  expect_clean_failure(run("--max-grid-steps 4095 " + matmul),
                       "has 4096 grid steps, more than the limit of 4095 (--max-grid-steps)");
  EXPECT_EQ(run("--max-grid-steps 4096 " + matmul).status, 0);
  expect_clean_failure(run(fmt::format("--max-events 1000 {} --trace {} --json {}", matmul,
                                       path("t.json"), path("r.json"))),
                       "over the limit of 1000 (--max-events)");
  EXPECT_EQ(files(), 0u);  // neither output written
  EXPECT_EQ(run(fmt::format("--max-events 1000 {} --json {}", matmul, path("r.json"))).status, 0)
      << "a run without a timeline records no events";
}

// A read-only filesystem, mounted in a private mount namespace (root) or a folder without write
// permission (other users): the error says so, and the other output is not committed either.
TEST_F(Cli, AReadOnlyOutputIsAnErrorAndCommitsNothing) {
  const fs::path ro = dir_ / "ro";
  fs::create_directories(ro);
  std::string prefix;
  if (geteuid() == 0) {
    if (std::system("unshare -m true 2>/dev/null") != 0)
      GTEST_SKIP() << "root without mount namespaces: no way to make a read-only folder";
    prefix = fmt::format("unshare -m sh -c 'mount -t tmpfs -o ro tmpfs {} && exec \"$0\" \"$@\"' ",
                         ro.string());
  } else {
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  }
  const std::string cmd = fmt::format(
      "{}{} kernel matmul --m 256 --k 256 --n 256 --bm 128 --bk 128 --bn 128 --trace {} --json {} "
      ">{} 2>{}",
      prefix, TPUSIM_BIN, path("t.json"), (ro / "r.json").string(), path("out"), path("err"));
  const int raw = std::system(cmd.c_str());
  EXPECT_EQ(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 2);
  const std::string err = slurp(path("err"));
  EXPECT_EQ(err.rfind("tpusim: error: cannot write", 0), 0u) << err;
  EXPECT_NE(err.find(geteuid() == 0 ? "Read-only file system" : "Permission denied"),
            std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(path("t.json")));
  fs::permissions(ro, fs::perms::owner_all);
  EXPECT_TRUE(fs::is_empty(ro));
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
}

}  // namespace
