// The TPU compiler's view of a scenario's step: `tpusim export maxtext` (the scenario as MaxText's
// command line, the input of `python -m tpusim_jax compile-step`) and a scenario's `compiled:`
// result beside or in place of tpusim's memory model. The compiled files under
// tests/data/compiled/ are real compiler output (tests/jax/compile_step.sh re-derives them).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli/cli_fixture.h"

namespace tpusim::testing {
namespace {

const std::string kData = std::string(TPUSIM_SOURCE_DIR) + "/tests/data/compiled/";

// MaxText's model-config keys, which `import maxtext` reads from a model file.
bool is_model_key(const std::string& key) {
  return key.rfind("base_", 0) == 0 || key == "head_dim" || key == "vocab_size" ||
         key == "mlp_activations" || key == "inhomogeneous_layer_cycle_interval" ||
         (key.rfind("gdn_", 0) == 0 && key != "gdn_chunk_size");
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The model keys into a MaxText model config, the rest on the command line: import, then export
// again, gives the same line.
class ExportCli : public Cli {
 protected:
  void expect_round_trip(const std::string& line) {
    const std::string dir = path("");
    std::ofstream model(dir + "/m.yml");
    std::string overrides;
    for (const std::string& w : words(line)) {
      const std::string key = w.substr(0, w.find('='));
      if (!is_model_key(key))
        overrides += " " + w;
      else if (key == "mlp_activations")
        model << "mlp_activations: [silu, linear]\n";
      else
        model << key << ": " << w.substr(w.find('=') + 1) << "\n";
    }
    model.close();
    const CmdResult im =
        run("import maxtext " + dir + "/m.yml" + overrides + " -o " + dir + "/s.yaml");
    ASSERT_EQ(im.status, 0) << im.err;
    EXPECT_EQ(run("export maxtext " + dir + "/s.yaml").out, line);
  }
};

TEST_F(ExportCli, ExportMaxtextRoundTripsThroughImport) {
  const std::string scenarios = std::string(TPUSIM_SOURCE_DIR) + "/scenarios/calibration/";
  const CmdResult ex = run("export maxtext " + scenarios + "c5/c5_24_v5p-128_maxtext-128b.yaml");
  ASSERT_EQ(ex.status, 0) << ex.err;
  EXPECT_NE(ex.out.find("base_emb_dim=8192 "), std::string::npos) << ex.out;
  EXPECT_NE(ex.out.find("ici_fsdp_parallelism=16 ici_tensor_parallelism=8 "), std::string::npos);
  EXPECT_NE(ex.out.find("compile_topology=v5p-256 "), std::string::npos);  // 128 chips, 256 cores
  expect_round_trip(ex.out);
  // A hybrid GDN model (the main build, MaxText's only one): decoder_block and the gdn_* keys.
  const CmdResult gdn = run("export maxtext " + scenarios + "c1/c1_main.yaml");
  ASSERT_EQ(gdn.status, 0) << gdn.err;
  EXPECT_NE(gdn.out.find("decoder_block=qwen3_next inhomogeneous_layer_cycle_interval=4 "
                         "gdn_num_key_heads=16 gdn_num_value_heads=32 "),
            std::string::npos)
      << gdn.out;
  EXPECT_NE(gdn.out.find("gdn_chunk_size=128 "), std::string::npos) << gdn.out;
  expect_round_trip(gdn.out);
  // Context parallelism (B3): one sequence over 64 chips is MaxText's per-device batch of 1/64,
  // and its GDN layers take the sequence order (MaxText refuses the load-balanced one with them).
  const CmdResult cp = run("export maxtext " + std::string(TPUSIM_SOURCE_DIR) +
                           "/scenarios/blind/b3_v5p-64_context64_1m_main.yaml");
  ASSERT_EQ(cp.status, 0) << cp.err;
  EXPECT_NE(cp.out.find("per_device_batch_size=0.015625 max_target_length=1048576 "),
            std::string::npos)
      << cp.out;
  EXPECT_NE(cp.out.find("ici_context_parallelism=64 ici_expert_parallelism=1 "
                        "context_parallel_load_balance=false "),
            std::string::npos)
      << cp.out;
  expect_round_trip(cp.out);
}

TEST_F(Cli, TheCompilersPeakStandsBesideTheModels) {
  const CmdResult r = run("run " + kData + "small.yaml --json " + path("s.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("the TPU compiler's peak for the same step: 944.90 MiB"), std::string::npos)
      << r.out;
  const auto compiled = nlohmann::json::parse(slurp(kData + "small.json"));
  const auto j = nlohmann::json::parse(slurp(path("s.json")));
  EXPECT_EQ(j["compiled_peak_hbm_bytes"], compiled["memory"]["total_bytes"]);
  EXPECT_EQ(j["memory_source"], "model");
  EXPECT_NE(j["peak_hbm_bytes"], compiled["memory"]["total_bytes"]);
}

// A compiled step that holds its optimized HLO (scripts/compile_steps.sh, with the run's flags):
// `run` simulates that program beside the step model, the same time `run --hlo` gives its record;
// with --vliw-floors each op lasts at least its recorded VLIW schedule, which takes longer.
TEST_F(Cli, TheCompiledProgramIsSimulatedBesideTheStepModel) {
  const std::string steps = std::string(TPUSIM_SOURCE_DIR) + "/scenarios/compiled/steps/";
  const std::string scenario =
      std::string(TPUSIM_SOURCE_DIR) + "/scenarios/calibration/c3/c3_41_v5e_maxtext-16b.yaml";
  CmdResult r = run("run " + scenario + " --json " + path("s.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("the compiled step's own program (its optimized HLO, the LIBTPU_INIT_ARGS "
                       "its compile recorded) simulated: "),
            std::string::npos)
      << r.out;
  const auto j = nlohmann::json::parse(slurp(path("s.json")));
  r = run("run --hlo " + steps + "c3_41_v5e_maxtext-16b.json --json " + path("h.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto h = nlohmann::json::parse(slurp(path("h.json")));
  EXPECT_EQ(j["compiled_program_s"], h["time_s"]);
  CmdResult floored = run("run --hlo " + steps +
                          "c3_41_v5e_maxtext-16b.json --vliw-floors --json " + path("f.json"));
  ASSERT_EQ(floored.status, 0) << floored.err;
  EXPECT_NE(floored.out.find("the compiled VLIW schedule as a floor (libtpu 0.0.42.1 final "
                             "bundles): "),
            std::string::npos)
      << floored.out;
  EXPECT_GT(nlohmann::json::parse(slurp(path("f.json")))["time_s"], h["time_s"]);
  EXPECT_NE(j["compiled_program_s"], j["step_time_s"]);  // a second prediction, not a copy
  // The layer loop's FSDP gathers are in it: collectives over 256 chips.
  EXPECT_NE(r.out.find("while while."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("32 trips"), std::string::npos) << r.out;
}

TEST_F(Cli, MemoryCompilerTakesTheCompilersPeakAndVerdict) {
  std::ofstream(path("c.yaml")) << slurp(kData + "small.yaml") << "memory: compiler\n";
  // The compiled file and the model are named relative to the scenario: copy them beside it.
  for (const char* f : {"small.json", "small.model.yaml"})
    std::ofstream(path(f)) << slurp(kData + f);
  const CmdResult r = run("run " + path("c.yaml") + " --json " + path("c.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("peak HBM 944.90 MiB of 16.00 GiB (fits)\n  (the TPU compiler's peak, "
                       "memory: compiler; tpusim's model: 796.78 MiB)"),
            std::string::npos)
      << r.out;
  const auto j = nlohmann::json::parse(slurp(path("c.json")));
  EXPECT_EQ(j["memory_source"], "compiler");
  EXPECT_EQ(j["peak_hbm_bytes"], j["compiled_peak_hbm_bytes"]);
  // The compiler's out-of-memory verdict: the step is not timed.
  const CmdResult oom = run("run " + kData + "small_oom.yaml");
  ASSERT_EQ(oom.status, 0) << oom.err;
  EXPECT_NE(oom.out.find("step not timed"), std::string::npos) << oom.out;
  EXPECT_NE(oom.out.find("the TPU compiler says it does not fit (67.99G needed, 15.75G "
                         "available)"),
            std::string::npos)
      << oom.out;
}

TEST_F(Cli, ACompiledStepThatIsNotThisScenariosIsOneErrorLine) {
  const std::string small = slurp(kData + "small.yaml");
  for (const char* f : {"small.json", "small.model.yaml"})
    std::ofstream(path(f)) << slurp(kData + f);
  // Stale: compiled at batch 1, the scenario says 2.
  std::string batch2 = small;
  batch2.replace(batch2.find("batch_per_chip: 1"), 17, "batch_per_chip: 2");
  std::ofstream(path("stale.yaml")) << batch2;
  expect_clean_failure(run("run " + path("stale.yaml")),
                       "stale.yaml:9:11: key 'compiled': " + path("small.json") +
                           " was compiled from another configuration (per_device_batch_size=1 "
                           "there, per_device_batch_size=2 here)");
  std::ofstream(path("bad.json")) << "{\"format\": \"tpusim-compiled-step\", \"fits\": tru";
  std::string bad = small;
  bad.replace(bad.find("small.json"), 10, "bad.json");
  std::ofstream(path("bad.yaml")) << bad;
  expect_clean_failure(run("run " + path("bad.yaml")), "bad.json: not JSON");
  std::string no_file = small;
  no_file.replace(no_file.find("compiled: small.json"), 20, "memory: compiler");
  std::ofstream(path("nofile.yaml")) << no_file;
  expect_clean_failure(run("run " + path("nofile.yaml")),
                       "key 'memory': memory: compiler needs the compiled step");
  std::ofstream(path("what.yaml")) << small << "memory: measured\n";
  expect_clean_failure(run("run " + path("what.yaml")), "key 'memory'");
  // PR #4348's Pallas builds go to the compiled step by a key of its own (the doubling build is
  // refused: tests/data/bad/export_maxtext_gdn.yaml).
  const CmdResult ladder = run("export maxtext " + std::string(TPUSIM_SOURCE_DIR) +
                               "/scenarios/calibration/c1/c1_ladder.yaml");
  EXPECT_NE(ladder.out.find(" gdn_build=ladder "), std::string::npos) << ladder.out << ladder.err;
}

TEST_F(Cli, ValidateTablesTheModelsPeakAgainstTheCompilers) {
  const CmdResult r = run("validate " + kData + "small.yaml " + kData +
                          "small_oom.yaml --markdown " + path("v.md"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("compiler: 944.90 MiB"), std::string::npos) << r.out;
  const std::string md = slurp(path("v.md"));
  // The compile recorded what is live at its peak (781.30 MiB): beside it, +4%.
  EXPECT_NE(md.find("| compiled-small | 796.78 MiB | yes | 944.90 MiB | yes | -16% | 781.30 MiB | "
                    "+2% | v5e:2x2 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| compiled-small-oom | 98.24 GiB | no | does not fit (67.99G needed, "
                    "15.75G available) | no | - | - | - | v5e:2x2 |"),
            std::string::npos)
      << md;
}

// A compile that recorded XLA's buffer assignment (`buffers`, tests/jax/compile_step.sh checks it):
// the report says what is live in HBM at the compiled step's peak beside the compiler's peak, in
// text and JSON, and the JSON keeps the largest slots too.
TEST_F(Cli, WhatIsLiveAtTheCompilersPeakIsListedBesideIt) {
  const CmdResult r = run("run " + kData + "small.yaml --json " + path("s.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("  the TPU compiler's peak for the same step: 944.90 MiB\n  live in HBM at "
                       "its peak (XLA's buffers over their live ranges, at fusion.10 "
                       "(jit(step)/transpose(jvp(...e,ev->...v))/dot_general)): 781.30 MiB, of "
                       "which the step's parameters (weights, optimizer state) 379.61 MiB; the "
                       "largest others: 125.00 MiB f32[1,1024,32000] fusion "
                       "(jvp()/convert_element_type); 62.50 MiB bf16[1024,32000] all-gather "),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("its largest HBM buffers"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(path("s.json")));
  ASSERT_EQ(j["compiled_peak_live"].size(), 8u);
  EXPECT_EQ(j["compiled_peak_live"][3], "32.00 MiB bf16[4,1,1024,4096] custom-call (broadcast.73)");
  EXPECT_EQ(j["compiled_peak_live_bytes"], 819248128);
  EXPECT_EQ(j["compiled_peak_live_parameter_bytes"], 398049280);
  ASSERT_EQ(j["compiled_largest_buffers"].size(), 8u);
  EXPECT_EQ(j["compiled_largest_buffers"][3], "32.00 MiB 5 x bf16[4,1,1024,4096]");
}

// An older compile without live ranges: the largest slots instead.
TEST_F(Cli, WithoutLiveRangesTheCompilersLargestSlotsAreListed) {
  nlohmann::json j = nlohmann::json::parse(slurp(kData + "small.json"));
  j["buffers"].erase("peak_live");
  j["buffers"].erase("peak_live_bytes");
  j["buffers"].erase("peak_live_parameter_bytes");
  j["buffers"].erase("peak_live_at");
  std::ofstream(path("small.json")) << j.dump();
  std::string yaml = slurp(kData + "small.yaml");
  std::ofstream(path("small.model.yaml")) << slurp(kData + "small.model.yaml");
  std::ofstream(path("small.yaml")) << yaml;
  const CmdResult r = run("run " + path("small.yaml"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("  its largest HBM buffers (XLA's buffer assignment; values sharing a slot "
                       "in turn): 125.00 MiB f32[1,1024,32000]; 62.50 MiB bf16[1024,32000]; "),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace tpusim::testing
