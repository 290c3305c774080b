// Sweeps: expansion over the axes, shards that partition the points, worker processes that give
// the same results as one process.
#include "app/sweep.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "app/bench.h"
#include "app/scenario.h"
#include "models/chip_loader.h"
#include "sim/error.h"
#include "sim/timing/engine.h"

namespace tpusim {
namespace {

namespace fs = std::filesystem;

// One folder per test: ctest runs the test cases in parallel processes.
fs::path test_dir() {
  const fs::path dir =
      fs::temp_directory_path() /
      ("tpusim_sweep_" +
       std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  fs::create_directories(dir);
  return dir;
}

// The test's folder with a base scenario (16 v5e chips, Llama 3.1 8B) in base.yaml.
fs::path dir_with_base() {
  const fs::path dir = test_dir();
  std::ofstream(dir / "base.yaml")
      << "chip: v5e\nchips: 16\nmodel: llama3.1-8b\nseq: 1024\nbatch_per_chip: 1\n";
  return dir;
}

std::string write_sweep() {
  const fs::path dir = dir_with_base();
  std::ofstream(dir / "sweep.yaml")
      << "name: t\nbase: base.yaml\naxes:\n  seq: [1024, 2048]\n  batch_per_chip: [1, 2, 3]\n"
         "  mesh.tensor: [1, 3]\n";
  return (dir / "sweep.yaml").string();
}

TEST(Sweep, ExpandsTheCartesianProductInOrder) {
  const Sweep s = load_sweep(write_sweep());
  ASSERT_EQ(s.points.size(), 12u);
  EXPECT_EQ(s.axes, (std::vector<std::string>{"seq", "batch_per_chip", "mesh.tensor"}));
  EXPECT_EQ(s.points[0].values, (std::vector<std::string>{"1024", "1", "1"}));
  EXPECT_EQ(s.points[1].values, (std::vector<std::string>{"1024", "1", "3"}));
  EXPECT_EQ(s.points[11].values, (std::vector<std::string>{"2048", "3", "3"}));
}

TEST(Sweep, AnAxisThatIsNotAScenarioKeyIsAnErrorOfTheSweepFile) {
  const fs::path f = fs::path(write_sweep()).parent_path() / "typo.yaml";
  std::ofstream(f) << "name: t\nbase: base.yaml\naxes:\n  seq: [1024]\n  gdn.chunkk: [64]\n";
  try {
    load_sweep(f.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("typo.yaml:5:3: key 'axes.gdn.chunkk': not a key of a "
                                         "scenario file"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(is_scenario_key("remat.custom.context"));
  EXPECT_TRUE(is_scenario_key("measured.step_time_s"));
  EXPECT_FALSE(is_scenario_key("remat.custom.kontext"));
  EXPECT_FALSE(is_scenario_key("mesh.data"));
}

TEST(Sweep, ShardsPartitionThePointsAndWorkersAgreeWithOneProcess) {
  const Sweep s = load_sweep(write_sweep());
  const auto none = [](int, int) {};
  const auto all = run_sweep(s, 1, 0, 1, none);
  ASSERT_EQ(all.size(), 12u);
  std::set<int> seen;
  for (int i = 0; i < 3; ++i)
    for (const PointResult& r : run_sweep(s, 2, i, 3, none)) {
      EXPECT_EQ(r.index % 3, i);
      EXPECT_TRUE(seen.insert(r.index).second);
      EXPECT_EQ(r.ok, all[r.index].ok);
      EXPECT_EQ(r.metric(s, "step_time_s"),
                all[r.index].metric(s, "step_time_s"));  // bit-identical: deterministic engine
      EXPECT_EQ(r.error, all[r.index].error);
    }
  EXPECT_EQ(seen.size(), 12u);
  // tensor 3 does not divide the slice of 16 chips: those points fail with the mesh error.
  for (const PointResult& r : all) EXPECT_EQ(r.ok, s.points[r.index].values[2] == "1") << r.error;
  const std::string csv = sweep_csv(s, all);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "index,seq,batch_per_chip,mesh.tensor,step_time_s,tokens_per_s_per_chip,tflops_per_"
            "chip,mfu,peak_hbm_bytes,"
            "fits_hbm,fits_host,error");
}

// Axis values that are mappings hold commas: the CSV quotes them (RFC 4180), so a standard reader
// (Python's csv module) sees the same fields in every row.
TEST(Sweep, CsvWithAMappingAxisParsesWithAStandardReader) {
  const fs::path dir = dir_with_base();
  std::ofstream(dir / "m.yaml")
      << "name: m\nbase: base.yaml\naxes:\n  mesh: [{fsdp: 16}, {fsdp: 8, "
         "tensor: 2}, {fsdp: 5, tensor: 3}]\n";
  const Sweep s = load_sweep((dir / "m.yaml").string());
  const std::string csv = sweep_csv(s, run_sweep(s, 1, 0, 1, [](int, int) {}));
  EXPECT_NE(csv.find("\"{fsdp: 8, tensor: 2}\""), std::string::npos) << csv;
  std::ofstream(dir / "m.csv") << csv;
  const std::string check =
      "python3 -c \"import csv,sys; rows=list(csv.reader(open(sys.argv[1]))); "
      "sys.exit(not (len(rows) == 4 and len({len(r) for r in rows}) == 1 and "
      "rows[2][1] == '{fsdp: 8, tensor: 2}' and 'fsdp 5' in rows[3][-1]))\" " +
      (dir / "m.csv").string();
  EXPECT_EQ(std::system(check.c_str()), 0) << csv;
}

// 10,000 points expand in bounded memory: points keep their axis positions and a point's scenario
// is built when it runs (cloned scenarios sharing the sweep file's nodes took 23 GB for 1,000
// points before; 115 MB for 10,000 of the Llama example when each point held its clone).
TEST(Sweep, TenThousandPointsExpandInBoundedMemory) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's redzones and quarantine triple the memory measured";
#endif
  const fs::path dir = dir_with_base();
  std::vector<int> seqs, tensors;
  for (int i = 1; i <= 10; ++i) seqs.push_back(1024 * i);
  for (int i = 1; i <= 100; ++i) tensors.push_back(i);
  std::ofstream(dir / "big.yaml") << fmt::format(
      "name: big\nbase: base.yaml\naxes:\n  seq: [{}]\n  batch_per_chip: [1,2,3,4,5,6,7,8,9,10]\n"
      "  mesh.tensor: [{}]\n",
      fmt::join(seqs, ","), fmt::join(tensors, ","));
  const int64_t before = resident_bytes();
  const Sweep s = load_sweep((dir / "big.yaml").string());
  ASSERT_EQ(s.points.size(), 10000u);
  EXPECT_EQ(s.scenario(s.points[9999])["mesh"]["tensor"].as<int>(), 100);
  EXPECT_LT(resident_bytes() - before, int64_t{100} << 20);  // issue 18: under 100 MB
}

// A sweep over a catalog kernel's knobs and chips: axes are knob names (checked against the
// catalog), every point is the kernel the CLI would build with those knobs.
std::string write_kernel_sweep(const std::string& axes) {
  const fs::path dir = test_dir();
  std::ofstream(dir / "k.yaml") << "name: k\nkernel: gdn-invert\nknobs: {seq: 1024}\naxes:\n" +
                                       axes;
  return (dir / "k.yaml").string();
}

TEST(Sweep, KernelSweepsVaryCatalogKnobsAndChips) {
  const Sweep s = load_sweep(write_kernel_sweep("  chip: [v5e, v6e]\n  tile-n: [2, 3, 8]\n"));
  ASSERT_EQ(s.points.size(), 6u);
  EXPECT_EQ(s.points[4].chip, "v6e");
  EXPECT_EQ(s.points[4].knobs.integer("tile-n"), 3);
  EXPECT_EQ(s.points[4].knobs.integer("seq"), 1024);
  const auto results = run_sweep(s, 1, 0, 1, [](int, int) {});
  for (const PointResult& r : results) {
    const SweepPoint& p = s.points[r.index];
    // tile_n 3 does not divide the 8 chunks: those points fail with the ladder's error.
    EXPECT_EQ(r.ok, p.knobs.integer("tile-n") != 3) << r.error;
    if (!r.ok) continue;
    const ChipSpec chip = load_chip(p.chip);
    const double direct = simulate(chip, s.kernel->program(chip, p.knobs)).time_s;
    EXPECT_EQ(r.metric(s, "time_s"), direct);
  }
  EXPECT_EQ(results[1].error,
            s.file +
                ": point 1 (chip=v5e, tile-n=3): GDN inversion ladder: tile_n 3 must divide "
                "the 8 chunks");
  const std::string csv = sweep_csv(s, results);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "index,chip,tile-n,time_s,tflops_per_s,hbm_bytes,vmem_peak_bytes,error");
}

TEST(Sweep, KernelSweepAxesMustBeKnobsOfTheKernel) {
  try {
    load_sweep(write_kernel_sweep("  head-tile: [1, 2]\n"));
    FAIL() << "gdn-invert has no head tile";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("k.yaml:5:3: key 'axes.head-tile': kernel gdn-invert has "
                                         "no knob 'head-tile'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tpusim
