// End-to-end tests of build/tpusim: help on every command, JSON and trace outputs, determinism,
// and bad input (one-line error, non-zero exit, no partial output files).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "kernels/catalog.h"
#include "tests/cli/cli_fixture.h"

namespace {

using tpusim::testing::Cli;
using tpusim::testing::CmdResult;
using tpusim::testing::expect_clean_failure;
using tpusim::testing::slurp;
namespace fs = std::filesystem;

const char* kMatmul =
    "kernel matmul --chip v5e --m 2048 --k 2048 --n 2048 --bm 512 --bk 1024 --bn 1024";

TEST_F(Cli, HelpOnEveryCommand) {
  for (const char* cmd : {"", "kernel", "kernel matmul", "kernel xla-dot", "kernel elementwise",
                          "chip", "calibrate", "bench", "import", "import profile", "compare"}) {
    const CmdResult r = run(fmt::format("{} --help", cmd));
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_NE(r.out.find("--help"), std::string::npos) << cmd;
  }
  EXPECT_NE(run("kernel matmul --help").out.find("--trace"), std::string::npos);
}

// The kernel commands are generated from the catalog: every kernel is listed, and its help
// names every knob with its help text.
TEST_F(Cli, KernelHelpListsEveryCatalogKernelAndKnob) {
  const std::string list = run("kernel --help").out;
  for (const tpusim::kernels::CatalogEntry& e : tpusim::kernels::catalog()) {
    EXPECT_NE(list.find(e.name), std::string::npos) << e.name;
    const CmdResult r = run("kernel " + e.name + " --help");
    EXPECT_EQ(r.status, 0) << e.name;
    for (const tpusim::kernels::Knob& k : e.knobs) {
      EXPECT_NE(r.out.find("--" + k.name), std::string::npos) << e.name << " --" << k.name;
      EXPECT_NE(r.out.find(k.help.substr(0, 20)), std::string::npos) << e.name << " " << k.name;
    }
  }
}

TEST_F(Cli, MatmulPrintsSummaryAndWritesJsonAndTrace) {
  const CmdResult r =
      run(fmt::format("{} --json {} --trace {}", kMatmul, path("r.json"), path("t.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* s :
       {"time", "TFLOP/s", "% of the 197 TFLOP/s bf16 peak", "busy", "step_overhead", "VMEM"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  const auto j = nlohmann::json::parse(slurp(path("r.json")));
  for (const char* key :
       {"time_s", "cycles", "flops", "hbm_bytes", "vmem_peak_bytes", "busy_s", "stall_s"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["flops"].get<int64_t>(), 2LL * 2048 * 2048 * 2048);
  const auto t = nlohmann::json::parse(slurp(path("t.json")));
  EXPECT_GT(t["traceEvents"].size(), 100u);
}

TEST_F(Cli, SameInputsGiveByteIdenticalOutputs) {
  ASSERT_EQ(
      run(fmt::format("{} --json {} --trace {}", kMatmul, path("a.json"), path("a.trace"))).status,
      0);
  ASSERT_EQ(
      run(fmt::format("{} --json {} --trace {}", kMatmul, path("b.json"), path("b.trace"))).status,
      0);
  EXPECT_EQ(slurp(path("a.json")), slurp(path("b.json")));
  EXPECT_EQ(slurp(path("a.trace")), slurp(path("b.trace")));
}

TEST_F(Cli, UsageErrorsAreOneLineWithExitCodeTwo) {
  expect_clean_failure(run("kernel matmul --chip v5e --m 64"), "--k is required (see --help)");
  expect_clean_failure(run("kernel matmul --m 8 --k 8 --n 8 --bm 8 --bk 8 --bn x"),
                       "--bn: 'x' is not an integer (see --help)");
  expect_clean_failure(run(""), "A subcommand is required (see --help)");
}

TEST_F(Cli, KnobOutOfRangeIsAnError) {
  expect_clean_failure(run("kernel xla-dot --m 0 --k 8 --n 8"),
                       "--m: 0 is outside 1..1048576 (see --help)");
  expect_clean_failure(run("kernel gdn-scan-fwd --precision high"),
                       "--precision: high not in {default,highest} (see --help)");
}

TEST_F(Cli, UnknownChip) {
  expect_clean_failure(
      run(fmt::format("kernel matmul --chip v9 --m 1024 --k 1024 --n 1024 --bm 128 --bk 128 "
                      "--bn 128 --json {}",
                      path("r.json"))),
      "unknown chip 'v9' (known chips: v5e, v5p, v6e; or a path to a .yaml file)");
  EXPECT_EQ(files(), 0u);
}

TEST_F(Cli, ImpossibleBlockShape) {
  expect_clean_failure(
      run(fmt::format("kernel matmul --m 1000 --k 1024 --n 1024 --bm 100 --bk 1024 "
                      "--bn 1024 --json {} --trace {}",
                      path("r.json"), path("t.json"))),
      "dim 0 = 100 is neither a multiple of 8 nor the full dimension 1000");
  EXPECT_EQ(files(), 0u);
}

TEST_F(Cli, KernelOverVmemLimitNamesBuffersBytesAndLimit) {
  const CmdResult r =
      run(fmt::format("kernel matmul --chip v5e --m 8192 --k 8192 --n 8192 --bm 1024 --bk 2048 "
                      "--bn 2048 --json {}",
                      path("r.json")));
  expect_clean_failure(r, "over the scoped VMEM limit on v5e of 16.00 MiB (16777216 B)");
  EXPECT_NE(r.err.find("input y block [2048,2048] bf16 x2 buffers = 16.00 MiB"), std::string::npos)
      << r.err;
  EXPECT_EQ(files(), 0u);
}

TEST_F(Cli, ChipCommandShowsValuesUnitsKindsAndSources) {
  const CmdResult r = run("chip v5p --json " + path("c.json"));
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("tensorcores"), std::string::npos);
  EXPECT_NE(r.out.find(" 459e12 FLOP/s     source     "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("calibrated fitted by"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(slurp(path("c.json")));
  EXPECT_EQ(j["values"]["hbm_bytes_per_s"]["unit"], "B/s");
  EXPECT_EQ(j["values"]["tensorcores"]["value"], "2");
  EXPECT_EQ(j["values"]["dma_queues"]["kind"], "assumed");
  EXPECT_NE(j["values"]["tensorcores"]["source"].get<std::string>().find("CLOUD-v5p"),
            std::string::npos);
}

TEST_F(Cli, GdnLayerJsonHasTimeAndStages) {
  const CmdResult r = run(fmt::format(
      "kernel gdn-layer --chip v5e --build heads --batch-per-chip 1 --seq 1024 --heads 8 "
      "--chunk 128 --json {}",
      path("g.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("by stage:"), std::string::npos);
  const auto j = nlohmann::json::parse(slurp(path("g.json")));
  double sum = 0;
  std::set<std::string> stages;
  for (const auto& st : j["stages"]) {
    sum += st["time_s"].get<double>();
    stages.insert(st["stage"]);
  }
  for (const char* st :
       {"fwd: inversion", "fwd: scan", "remat: scan", "bwd: scan", "bwd: inversion"})
    EXPECT_TRUE(stages.count(st)) << st;
  // The stages cover the run but for the host dispatch.
  EXPECT_NEAR(sum + j["stall_s"]["dispatch"].get<double>(), j["time_s"].get<double>(), 1e-9);
  EXPECT_EQ(j["config"]["build"], "heads");
}

TEST_F(Cli, EveryGdnKernelCommandRuns) {
  for (const char* cmd : {"gdn-scan-fwd --head-tile-fwd 8", "gdn-scan-bwd --head-tile-bwd 4",
                          "gdn-lax-scan --pass remat", "gdn-lax-scan --pass bwd",
                          "gdn-invert --tile-n 4", "gdn-solve-triangular"}) {
    const CmdResult r = run(fmt::format("kernel {} --seq 1024 --heads 8", cmd));
    EXPECT_EQ(r.status, 0) << cmd << ": " << r.err;
    EXPECT_NE(r.out.find("TFLOP/s"), std::string::npos) << cmd;
  }
}

TEST_F(Cli, GdnBadInput) {
  expect_clean_failure(run("kernel gdn-layer --build fast"),
                       "--build: fast not in {main,scan,heads,ladder,doubling} (see --help)");
  expect_clean_failure(run("kernel gdn-scan-fwd --seq 1000 --chunk 128"),
                       "GDN shape: seq 1000 is not a multiple of the chunk size 128");
  expect_clean_failure(run("kernel gdn-scan-fwd --head-tile-fwd 5"),
                       "head tile 5 must divide the 32 heads");
  const CmdResult r =
      run(fmt::format("kernel gdn-scan-bwd --head-tile-bwd 8 --json {}", path("x.json")));
  expect_clean_failure(r, "kernel 'gdn scan bwd (th=8)' needs 18.81 MiB");
  EXPECT_EQ(files(), 0u);
}

TEST_F(Cli, RunPrintsTheStepAndWritesJson) {
  const CmdResult r = run(fmt::format("run {}/scenarios/calibration/c1/c1_ladder.yaml --json {}",
                                      TPUSIM_SOURCE_DIR, path("s.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* s : {"step time", "tokens/s/chip", "TFLOP/s/chip", "MFU", "peak HBM",
                        "gdn layer", "measured step_time_s", "TensorCore time by cause",
                        "unit busy (mean over each kind's units):  mxu "})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  const auto j = nlohmann::json::parse(slurp(path("s.json")));
  for (const char* key :
       {"step_time_s", "tokens_per_s_per_chip", "tflops_per_chip", "mfu", "peak_hbm_bytes",
        "hbm_capacity_bytes", "fits_hbm", "parts", "memory", "unit_utilization"})
    EXPECT_TRUE(j.contains(key)) << key;
  for (const char* unit : {"mxu", "vpu", "hbm", "dma", "collective links"}) {
    const double share = j["unit_utilization"][unit].get<double>();
    EXPECT_GT(share, 0) << unit;
    EXPECT_LT(share, 1) << unit;
  }
  EXPECT_NEAR(j["step_time_s"].get<double>() * j["tokens_per_s_per_chip"].get<double>(), 4096,
              1e-6);
}

TEST_F(Cli, RunTraceHoldsOneLayerOfEachKind) {
  std::ofstream(path("small.yaml"))
      << "chip: v5e\nchips: 8\nmodel: b1-dense-gdn\nseq: 1024\nbatch_per_chip: 1\n"
         "gdn: {build: ladder, chunk: 128}\n";
  const CmdResult r = run(fmt::format("run {} --trace {}", path("small.yaml"), path("t.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto t = nlohmann::json::parse(slurp(path("t.json")));
  std::set<std::string> stages;
  for (const auto& e : t["traceEvents"])
    if (e.contains("args") && e["args"].contains("stage")) stages.insert(e["args"]["stage"]);
  for (const char* st :
       {"attention layer / fwd: attention", "gdn layer / fwd: scan", "gdn layer / fwd: inversion",
        "gdn layer / bwd: mlp", "embedding + logits / fwd: logits"})
    EXPECT_TRUE(stages.count(st)) << st;
}

// The op profile (text, CSV, JSON), the roofline and the plots of validate and sweep, from the
// command line: written where asked, announced, and an unknown plot metric is refused before any
// point runs.
TEST_F(Cli, ProfilesRooflinesAndPlots) {
  CmdResult r =
      run(fmt::format("{} --profile {} --roofline {}", kMatmul, path("p.csv"), path("roof.svg")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(slurp(path("p.csv")).rfind("op,origin,calls,time_s,", 0), 0u);
  EXPECT_NE(slurp(path("roof.svg")).find("</svg>"), std::string::npos);
  EXPECT_NE(r.err.find("wrote " + path("roof.svg")), std::string::npos) << r.err;
  r = run(fmt::format("{} --profile -", kMatmul));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("MXU      matmul"), std::string::npos) << r.out;
  r = run(fmt::format("run {}/scenarios/calibration/c1/c1_ladder.yaml --profile {}",
                      TPUSIM_SOURCE_DIR, path("p.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto profile = nlohmann::json::parse(slurp(path("p.json")));
  EXPECT_GT(profile["ops"].size(), 10u);
  r = run(fmt::format("validate {}/scenarios/calibration/c3 --plot {}", TPUSIM_SOURCE_DIR,
                      path("v.svg")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(slurp(path("v.svg")).find("</svg>"), std::string::npos);  // plots_test reads them
  const std::string sweep =
      fmt::format("sweep {}/scenarios/sweeps/ladder_tiles.yaml --csv {} --json {}",
                  TPUSIM_SOURCE_DIR, path("s.csv"), path("s.json"));
  r = run(sweep + " --plot " + path("s.svg") + " --metric no_such_metric");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no metric 'no_such_metric'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("points/s"), std::string::npos) << "refused before running: " << r.err;
  r = run(sweep + " --plot " + path("s.svg"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(slurp(path("s.svg")).find("</svg>"), std::string::npos);
}

// A sweep killed with SIGKILL keeps the points it finished in its journal; --resume runs the rest
// and ends with the same CSV as an uninterrupted run. A journal of another sweep is refused.
TEST_F(Cli, KilledSweepResumesToTheSameCsv) {
  const std::string sweep =
      fmt::format("sweep {}/scenarios/sweeps/gdn_knobs.yaml --jobs 1", TPUSIM_SOURCE_DIR);
  ASSERT_EQ(
      run(fmt::format("{} --csv {} --json {}", sweep, path("full.csv"), path("full.json"))).status,
      0);
  const std::string part =
      fmt::format("{} --csv {} --json {}", sweep, path("part.csv"), path("part.json"));
  // Started in the background and killed with SIGKILL once ten points are in its journal.
  std::system(
      fmt::format("{} {} >/dev/null 2>&1 & echo $! >{}", TPUSIM_BIN, part, path("pid")).c_str());
  const std::string pid = slurp(path("pid"));
  auto journaled = [&] {
    const std::string j = slurp(path("part.csv.journal"));
    return std::count(j.begin(), j.end(), '\n');
  };
  for (int wait = 0; wait < 3000 && journaled() < 10; ++wait) usleep(1000);
  std::system(fmt::format("kill -9 {}", pid).c_str());
  usleep(100'000);
  EXPECT_FALSE(fs::exists(path("part.csv"))) << "killed before the end";
  EXPECT_GE(journaled(), 10);
  ASSERT_TRUE(fs::exists(path("part.csv.journal")));
  const CmdResult resumed = run(part + " --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(slurp(path("part.csv")), slurp(path("full.csv")));
  EXPECT_FALSE(fs::exists(path("part.csv.journal")));  // done: the journal goes
  // A journal that does not belong to the sweep.
  std::ofstream(path("other.csv.journal")) << R"({"index": 3, "values": ["v9"], "ok": true})"
                                           << "\n";
  expect_clean_failure(
      run(fmt::format("{} --csv {} --resume", sweep, path("other.csv"))),
      "other.csv.journal:1: a point this sweep does not have (the sweep file or --shard changed "
      "since; delete the journal to start over)");
  expect_clean_failure(run(fmt::format("{} --csv {} --resume", sweep, path("none.csv"))),
                       "--resume: no journal '" + path("none.csv.journal") + "' to continue from");
}

// Ctrl-C: the points in flight finish, the journal keeps every point done, no CSV is written,
// and the message says how to resume; the exit status is 130.
TEST_F(Cli, InterruptedSweepSaysHowToResume) {
  const std::string cmd = fmt::format(
      "exec {} sweep {}/scenarios/sweeps/gdn_knobs.yaml --jobs 2 --csv {} --json {} "
      "2>{}",
      TPUSIM_BIN, TPUSIM_SOURCE_DIR, path("s.csv"), path("s.json"), path("err"));
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  auto journaled = [&] {
    const std::string j = slurp(path("s.csv.journal"));
    return std::count(j.begin(), j.end(), '\n');
  };
  for (int wait = 0; wait < 3000 && journaled() < 10; ++wait) usleep(1000);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  const std::string err = slurp(path("err"));
  EXPECT_NE(err.find("tpusim: interrupted: "), std::string::npos) << err;
  EXPECT_NE(err.find(" --resume` continues"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(path("s.csv")));
  EXPECT_GE(journaled(), 10);
}

// Outputs go where they are named without replacing what is there: '-' is stdout (the summary
// moves to stderr), a symlink is written through, a FIFO or device in place; a stdout that
// cannot be written is an error.
TEST_F(Cli, OutputsToStdoutLinksFifosAndDevices) {
  const std::string small = "kernel matmul --m 256 --k 256 --n 256 --bm 128 --bk 128 --bn 128";
  CmdResult r = run(small + " --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["flops"], 2 * 256 * 256 * 256);
  EXPECT_NE(r.err.find("TFLOP/s"), std::string::npos);  // the summary, on stderr
  expect_clean_failure(run(small + " --json - --trace -"), "two outputs are given as '-' (stdout)");

  fs::create_symlink(path("target.json"), path("link.json"));
  ASSERT_EQ(run(fmt::format("{} --json {}", small, path("link.json"))).status, 0);
  EXPECT_TRUE(fs::is_symlink(path("link.json")));
  EXPECT_TRUE(nlohmann::json::parse(slurp(path("target.json"))).contains("flops"));

  ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);
  std::system(fmt::format("cat {} >{} &", path("fifo"), path("from_fifo")).c_str());
  ASSERT_EQ(run(fmt::format("{} --json {}", small, path("fifo"))).status, 0);
  usleep(200'000);
  EXPECT_TRUE(fs::is_fifo(path("fifo")));
  EXPECT_TRUE(nlohmann::json::parse(slurp(path("from_fifo"))).contains("flops"));

  const int raw =
      std::system(fmt::format("{} chip v5e >/dev/full 2>{}", TPUSIM_BIN, path("full_err")).c_str());
  EXPECT_EQ(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 2);
  EXPECT_EQ(slurp(path("full_err")), "tpusim: error: cannot write to stdout\n");
}

TEST_F(Cli, ValidateWritesRowsAndTheReport) {
  const CmdResult r =
      run(fmt::format("validate {}/scenarios/calibration/c3 --json {} --markdown {}",
                      TPUSIM_SOURCE_DIR, path("v.json"), path("v.md")));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(path("v.json")));
  ASSERT_GE(j["rows"].size(), 12u);
  for (const auto& row : j["rows"])
    for (const char* key : {"scenario", "metric", "predicted", "measured", "error_pct"})
      EXPECT_TRUE(row.contains(key)) << key;
  EXPECT_NE(slurp(path("v.md")).find("Median absolute error"), std::string::npos);
}

// validate writes only what it is asked to (the repository's docs/ only with --write), says what
// it wrote, and its JSON holds the blind predictions and the tool's version.
TEST_F(Cli, ValidateWritesNothingUnaskedAndItsJsonHasTheBlindRows) {
  const fs::path doc = fs::path(TPUSIM_SOURCE_DIR) / "docs" / "validation.md";
  const std::string before = slurp(doc);
  const auto stamp = fs::last_write_time(doc);
  const CmdResult r =
      run(fmt::format("validate {0}/scenarios/calibration/c3/c3_01_v6e_llama3.1-8b.yaml "
                      "{0}/scenarios/blind/b1_v6e-8_main.yaml --json {1}",
                      TPUSIM_SOURCE_DIR, path("v.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(slurp(doc), before);
  EXPECT_EQ(fs::last_write_time(doc), stamp);
  EXPECT_EQ(files(), 1u);  // v.json only
  EXPECT_NE(r.err.find("wrote " + path("v.json") + " ("), std::string::npos) << r.err;
  // Progress per scenario on stderr; a short summary on stdout.
  EXPECT_NE(r.err.find("validate: [2/2] "), std::string::npos) << r.err;
  EXPECT_EQ(r.out.rfind("predicted against measured: 4 rows, median |error| ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("blind predictions (1; measured results withheld):\n  b1_v6e-8_main"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(run(fmt::format("validate {}/scenarios/blind/b1_v6e-8_main.yaml --markdown -",
                            TPUSIM_SOURCE_DIR))
                .out.rfind("# Validation", 0),
            0u);
  const auto j = nlohmann::json::parse(slurp(path("v.json")));
  ASSERT_EQ(j["blind"].size(), 1u);
  EXPECT_EQ(j["blind"][0]["scenario"], "b1_v6e-8_main");
  EXPECT_GT(j["blind"][0]["step_time_s"].get<double>(), 0);
  EXPECT_EQ(j["tool"]["name"], "tpusim");
  EXPECT_FALSE(j["tool"]["revision"].get<std::string>().empty());
}

TEST_F(Cli, VersionAndWroteLines) {
  CmdResult r = run("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out.rfind("tpusim 0.1 (git ", 0), 0u) << r.out;
  r = run(fmt::format("{} --json {} --trace {}", kMatmul, path("r.json"), path("t.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + path("r.json") + " ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("wrote " + path("t.json") + " ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("open it in https://ui.perfetto.dev"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(path("r.json")))["tool"]["version"], "0.1");
}

TEST_F(Cli, BadScenarioFails) {
  std::ofstream(path("bad.yaml")) << "chip: v5e\nchips: 256\nmodel: maxtext-16b\nseq: "
                                     "2048\nbatch_per_chip: 6\nmesh: {fsdp: 3}\n";
  expect_clean_failure(run(fmt::format("run {} --json {}", path("bad.yaml"), path("out.json"))),
                       "bad.yaml:6:7: key 'mesh': fsdp 3 x tensor 1 x context 1 = 3 is not the 256 "
                       "chips of the slice");
  EXPECT_FALSE(fs::exists(path("out.json")));
}

}  // namespace

// A program compiled by libtpu (committed: tests/data/hlo) on its own chip or another, and a
// program exported from JAX, through `run`.
TEST_F(Cli, ImportProfileAndCompareItPerOp) {
  const std::string data = std::string(TPUSIM_SOURCE_DIR) + "/tests/data/";
  const std::string trace = data + "profile/gdn_main_path_trace.json.gz";
  CmdResult r = run(fmt::format("import profile {} --json {}", trace, path("p.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("/device:TPU:0: 2 steps, 2 modules, 8 op names, 0.302 ms of ops"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("wrote " + path("p.json")), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(path("p.json")))["devices"][0]["ops"].size(), 8u);
  r = run(fmt::format("compare --hlo {}hlo/gdn_main_path {} --csv {} --json {}", data, trace,
                      path("c.csv"), path("c.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("/device:TPU:0 (2 steps): measured 151.00 us per step in 8 op names; "
                       "matched 7 ops"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("measured, not in the program: mystery.1 5.00 us"), std::string::npos)
      << r.out;
  const std::string csv = slurp(path("c.csv"));
  EXPECT_EQ(csv.rfind("name,class,match,count_per_step,measured_s,predicted_s,error_pct\n", 0), 0u);
  const auto j = nlohmann::json::parse(slurp(path("c.json")));
  EXPECT_EQ(j["steps"], 2);
  EXPECT_EQ(j["ops"].size(), 7u);
}

// `compare SCENARIO PROFILE`: the step's parts against the profile's layer loops and the rest
// (sums by hand in tests/app/profile_test.cpp); the wrong number of inputs is one error line.
TEST_F(Cli, CompareAScenarioWithAProfileByStructure) {
  const std::string data = std::string(TPUSIM_SOURCE_DIR) + "/tests/data/profile/";
  const std::string args = data + "small_step.yaml " + data + "small_step_trace.json.gz";
  CmdResult r =
      run(fmt::format("compare {} --csv {} --json {}", args, path("s.csv"), path("s.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("/device:TPU:0 (2 steps): measured step 1.082 ms, predicted"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("layer loop of 4 trips"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("measured only: loop while.50 (2 trips) 10.00 us"), std::string::npos)
      << r.out;
  const std::string csv = slurp(path("s.csv"));
  EXPECT_EQ(csv.rfind("name,match,trips,measured_s,predicted_s,error_pct\n", 0), 0u) << csv;
  // quoted: the name holds a comma
  EXPECT_NE(csv.find("\"layer loop, forward\",both,4,0.00038,"), std::string::npos) << csv;
  const auto j = nlohmann::json::parse(slurp(path("s.json")));
  EXPECT_EQ(j["rows"].size(), 6u);
  EXPECT_EQ(j["layer_trips"], 4);
  for (const std::string bad :
       {"compare " + data + "small_step_trace.json.gz", "compare " + args + " --chip v6e"}) {
    r = run(bad + " --json " + path("no.json"));
    EXPECT_EQ(r.status, 2) << bad;
    EXPECT_NE(r.err.find("compare: "), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(path("no.json")));
  }
}

// `calibrate --profile`: the report names what each constant governs; nothing is written without
// --write, and with it the moved row-step latency lands in a copy of the chip files (the
// repository's are not touched), its provenance naming the profile.
TEST_F(Cli, CalibrateOnAProfileReportsAndWritesOnlyWhenAsked) {
  const std::string data = std::string(TPUSIM_SOURCE_DIR) + "/tests/data/";
  const std::string args = fmt::format(
      "calibrate --profile {}profile/gdn_main_path_trace.json.gz "
      "--hlo {}hlo/gdn_main_path",
      data, data);
  CmdResult r = run(args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("nothing written without --write"), std::string::npos) << r.out;
  const size_t row = r.out.find("xla_row_solve_step_cycles    ");
  ASSERT_NE(row, std::string::npos) << r.out;
  EXPECT_NE(r.out.substr(row, r.out.find('\n', row) - row)
                .find("governs 1 ops: measured 100.00 us, predicted"),
            std::string::npos)
      << r.out;
  const fs::path models = path("models");
  fs::copy(std::string(TPUSIM_SOURCE_DIR) + "/models", models, fs::copy_options::recursive);
  setenv("TPUSIM_MODELS_DIR", models.c_str(), 1);
  r = run(args + " --write");
  unsetenv("TPUSIM_MODELS_DIR");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string shared = slurp(models / "chips" / "shared.yaml");
  EXPECT_NE(shared.find("calibrated: \"tpusim calibrate --profile "), std::string::npos) << shared;
  EXPECT_EQ(slurp(std::string(TPUSIM_SOURCE_DIR) + "/models/chips/shared.yaml")
                .find("tpusim calibrate --profile"),
            std::string::npos);
  expect_clean_failure(run(fmt::format("calibrate --hlo {}hlo/gdn_main_path", data)),
                       "--profile and --hlo go together");
}

TEST_F(Cli, RunHloAndProgram) {
  const std::string data = std::string(TPUSIM_SOURCE_DIR) + "/tests/data/hlo/";
  CmdResult r = run(fmt::format("run --hlo {}gdn_main_path --json {}", data, path("h.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("chip v5e "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("while while.1: 2 trips"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compiler (TPU v5 lite for v5e:2x2, libtpu 0.0.42.1): HBM 1.2 MiB"),
            std::string::npos)
      << r.out;
  const auto j = nlohmann::json::parse(slurp(path("h.json")));
  EXPECT_EQ(j["config"]["command"], "run --hlo");
  r = run(fmt::format("run --hlo {}dot_tanh --chip v6e", data));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("chip v6e "), std::string::npos) << r.out;
  // The time leads, split into the device's work and the host's dispatch, which add up.
  double total = 0, device = 0, dispatch = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "chip v6e  time %lf ms = device %lf ms + host dispatch %lf",
                        &total, &device, &dispatch),
            3)
      << r.out;
  EXPECT_GT(device, 0);
  EXPECT_GT(dispatch, 0);
  EXPECT_NEAR(device + dispatch, total, 2e-4);
  // Not both, and not a scenario's flags with a program.
  expect_clean_failure(run(fmt::format("run --hlo {}dot_tanh --program x.json", data)),
                       "--program excludes --hlo");
  expect_clean_failure(run(fmt::format("run {}dot_tanh/compile.json --chip v6e", data)),
                       "run: --chip and --svg apply to --program and --hlo");
  r = run(fmt::format("run --program {}gdn_scan_fwd/kernels.json --chip v5p", data));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("kernel gdn_scan_fwd [pallas] grid 1x1x2"), std::string::npos) << r.out;
  // A compile-step record: the HLO it names, on the chip it was compiled for (v5e: "TPU v5 lite").
  const std::string compiled = std::string(TPUSIM_SOURCE_DIR) + "/tests/data/compiled/";
  r = run(fmt::format("run --hlo {}small_2slices.json", compiled));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("chip v5e ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("while "), std::string::npos) << r.out;
  // One without its HLO says so.
  expect_clean_failure(run(fmt::format("run --hlo {}small.json", compiled)),
                       "small.json: names no optimized HLO (compile-step writes it with --hlo)");
}

// Inputs that used to abort (issue 18): each is one error line with exit 2 and no output files, or
// (invalid UTF-8 in a name) a result whose JSON replaces the bad bytes.
TEST_F(Cli, HostileInputsAreOneLineErrors) {
  const std::string scenario = "chips: 16\nmodel: llama3.1-8b\nseq: 1024\nbatch_per_chip: 1\n";
  fs::create_directories(path("a_dir"));
  expect_clean_failure(run("run " + path("a_dir")), "a_dir: not a regular file");
  // However deep the folder, the message keeps the path's end, where the file's own name is.
  const std::string deep = path(std::string(120, 'd') + "/deep_dir");
  fs::create_directories(deep);
  const CmdResult deep_run = run("run " + deep);
  expect_clean_failure(deep_run, "dd/deep_dir: not a regular file");
  EXPECT_EQ(deep_run.err.rfind("tpusim: error: ...d", 0), 0u) << deep_run.err;
  ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);
  expect_clean_failure(run("run " + path("fifo")), "fifo: not a regular file");
  std::ofstream(path("long.yaml")) << "chip: " << std::string(300, 'x') << "\n" << scenario;
  expect_clean_failure(run("run " + path("long.yaml")), "... (300 bytes)' (known chips:");
  std::ofstream(path("ok.yaml")) << "chip: v5e\n" << scenario;
  expect_clean_failure(run(fmt::format("run {} --json {}", path("ok.yaml"), path("a_dir"))),
                       "cannot write '" + path("a_dir") + "': it is a directory");
  expect_clean_failure(
      run(fmt::format("run {} --json {} --trace {}", path("ok.yaml"), path("o"), path("o"))),
      "is named for two outputs");
  EXPECT_FALSE(fs::exists(path("o")));
  std::ofstream(path("utf8.yaml")) << "name: \"\xff\xfe\"\nchip: v5e\n" << scenario;
  const CmdResult r = run(fmt::format("run {} --json {}", path("utf8.yaml"), path("u.json")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(path("u.json")))["scenario"], "\xEF\xBF\xBD\xEF\xBF\xBD");
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
}

// tests/data/bad: malformed inputs, each file saying how it is run (`# args:`, with {file} for
// itself and {out} for a scratch folder) and what its one-line error contains (`# error:`, parts
// joined by " && " each contained). None may crash, hang, be accepted, or leave a file behind.
TEST_F(Cli, BadInputCorpus) {
  const fs::path data = fs::path(TPUSIM_SOURCE_DIR) / "tests" / "data" / "bad";
  auto listing = [&] {
    std::set<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(data)) files.insert(e.path().string());
    return files;
  };
  const std::set<std::string> before = listing();
  int cases = 0;
  for (const auto& e : fs::directory_iterator(data)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path());
    std::string args_line, error_line;
    std::getline(in, args_line);
    std::getline(in, error_line);
    ASSERT_EQ(args_line.rfind("# args: ", 0), 0u) << e.path();
    ASSERT_EQ(error_line.rfind("# error: ", 0), 0u) << e.path();
    std::string args = args_line.substr(8);
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"{file}", e.path().string()},
                                   {"{out}", dir_.string()}})
      for (size_t at; (at = args.find(from)) != std::string::npos;)
        args.replace(at, from.size(), to);
    SCOPED_TRACE(e.path().filename().string());
    const CmdResult r = run_in(data, args);
    std::string expected = error_line.substr(9);
    for (size_t at; (at = expected.find(" && ")) != std::string::npos;) {
      EXPECT_NE(r.err.find(expected.substr(0, at)), std::string::npos) << r.err;
      expected = expected.substr(at + 4);
    }
    expect_clean_failure(r, expected);
    EXPECT_EQ(files(), 0u) << "files left in the output folder";
    ++cases;
  }
  EXPECT_GE(cases, 100);
  EXPECT_EQ(listing(), before) << "the corpus folder changed";
}
