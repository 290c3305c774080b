// "Why is this slow" on kernels whose story is known: XLA's triangular solve is a dependent row
// chain (dependency, latency-bound, widen the chain's links); a matmul in 128-cubed blocks spends
// its time between grid steps (step_overhead, larger blocks); no line for causes under 1%.
#include "app/why_slow.h"

#include <gtest/gtest.h>

#include "kernels/catalog.h"
#include "models/chip_loader.h"
#include "sim/timing/engine.h"

namespace tpusim {
namespace {

std::vector<std::string> why(const std::string& kernel,
                             const std::vector<std::pair<std::string, int64_t>>& set = {}) {
  const ChipSpec chip = load_chip("v5e");
  const kernels::CatalogEntry& e = kernels::find_kernel(kernel);
  kernels::KnobValues v = e.defaults();
  for (const auto& [k, x] : set) v.set(k, x);
  return why_slow(simulate(chip, e.program(chip, v)), chip);
}

bool has(const std::vector<std::string>& lines, const std::string& start) {
  for (const std::string& l : lines)
    if (l.find(start) != std::string::npos) return true;
  return false;
}

TEST(WhySlow, TheSolveIsAChainOfDependentRows) {
  const auto lines = why("gdn-solve-triangular");
  ASSERT_GE(lines.size(), 4u);
  EXPECT_NE(lines[1].find("% dependency: an op waiting on the op before it"), std::string::npos)
      << lines[1];
  EXPECT_TRUE(has(lines, "in InvertDiagBlocksLowerTriangular (xla) (1 call): latency-bound"));
  EXPECT_TRUE(has(lines, "what usually helps with dependency: widen each link of the chain"));
}

TEST(WhySlow, SmallMatmulBlocksSpendTheirTimeBetweenSteps) {
  const auto lines =
      why("matmul", {{"m", 4096}, {"k", 4096}, {"n", 4096}, {"bm", 128}, {"bk", 128}, {"bn", 128}});
  ASSERT_GE(lines.size(), 3u);
  EXPECT_NE(lines[1].find("% step_overhead: scalar work between grid steps"), std::string::npos)
      << lines[1];
  EXPECT_TRUE(has(lines, "what usually helps with step_overhead: larger blocks"));
  for (const std::string& l : lines) EXPECT_FALSE(l.starts_with("0% ")) << l;  // under 1%: left out
}

}  // namespace
}  // namespace tpusim
