// The kernel catalog: every kernel builds at its defaults on every chip (and passes the engine's
// static checks), knob values are checked against their types and ranges, and names are unique;
// XLA fusions too wide for VMEM are tiled.
#include "kernels/catalog.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kernels/tiling.h"
#include "kernels/transformer.h"
#include "models/chip_loader.h"
#include "sim/error.h"
#include "sim/functional/interpreter.h"
#include "sim/ir/validate.h"
#include "sim/timing/engine.h"
#include "tests/error_of.h"

namespace tpusim::kernels {
namespace {

using tpusim::testing::error_of;

TEST(Catalog, EveryKernelBuildsAtItsDefaultsOnEveryChip) {
  ASSERT_GE(catalog().size(), 9u);
  ASSERT_EQ(known_chips(), (std::vector<std::string>{"v5e", "v5p", "v6e"}));
  for (const std::string& name : known_chips()) {
    const ChipSpec chip = load_chip(name);
    for (const CatalogEntry& e : catalog()) {
      SCOPED_TRACE(e.name + " on " + name);
      const Program p = e.program(chip, e.defaults());
      EXPECT_FALSE(p.items.empty());
      EXPECT_NO_THROW(validate(chip, p));
    }
  }
}

TEST(Catalog, NamesAndKnobsAreUniqueAndDescribed) {
  std::set<std::string> kernels;
  for (const CatalogEntry& e : catalog()) {
    EXPECT_TRUE(kernels.insert(e.name).second) << e.name;
    EXPECT_FALSE(e.help.empty()) << e.name;
    std::set<std::string> names;
    for (const Knob& k : e.knobs) {
      EXPECT_FALSE(k.help.empty()) << e.name << " " << k.name;
      EXPECT_TRUE(names.insert(k.name).second) << e.name << " " << k.name;
      if (k.type == Knob::Type::integer) {
        EXPECT_LE(k.min, k.default_int) << e.name << " " << k.name;
        EXPECT_LE(k.default_int, k.max) << e.name << " " << k.name;
      } else {
        EXPECT_NE(std::find(k.choices.begin(), k.choices.end(), k.default_choice), k.choices.end())
            << e.name << " " << k.name;
      }
    }
  }
}

TEST(Catalog, KnobValuesAreChecked) {
  const CatalogEntry& dot = find_kernel("xla-dot");
  KnobValues v = dot.defaults();
  v.set("m", int64_t{0});
  EXPECT_EQ(error_of([&] { dot.check(v); }), "kernel xla-dot: m = 0 is outside 1..1048576");
  v = dot.defaults();
  v.set("dtype", std::string("fp8"));
  EXPECT_EQ(error_of([&] { dot.check(v); }), "unknown dtype 'fp8' (known: bf16, f32, int8)");
  v = dot.defaults();
  v.set("mm", int64_t{8});
  EXPECT_EQ(error_of([&] { dot.check(v); }),
            "kernel xla-dot has no knob 'mm' (knobs: m, k, n, dtype)");
  v = dot.defaults();
  v.set("m", std::string("8"));  // a value of the wrong type
  EXPECT_EQ(error_of([&] { dot.check(v); }), "knob 'm' has no integer value");
  EXPECT_EQ(error_of([] { find_kernel("gdn"); }).rfind("unknown kernel 'gdn' (known: matmul, ", 0),
            0u);
}

TEST(Catalog, KnobsChangeTheProgram) {
  const CatalogEntry& inv = find_kernel("gdn-invert");
  const ChipSpec chip = load_chip("v5e");
  KnobValues v = inv.defaults();
  v.set("seq", int64_t{1024});
  v.set("tile-n", int64_t{2});
  const Program p = inv.program(chip, v);
  const auto& k = std::get<KernelCall>(p.items.at(0).what).kernel;
  EXPECT_EQ(k->grid_steps(), 1 * 32 * (1024 / 128 / 2));  // (B, H, N / tile_n)
  v.set("tile-n", int64_t{3});
  EXPECT_EQ(error_of([&] { inv.program(chip, v); }),
            "GDN inversion ladder: tile_n 3 must divide the 8 chunks");
}

// The GDN knobs are named as the scenario files' gdn keys are (head_tile_fwd, head_tile_bwd,
// tile_n) and the shape's batch as the scenario's batch_per_chip.
TEST(Catalog, KnobsAreNamedAsTheScenarioKeys) {
  EXPECT_EQ(find_kernel("gdn-layer").knob("head-tile-fwd").key(), "head_tile_fwd");
  EXPECT_EQ(find_kernel("gdn-layer").knob("head-tile-bwd").key(), "head_tile_bwd");
  EXPECT_EQ(find_kernel("gdn-layer").knob("tile-n").key(), "tile_n");
  EXPECT_EQ(find_kernel("gdn-scan-fwd").knob("head-tile-fwd").key(), "head_tile_fwd");
  EXPECT_EQ(find_kernel("gdn-scan-bwd").knob("head-tile-bwd").key(), "head_tile_bwd");
  EXPECT_EQ(find_kernel("gdn-layer").knob("batch-per-chip").key(), "batch_per_chip");
  EXPECT_THROW(find_kernel("gdn-scan-bwd").knob("head-tile"), Error);
}

TEST(Catalog, RegisteredKernelsJoinTheCatalog) {
  CatalogEntry e{"test-imported",
                 "a program registered at run time",
                 {Knob::integer("rows", 8, 64, 8, "rows")},
                 [](const ChipSpec&, const KnobValues& v) {
                   return find_kernel("elementwise").program(load_chip("v5e"), [&] {
                     KnobValues w = find_kernel("elementwise").defaults();
                     w.set("rows", v.integer("rows"));
                     w.set("block-rows", v.integer("rows"));
                     return w;
                   }());
                 }};
  register_kernel(e);
  EXPECT_EQ(find_kernel("test-imported").help, "a program registered at run time");
  EXPECT_EQ(error_of([&] { register_kernel(e); }), "kernel 'test-imported' is already registered");
}

// A vocabulary too wide for 8 rows in VMEM is tiled over its columns; one that is not a multiple
// of the 128 lanes (Llama 4's 202048) is padded to them, as XLA's layouts pad a minor dimension:
// t tiles of a lane-aligned width covering every column with less than a lane tile of padding
// each.
TEST(XlaFusion, AVocabularyOffTheLaneTileIsPaddedToIt) {
  const int64_t rows = 65536, vocab = 202048;
  const auto k = xla_fusion(Fusion::cross_entropy, rows, vocab);
  EXPECT_LE(vmem_usage(*k).total_bytes, kXlaVmemBudget);
  const Shape& logits = k->inputs.at(0).array.shape;
  ASSERT_EQ(logits.size(), 2u);
  ASSERT_EQ(logits[0] % rows, 0);
  const int64_t tiles = logits[0] / rows, width = logits[1];
  EXPECT_GE(tiles, 2);
  EXPECT_EQ(width % 128, 0);
  EXPECT_GE(tiles * width, vocab);
  EXPECT_LT(tiles * width - vocab, 128 * tiles);
}

// AQT's stochastic rounding of a gradient operand: on numbers its noise is zero, so it quantizes
// exactly as rounding to nearest does; in time it adds the random bits' pass and the noise's add
// to the vector unit, two ops per element (2 x 1024 x 4096 / 1024 vregs at 2 per cycle on v5e),
// plus the one-cycle fill of the constant 127 in each extra grid step (the noise's block halves
// the rows per step that fit XLA's VMEM budget).
TEST(XlaFusion, StochasticRoundingQuantizesAsRoundingAndCostsTwoVectorPasses) {
  const int64_t rows = 1024, cols = 4096;
  const auto nearest = xla_fusion(Fusion::quantize, rows, cols);
  const auto stochastic = xla_fusion(Fusion::quantize_stochastic, rows, cols);
  ArrayMap a, b;
  HostArray x = HostArray::zeros({rows, cols}, DType::bf16);
  for (size_t i = 0; i < x.data.size(); ++i)
    x.data[i] = round_to_bf16(static_cast<float>((i * 2654435761u) % 2001) / 1000.0f - 1.0f);
  a["x"] = b["x"] = x;
  execute(*nearest, a);
  execute(*stochastic, b);
  EXPECT_EQ(a.at("x int8").data, b.at("x int8").data);
  EXPECT_EQ(a.at("scale").data, b.at("scale").data);
  const ChipSpec v5e = load_chip("v5e");
  auto vpu = [&](const std::shared_ptr<const Kernel>& k) {
    const RunResult r = simulate_kernel(v5e, k);
    int64_t busy = 0;
    for (size_t u = 0; u < r.units.size(); ++u)
      if (r.units[u].kind == UnitKind::vpu) busy += r.unit_busy[u];
    return busy;
  };
  EXPECT_EQ(vpu(stochastic) - vpu(nearest),
            2 * rows * cols / 1024 / 2 + stochastic->grid_steps() - nearest->grid_steps());
}

// Values spread over [-2, 2) by a multiplicative hash of their index, in f32.
HostArray spread(int64_t rows, int64_t cols, uint32_t seed) {
  HostArray x = HostArray::zeros({rows, cols}, DType::f32);
  for (size_t i = 0; i < x.data.size(); ++i)
    x.data[i] = static_cast<float>((i * seed) % 2001) / 500.0f - 2.0f;
  return x;
}

// Qwen3-Next's gated attention output, y = o sigmoid(gate), and its backward (do = dy s,
// dgate = dy o s (1 - s) with s = sigmoid(gate)) against the same formulas in float, run in f32
// so that only float rounding separates them.
TEST(XlaFusion, TheSigmoidGateAndItsBackwardMatchTheirFormulas) {
  const int64_t rows = 16, cols = 256;
  ArrayMap fwd{{"o", spread(rows, cols, 2654435761u)}, {"gate", spread(rows, cols, 40503u)}};
  ArrayMap bwd = fwd;
  bwd["dy"] = spread(rows, cols, 97u);
  execute(*xla_fusion(Fusion::sigmoid_gate, rows, cols, DType::f32), fwd);
  execute(*xla_fusion(Fusion::sigmoid_gate_bwd, rows, cols, DType::f32), bwd);
  for (size_t i = 0; i < fwd.at("o").data.size(); ++i) {
    const float o = fwd.at("o").data[i], dy = bwd.at("dy").data[i];
    const float s = 1.0f / (1.0f + std::exp(-fwd.at("gate").data[i]));
    EXPECT_NEAR(fwd.at("y").data[i], o * s, 1e-5f);
    EXPECT_NEAR(bwd.at("do").data[i], dy * s, 1e-5f);
    EXPECT_NEAR(bwd.at("dgate").data[i], dy * o * s * (1 - s), 1e-5f);
  }
}

// SwiGLU's backward: dup = dh silu(gate), dgate = dh up silu'(gate) with silu' = s + silu (1 - s),
// s = sigmoid(gate), against the formulas in float (f32 run).
TEST(XlaFusion, TheSwigluBackwardMatchesItsFormula) {
  const int64_t rows = 16, cols = 256;
  ArrayMap a{{"gate", spread(rows, cols, 2654435761u)},
             {"up", spread(rows, cols, 40503u)},
             {"dh", spread(rows, cols, 97u)}};
  execute(*xla_fusion(Fusion::swiglu_bwd, rows, cols, DType::f32), a);
  for (size_t i = 0; i < a.at("gate").data.size(); ++i) {
    const float g = a.at("gate").data[i], up = a.at("up").data[i], dh = a.at("dh").data[i];
    const float s = 1.0f / (1.0f + std::exp(-g)), silu = g * s;
    EXPECT_NEAR(a.at("dup").data[i], dh * silu, 1e-5f);
    EXPECT_NEAR(a.at("dgate").data[i], dh * up * (s + silu * (1 - s)), 1e-5f);
  }
}

}  // namespace
}  // namespace tpusim::kernels
