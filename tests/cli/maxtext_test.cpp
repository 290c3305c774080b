// MaxText's inputs as users have them: `tpusim import maxtext-log` turns a training log
// (tests/data/maxtext/train.log, MaxText 0.2.5's line format, made-up numbers) into a scenario's
// measured block, the median of the steps after the warm-up, which it names; `tpusim import
// maxtext` turns a model config (written here in MaxText's keys) and command line into a scenario
// and its model, listing the keys it does not model. Bad input is one error line and writes
// nothing. (tests/jax/maxtext_import.sh runs the import on MaxText's own configs.)
#include <gtest/gtest.h>

#include "tests/cli/cli_fixture.h"

namespace tpusim::testing {
namespace {

const std::string kLog = std::string(TPUSIM_SOURCE_DIR) + "/tests/data/maxtext/train.log";

TEST_F(Cli, AMaxTextLogBecomesTheMeasuredBlock) {
  // Steps 2, 3 and 5 (0 and 1 are warm-up, 4 a profiler step without rates): medians by hand.
  const CmdResult r = run("import maxtext-log " + kLog);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("median of MaxText steps 2-5 (3 steps; the first 2 skipped as warm-up "
                       "(steps 0-1); 1 rampup or profiler step without rates left out)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  step_time_s: 2.571\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  tokens_per_s_per_chip: 1593\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  tflops_per_chip: 76.2\n"), std::string::npos) << r.out;

  // Nothing skipped: the compile step's 38 s is one of five, and the median moves to 2.575.
  const CmdResult all = run("import maxtext-log " + kLog + " --skip 0 -o " + path("m.yaml"));
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_NE(slurp(path("m.yaml")).find("  step_time_s: 2.575\n"), std::string::npos)
      << slurp(path("m.yaml"));
}

TEST_F(Cli, WhatIsNotAMaxTextLogIsOneErrorLine) {
  std::ofstream(path("notes.txt")) << "nothing here\n";
  expect_clean_failure(run("import maxtext-log " + path("notes.txt") + " -o " + path("m.yaml")),
                       "no 'completed step: N, seconds: S");
  expect_clean_failure(run("import maxtext-log " + kLog + " --skip 5"),
                       "5 steps with rates, so skipping 5 leaves none");
  std::ofstream(path("cut.log")) << "completed step: 3, secs: 2.5\n";
  expect_clean_failure(run("import maxtext-log " + path("cut.log")),
                       "cut.log:1: a 'completed step' line without 'seconds: S'");
  std::ofstream(path("big.log"))
      << "completed step: 99999999999999999999, seconds: 2.5, TFLOP/s/device: 1.0, "
         "Tokens/s/device: 2.0\n";
  expect_clean_failure(run("import maxtext-log " + path("big.log")),
                       "big.log:1: a 'completed step' line whose numbers do not read");
  expect_clean_failure(run("import maxtext-log " + dir_.string()), "not a regular file");
  EXPECT_FALSE(fs::exists(path("m.yaml")));
}

// A small Llama-like model in MaxText's keys.
const char* kModel = R"(base_emb_dim: 2048
base_num_query_heads: 16
base_num_kv_heads: 8
base_mlp_dim: 5632
base_num_decoder_layers: 16
head_dim: 128
mlp_activations: ["silu", "linear"]
vocab_size: 32000
decoder_block: "llama2"
)";

// The CLI fixture with `tpusim import maxtext CONFIG ARGS -o OUT` for configs and outputs in the
// test's directory.
class MaxTextImport : public Cli {
 protected:
  CmdResult import_maxtext(const std::string& config, const std::string& args,
                           const std::string& out) {
    return run("import maxtext " + path(config) + " " + args + " -o " + path(out));
  }
};

TEST_F(Cli, AMaxTextRunBecomesAScenarioAndItsModel) {
  std::ofstream(path("small.yml")) << kModel;
  const CmdResult r = run("import maxtext " + path("small.yml") +
                          " per_device_batch_size=4 max_target_length=2048 remat_policy=full "
                          "ici_fsdp_parallelism=-1 ici_tensor_parallelism=2 "
                          "compile_topology=v5p-16 steps=10 fused_qkv=True fused_mlp=false -o " +
                          path("run.yaml"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("decoder_block"), std::string::npos) << r.out;  // tpusim's own layers
  EXPECT_NE(r.out.find("not modelled: steps=10 (not modelled)"), std::string::npos);
  const std::string scenario = slurp(path("run.yaml")), model = slurp(path("run.model.yaml"));
  EXPECT_NE(scenario.find("# not modelled: steps=10"), std::string::npos) << scenario;
  EXPECT_NE(scenario.find("chip: v5p\nchips: 8\n"), std::string::npos) << scenario;  // 16 cores
  EXPECT_NE(scenario.find("mesh: {tensor: 2}"), std::string::npos) << scenario;
  EXPECT_NE(scenario.find("model: run.model.yaml\nseq: 2048\nbatch_per_chip: 4\nremat: full\n"
                          "fused_qkv: true\nfused_mlp: false"),
            std::string::npos)
      << scenario;
  EXPECT_NE(model.find("d_model: 2048"), std::string::npos) << model;
  EXPECT_NE(model.find("mlp: swiglu"), std::string::npos) << model;
  // The scenario loads and runs from any working directory (its model is beside it).
  const CmdResult step = run_in("/", "run " + path("run.yaml"));
  EXPECT_EQ(step.status, 0) << step.err;
  EXPECT_NE(step.out.find("on 8 x v5p (mesh data 1 fsdp 4 tensor 2), seq 2048, batch/chip 4"),
            std::string::npos)
      << step.out;
}

// DeepSeek's and Llama4's MaxText keys: layers that keep the dense MLP, multi-head latent
// attention.
TEST_F(MaxTextImport, AMixtureOfExpertsKeepsItsDenseLayersAndLatentAttention) {
  // Llama4's experts in every 2nd layer: 8 of the 16 keep the dense MLP (get_dense_moe_layers).
  std::ofstream(path("l4.yml")) << kModel << "num_experts: 8\ninterleave_moe_layer_step: 2\n";
  const CmdResult l4 =
      import_maxtext("l4.yml", "decoder_block=llama4 compile_topology=v5e-16", "l4.yaml");
  EXPECT_EQ(l4.status, 0) << l4.err;
  EXPECT_NE(l4.out.find("decoder_block=llama4 (partly: it decides which layers keep a dense MLP"),
            std::string::npos)
      << l4.out;
  EXPECT_NE(slurp(path("l4.model.yaml")).find("dense_layers: 8"), std::string::npos)
      << slurp(path("l4.model.yaml"));
  // Multi-head latent attention: its dims, base.yml's for those the config leaves out.
  std::ofstream(path("mla.yml")) << kModel << "attention_type: mla\nkv_lora_rank: 256\n";
  const CmdResult mla = import_maxtext("mla.yml", "compile_topology=v5e-16", "mla.yaml");
  EXPECT_EQ(mla.status, 0) << mla.err;
  EXPECT_NE(mla.out.find("default: v_head_dim=128 (MaxText's base.yml)"), std::string::npos)
      << mla.out;
  EXPECT_NE(slurp(path("mla.model.yaml"))
                .find("mla: {q_lora_rank: 0, kv_lora_rank: 256, qk_nope_head_dim: 128, "
                      "qk_rope_head_dim: 64, v_head_dim: 128}"),
            std::string::npos)
      << slurp(path("mla.model.yaml"));
}

TEST_F(MaxTextImport, ARunTpusimCannotTakeIsOneErrorLine) {
  std::ofstream(path("small.yml")) << kModel;
  expect_clean_failure(run("import maxtext " + path("small.yml") + " -o " + path("a.yaml")),
                       "compile_topology=CHIP-N is needed");
  expect_clean_failure(
      run("import maxtext " + path("small.yml") +
          " compile_topology=v5e-16 per_device_batch_size=big -o " + path("a.yaml")),
      "per_device_batch_size=big: expected a whole number of at least 1");
  expect_clean_failure(
      import_maxtext("small.yml", "compile_topology=v5e-16 fused_qkv=yes", "a.yaml"),
      "fused_qkv=yes: expected true or false");
  expect_clean_failure(
      import_maxtext("small.yml", "compile_topology=v5e-16 sparse_matmul=maybe", "a.yaml"),
      "sparse_matmul=maybe: expected true or false");
  // A mixture of experts imports (MaxText's num_experts_per_tok defaults to 1); one of 8 experts
  // over an expert axis of 3 does not divide them.
  std::ofstream(path("moe.yml")) << kModel << "num_experts: 8\n";
  const CmdResult moe = run(
      "import maxtext " + path("moe.yml") +
      " compile_topology=v5e-16 sparse_matmul=False capacity_factor=1.25 -o " + path("moe.yaml"));
  EXPECT_EQ(moe.status, 0) << moe.err;
  std::ifstream model(path("moe.model.yaml"));
  const std::string text{std::istreambuf_iterator<char>(model), {}};
  EXPECT_NE(text.find("moe: {experts: 8, top_k: 1}"), std::string::npos) << text;
  expect_clean_failure(
      run("import maxtext " + path("moe.yml") +
          " compile_topology=v5e-16 ici_expert_parallelism=3 ici_fsdp_parallelism=-1 -o " +
          path("a.yaml")),
      "key 'mesh");
  std::ofstream(path("l0.yml")) << kModel << "num_experts: 8\ninterleave_moe_layer_step: 0\n";
  expect_clean_failure(
      import_maxtext("l0.yml", "decoder_block=llama4 compile_topology=v5e-16", "l0.yaml"),
      "interleave_moe_layer_step=0: expected a whole number of at least 1");
  // A remat policy MaxText has and tpusim does not know: the written scenario fails to load and
  // is removed with its model.
  expect_clean_failure(run("import maxtext " + path("small.yml") +
                           " compile_topology=v5e-16 remat_policy=everything -o " + path("a.yaml")),
                       "key 'remat'");
  EXPECT_FALSE(fs::exists(path("a.yaml")));
  EXPECT_FALSE(fs::exists(path("a.model.yaml")));
}

}  // namespace
}  // namespace tpusim::testing
