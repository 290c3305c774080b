// Scenario files: the shipped ones load; bad ones give one error naming file:line:column and the
// key path.
#include "app/scenario.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "app/step_report.h"
#include "models/chip_loader.h"
#include "models/workload/layers.h"
#include "sim/error.h"

namespace tpusim {
namespace {

namespace fs = std::filesystem;

std::string repo(const std::string& rel) {
  return (fs::path(models_dir()).parent_path() / rel).string();
}

std::string error_of(const std::string& yaml) {
  // One folder per test: ctest runs the test cases in parallel processes.
  const fs::path dir =
      fs::temp_directory_path() /
      ("tpusim_scenario_" +
       std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  fs::create_directories(dir);
  const fs::path f = dir / "tpusim_bad_scenario.yaml";
  std::ofstream(f) << yaml;
  try {
    load_scenario(f.string());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kGood = "chip: v5e\nchips: 256\nmodel: maxtext-16b\nseq: 2048\nbatch_per_chip: 6\n";
// C1's GDN model on v5e-256 without a gdn: section (five lines).
const std::string kGdn =
    "chip: v5e\nchips: 256\nmodel: qwen3-next-dense-8b\nseq: 4096\nbatch_per_chip: 1\n";

TEST(Scenario, ShippedScenariosLoad) {
  int calibration = 0, blind = 0;
  for (const std::string& f :
       scenario_files({repo("scenarios/calibration"), repo("scenarios/blind")})) {
    const Scenario s = load_scenario(f);
    (s.measured.empty() ? blind : calibration) += 1;
    if (f.find("/blind/") != std::string::npos) {
      EXPECT_TRUE(s.measured.empty()) << f;
    }
  }
  EXPECT_EQ(calibration, 18);  // C1's four builds, five C3 rows, nine C5 rows
  EXPECT_GE(blind, 36);
  EXPECT_EQ(load_scenario(repo("scenarios/calibration/c1/c1_ladder.yaml")).step.gdn.build,
            kernels::gdn::Build::ladder);
}

TEST(Scenario, GoodMinimalFile) { EXPECT_EQ(error_of(kGood), ""); }

TEST(Scenario, UnknownKey) {
  const std::string e = error_of(std::string(kGood) + "remat_policy: full\n");
  EXPECT_NE(e.find("tpusim_bad_scenario.yaml:6:1: key 'remat_policy': unknown key"),
            std::string::npos)
      << e;
}

TEST(Scenario, UnknownNestedKeyHasItsPath) {
  const std::string e = error_of(std::string(kGood) + "mesh: {fsdp: 256, tnsr: 1}\n");
  EXPECT_NE(e.find(":6:19: key 'mesh.tnsr': unknown key"), std::string::npos) << e;
}

TEST(Scenario, GdnSettingsNeedAModelWithGdnLayers) {
  const std::string e = error_of(std::string(kGood) + "gdn: {build: main}\n");
  EXPECT_NE(e.find(":6:6: key 'gdn': the model maxtext-16b has no GDN layers"), std::string::npos)
      << e;
}

TEST(Scenario, WrongType) {
  const std::string e =
      error_of("chip: v5e\nchips: many\nmodel: maxtext-16b\nseq: 2048\nbatch_per_chip: 6\n");
  EXPECT_NE(e.find(":2:8: key 'chips': expected an integer, got 'many'"), std::string::npos) << e;
}

TEST(Scenario, MissingChip) {
  const std::string e = error_of("chips: 256\nmodel: maxtext-16b\nseq: 2048\nbatch_per_chip: 6\n");
  EXPECT_NE(e.find(":1:1: key 'chip': missing"), std::string::npos) << e;
  const std::string u =
      error_of("chip: v7\nchips: 256\nmodel: maxtext-16b\nseq: 2048\nbatch_per_chip: 6\n");
  EXPECT_NE(u.find(":1:7: key 'chip': unknown chip 'v7'"), std::string::npos) << u;
}

TEST(Scenario, ImpossibleMesh) {
  const std::string e = error_of(std::string(kGood) + "mesh: {fsdp: 16, tensor: 4}\n");
  EXPECT_NE(e.find(":6:7: key 'mesh': fsdp 16 x tensor 4 x context 1 = 64 is not the 256 chips of "
                   "the slice"),
            std::string::npos)
      << e;
}

TEST(Scenario, ContextParallelMeshErrors) {
  const std::string f =
      "chip: v5p\nchips: 8\nmodel: b1-dense-gdn\nseq: 8192\nbatch_per_chip: 1\n"
      "mesh: {context: 8}\ngdn: {build: ladder}\n";
  const std::string ladder = error_of(f);
  EXPECT_NE(
      ladder.find(":7:14: key 'gdn.build': context parallelism runs the GDN only in MaxText's "
                  "lax.scan path"),
      std::string::npos)
      << ladder;
  const std::string chunk = error_of(
      "chip: v5p\nchips: 8\nmodel: b1-dense-gdn\nseq: 8192\nbatch_per_chip: 1\n"
      "mesh: {context: 8}\ngdn: {build: main, chunk: 2048}\n");
  EXPECT_NE(chunk.find("the local sequence 1024 (seq 8192 / context 8) is not a multiple of the "
                       "GDN chunk 2048"),
            std::string::npos)
      << chunk;
}

// Mixtral-8x7B's MLP as MaxText runs it (layers/moe.py): by default megablox's grouped matmul
// over the 8 experts' 4096 x 2 / 8 = 1024 rows each (8192 rows, tiles 512 x 1024 x 1024, the
// two up projections as one of 2 x 14336 columns); with sparse_matmul false and capacity factor
// 1.25 the one-hot dispatch of each sequence into 8 x 1280 slots (int(max(ceil(4096 x 2 / 8) x
// 1.25, 1.25)) = 1280), a dot of 10240 x 4096 x 4096. Expert parallelism divides the experts.
TEST(Scenario, MoeLayersRunMaxTextsPath) {
  const std::string base =
      "chip: v5e\nchips: 256\nmodel: mixtral-8x7b\nseq: 4096\nbatch_per_chip: 1\n";
  auto items = [&](const std::string& yaml) {
    const fs::path f = fs::temp_directory_path() / "tpusim_scenario_moe.yaml";
    std::ofstream(f) << base << yaml;
    const Scenario s = load_scenario(f.string());
    std::string names;
    for (const ProgramItem& item : attention_layer(s.step, s.step.local()).program.items)
      names += item.name + "\n";
    return names;
  };
  const std::string sparse = items("");
  EXPECT_NE(sparse.find("megablox 8192x4096x28672 (512,1024,1024)\n"), std::string::npos) << sparse;
  const std::string dropping = items("moe: {sparse_matmul: false, capacity_factor: 1.25}\n");
  EXPECT_NE(dropping.find("xla dot 10240x4096x4096 "), std::string::npos) << dropping;
  EXPECT_EQ(dropping.find("megablox "), std::string::npos) << dropping;
  EXPECT_NE(error_of(base + "mesh: {fsdp: 16, expert: 16}\n")
                .find("key 'mesh.expert': expert parallelism 16 does not divide 8 experts"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kGood) + "mesh: {fsdp: 128, expert: 2}\n")
                .find("expert parallelism needs a mixture-of-experts model"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kGood) + "moe: {capacity_factor: 2}\n")
                .find("the model maxtext-16b has no mixture-of-experts layers"),
            std::string::npos);
}

TEST(Scenario, FlopRatesAreComparedOnTheLogsAttentionCount) {
  const Scenario s = load_scenario(repo("scenarios/calibration/c3/c3_01_v6e_llama3.1-8b.yaml"));
  ASSERT_EQ(s.measured_attention, AttentionCount::full);
  const StepPrediction p = predict_step(s.step);
  // Llama3.1-8B, batch 4 x seq 8192: the full count adds 3 x 32 layers x 4 B S^2 H D / 2.
  const double extra = 3.0 * 32 * 4 * 4 * 8192.0 * 8192 * 32 * 128 / 2;
  for (const ValidationRow& r : validation_rows(s, p)) {
    if (r.metric == "tflops_per_chip") {
      EXPECT_NEAR(r.predicted, (p.model_flops_per_chip + extra) / p.step_time_s / 1e12, 1e-6);
    }
    if (r.metric == "step_time_s") {
      EXPECT_DOUBLE_EQ(r.predicted, p.step_time_s);
    }
  }
  const std::string e =
      error_of(std::string(kGood) + "measured: {source: x, mfu: 0.6, attention_flops: half}\n");
  EXPECT_NE(e.find("key 'measured.attention_flops': expected causal"), std::string::npos) << e;
}

TEST(Scenario, RematIsAPolicyNameOrACustomPlacementPerTensor) {
  const Scenario s = load_scenario(repo("scenarios/calibration/c3/c3_07_v6e_llama3.1-70b.yaml"));
  EXPECT_EQ(s.step.remat.policy, "custom");
  for (Activation a : {Activation::decoder_layer_input, Activation::query_proj,
                       Activation::key_proj, Activation::value_proj})
    EXPECT_EQ(s.step.remat[a], Placement::offload) << name(a);
  for (Activation a : {Activation::context, Activation::out_proj, Activation::mlpwi_0,
                       Activation::mlpwi_1, Activation::mlpwo})
    EXPECT_EQ(s.step.remat[a], Placement::remat) << name(a);
  EXPECT_EQ(load_scenario(repo("scenarios/calibration/c5/c5_11_v6e-256_llama2-70b.yaml"))
                .step.remat.policy,
            "qkv_proj_offloaded");

  const std::string custom = std::string(kGood) + "remat:\n  custom: {";
  std::string e = error_of(custom + "mlpwo: offload, mlpw: device}\n");
  EXPECT_NE(e.find(":7:28: key 'remat.custom.mlpw': unknown tensor 'mlpw' (known: "
                   "decoder_layer_input,"),
            std::string::npos)
      << e;
  e = error_of(custom + "mlpwo: host}\n");
  EXPECT_NE(e.find(":7:19: key 'remat.custom.mlpwo': unknown placement 'host'"), std::string::npos)
      << e;
  e = error_of(custom + "decoder_layer_input: remat}\n");
  EXPECT_NE(e.find("key 'remat.custom.decoder_layer_input': decoder_layer_input cannot be remat"),
            std::string::npos)
      << e;
  e = error_of(std::string(kGood) + "remat: {minimal: {}}\n");
  EXPECT_NE(e.find(":6:9: key 'remat.minimal': unknown key (known: custom)"), std::string::npos)
      << e;
  e = error_of(std::string(kGood) + "remat: save_everything\n");
  EXPECT_NE(e.find(":6:8: key 'remat': unknown remat policy 'save_everything' (known: full, "
                   "minimal,"),
            std::string::npos)
      << e;
}

TEST(Scenario, WeightDtypeAndVocabTiling) {
  const Scenario s = load_scenario(repo("scenarios/blind/b5_32_v5p-512_llama3.1-405b.yaml"));
  EXPECT_EQ(s.step.vocab_tiles, 4);
  EXPECT_EQ(load_scenario(repo("scenarios/blind/b5_10_v6e-32_llama3.1-70b.yaml")).step.weight_dtype,
            DType::bf16);
  std::string e = error_of(std::string(kGood) + "weight_dtype: fp8\n");
  EXPECT_NE(e.find(":6:15: key 'weight_dtype': expected f32 or bf16"), std::string::npos) << e;
  e = error_of(std::string(kGood) + "vocab_tiling: 0\n");
  EXPECT_NE(e.find(":6:15: key 'vocab_tiling': must be a positive integer"), std::string::npos)
      << e;
}

TEST(Scenario, QuantizationIsInt8OrAbsent) {
  EXPECT_TRUE(
      load_scenario(repo("scenarios/blind/b5_15_v6e-256_gpt3-175b-int8.yaml")).step.int8_matmuls);
  const std::string e = error_of(std::string(kGood) + "quantization: fp8\n");
  EXPECT_NE(e.find(":6:15: key 'quantization': expected int8"), std::string::npos) << e;
}

TEST(Scenario, MeasuredNeedsASource) {
  const std::string e = error_of(std::string(kGood) + "measured: {mfu: 0.6}\n");
  EXPECT_NE(e.find("key 'measured.source': measured values need a source"), std::string::npos) << e;
}

TEST(Scenario, MeasuredValuesArePositiveAndFinite) {
  for (const char* v : {"0", "-1", ".inf"}) {
    const std::string e = error_of(std::string(kGood) + "measured: {source: x, mfu: " + v + "}\n");
    EXPECT_NE(e.find(":6:28: key 'measured.mfu': must be a positive finite number, got " +
                     std::string(v)),
              std::string::npos)
        << e;
  }
}

TEST(Scenario, ATypeErrorInsideAParsedValueNamesItsPlaceOnce) {
  for (const std::string& bad :
       {kGdn + "gdn: {build: [ladder]}\n", std::string(kGood) + "remat: [full]\n",
        std::string(kGood) + "remat: {custom: {context: [device]}}\n"}) {
    const std::string e = error_of(bad);
    EXPECT_NE(e.find("expected a string, got a sequence"), std::string::npos) << e;
    EXPECT_EQ(e.find("tpusim_bad_scenario.yaml"), e.rfind("tpusim_bad_scenario.yaml")) << e;
  }
}

// Kernels that cannot exist are found when the file loads, before anything is simulated, and the
// error points at the key that sized them.
TEST(Scenario, KernelsThatCannotExistNameTheKeyThatSizedThem) {
  // The scan backward at 8 heads per cell needs 18.81 MiB of v5e's 16 MiB (docs/kernels/gdn.md).
  std::string e = error_of(kGdn + "gdn: {build: heads, head_tile_bwd: 8}\n");
  EXPECT_NE(e.find(":6:6: key 'gdn': the GDN layer: kernel 'gdn scan bwd (th=8)' needs 18.81 MiB"),
            std::string::npos)
      << e;
  e = error_of(kGdn + "gdn: {build: heads, head_tile_fwd: 5}\n");
  EXPECT_NE(
      e.find(":6:6: key 'gdn': the GDN layer: GDN scan: head tile 5 must divide the 32 heads"),
      std::string::npos)
      << e;
  e = error_of(kGdn + "gdn: {build: ladder, tile_n: 64}\n");
  EXPECT_NE(e.find(":6:6: key 'gdn': the GDN layer: GDN inversion ladder: tile_n 64 must divide "
                   "the 32 chunks"),
            std::string::npos)
      << e;
  // A lowered scoped limit is blamed for any kernel over it (here the first layer's norm).
  e = error_of(kGdn + "gdn: {build: ladder}\nscoped_vmem_kib: 4096\n");
  EXPECT_NE(e.find(":7:18: key 'scoped_vmem_kib': the attention layer: kernel 'rmsnorm"),
            std::string::npos)
      << e;
  // A key the file leaves at its default is named, with the position of the whole file.
  e = error_of(std::string(kGood) + "attention: {block: 2048}\nscoped_vmem_kib: 4096\n");
  EXPECT_NE(e.find(":7:18: key 'scoped_vmem_kib'"), std::string::npos) << e;
  e = error_of(std::string(kGood) + "attention: {block: 2048}\n");
  EXPECT_NE(e.find(":6:12: key 'attention': the attention layer: kernel 'attention fwd (block "
                   "2048)' needs"),
            std::string::npos)
      << e;
}

// MaxText's _head_tile picks the head tiles from the heads a chip holds: at tensor 32 each chip
// has one GDN value head, and the batched builds fall back to a tile of one.
TEST(Scenario, DefaultHeadTilesFollowTheLocalHeads) {
  EXPECT_EQ(error_of(kGdn + "mesh: {fsdp: 8, tensor: 32}\ngdn: {build: heads}\n"), "");
}

}  // namespace
}  // namespace tpusim
