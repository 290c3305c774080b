// The slice topology a collective runs on, from the chip files: torus dimensions spanned and
// wraparound, by hand from tpu_hardware.md (v5e wraps only on 16-chip axes, v5p on whole
// 4x4x4 cubes; 8 chips of v5p are a 2x2x2 slice).
#include "models/parallel/mesh.h"

#include <gtest/gtest.h>

#include "models/chip_loader.h"

namespace tpusim {
namespace {

TEST(SliceAxis, WraparoundAndDimensionsComeFromTheChipFile) {
  const ChipSpec v5e = load_chip("v5e"), v5p = load_chip("v5p");
  const Mesh fsdp_only;
  EXPECT_EQ(v5e.ici_wraparound_chips, 256);
  EXPECT_EQ(v5p.ici_wraparound_chips, 64);
  MeshAxis a = slice_axis(v5e, 256, fsdp_only, "fsdp", 256, false);
  EXPECT_TRUE(a.wraparound);
  EXPECT_EQ(a.torus_dims, 2);
  a = slice_axis(v5e, 128, fsdp_only, "fsdp", 128, false);
  EXPECT_FALSE(a.wraparound);
  EXPECT_EQ(a.torus_dims, 2);
  a = slice_axis(v5p, 4, fsdp_only, "fsdp", 4, false);  // 2 x 2 x 1
  EXPECT_FALSE(a.wraparound);
  EXPECT_EQ(a.torus_dims, 2);
  a = slice_axis(v5p, 8, fsdp_only, "fsdp", 8, false);  // 2 x 2 x 2
  EXPECT_FALSE(a.wraparound);
  EXPECT_EQ(a.torus_dims, 3);
  a = slice_axis(v5p, 64, fsdp_only, "fsdp", 64, false);
  EXPECT_TRUE(a.wraparound);
  EXPECT_EQ(a.torus_dims, 3);
  // A tensor axis keeps one dimension; the other axes ring over the rest.
  const Mesh with_tensor{.fsdp = 16, .tensor = 4};
  EXPECT_EQ(slice_axis(v5p, 64, with_tensor, "tensor", 4, true).torus_dims, 1);
  EXPECT_EQ(slice_axis(v5p, 64, with_tensor, "fsdp", 16, false).torus_dims, 2);
}

TEST(LocalSizes, TensorAndContextShardingDivideTheWork) {
  ModelConfig m;
  m.q_heads = 32;
  m.kv_heads = 8;
  m.mlp_dim = 14336;
  const LocalSizes l = local_sizes(m, {.fsdp = 4, .tensor = 4, .context = 2}, 2, 8192);
  EXPECT_EQ(l.batch, 8);  // 2 per chip x tensor 4
  EXPECT_EQ(l.seq, 4096);
  EXPECT_EQ(l.tokens, 8 * 4096);
  EXPECT_EQ(l.q_heads, 8);
  EXPECT_EQ(l.kv_heads, 2);
  EXPECT_EQ(l.mlp, 3584);
}

}  // namespace
}  // namespace tpusim
