// Work outside kernels from the JAX bridge: a fusion of HLO ops costed as the compiled program's
// fusions are (bytes as it touches them, VMEM-resident values moving nothing), a loop with its
// trip count, a triangular solve as XLA runs it (the custom call, then the product; a later solve
// of the same matrix only the product); bad items are one line naming the place.
#include <gtest/gtest.h>

#include "app/program_import.h"
#include "models/chip_loader.h"
#include "sim/timing/engine.h"
#include "tests/app/program_text.h"
#include "tests/error_of.h"

namespace tpusim {
namespace {

using testing::error_of;
using testing::replaced;

// exp(2x) over [1024, 128] f32 (512 KiB in, 512 KiB out); then 8 trips of c <- c + exp(c), the
// exp kept in VMEM; then x = a^-1 b for two [128, 128] blocks, twice with one a.
const std::string kProgram = R"({
 "format": "tpusim-program", "version": 1, "name": "outside", "functional": false,
 "items": [
  {"xla": {"name": "fusion.0", "source": "f.py:3",
   "params": [{"name": "x", "opcode": "parameter", "shape": [1024, 128], "dtype": "f32"}],
   "ops": [{"name": "two", "opcode": "constant", "shape": [], "dtype": "f32"},
           {"name": "y", "opcode": "multiply", "shape": [1024, 128], "dtype": "f32",
            "operands": ["x", "two"]},
           {"name": "e", "opcode": "exponential", "shape": [1024, 128], "dtype": "f32",
            "operands": ["y"]}],
   "results": ["e"]}},
  {"loop": {"name": "scan", "trips": 8, "items": [
   {"xla": {"name": "fusion.1", "source": "f.py:5",
    "params": [{"name": "c", "opcode": "parameter", "shape": [8, 128], "dtype": "f32"}],
    "ops": [{"name": "t", "opcode": "exponential", "shape": [8, 128], "dtype": "f32",
             "operands": ["c"], "memory": "vmem"},
            {"name": "c2", "opcode": "add", "shape": [8, 128], "dtype": "f32",
             "operands": ["c", "t"]}],
    "results": ["c2", "t"]}}]}},
  {"solve": {"name": "solve", "a": {"name": "a", "opcode": "parameter", "shape": [2, 128, 128],
   "dtype": "f32"}, "b": {"name": "b", "opcode": "parameter", "shape": [2, 128, 64], "dtype": "f32"},
   "left_side": true, "lower": true, "transpose_a": false, "unit_diagonal": false,
   "inverse_known": false}}],
 "outputs": ["e"]
}
)";

const Kernel& kernel_at(const Program& p, size_t i) {
  return *std::get<KernelCall>(p.items.at(i).what).kernel;
}

TEST(ProgramXla, FusionsLoopsAndSolvesBecomeTheCompiledProgramsKindsOfItems) {
  const ImportedProgram p = import_program(testing::write_program(kProgram));
  EXPECT_FALSE(p.functional);
  ASSERT_EQ(p.program.items.size(), 4u);
  EXPECT_EQ(kernel_at(p.program, 0).origin, Origin::xla);
  const Loop& loop = std::get<Loop>(p.program.items[1].what);
  EXPECT_EQ(loop.trips, 8);
  EXPECT_EQ(loop.body.size(), 1u);
  EXPECT_EQ(kernel_at(p.program, 2).name, "InvertDiagBlocksLowerTriangular (xla)");
  EXPECT_EQ(kernel_at(p.program, 3).name, "solve: inverse x b");

  // A second solve of the same matrix is only its product.
  const ImportedProgram again = import_program(testing::write_program(
      replaced(kProgram, R"("inverse_known": false)", R"("inverse_known": true)")));
  ASSERT_EQ(again.program.items.size(), 3u);
  EXPECT_EQ(kernel_at(again.program, 2).name, "solve: inverse x b");
}

TEST(ProgramXla, AFusionMovesTheBytesItTouchesAndNothingOfWhatStaysInVmem) {
  const ImportedProgram p = import_program(testing::write_program(kProgram));
  const ChipSpec v5e = load_chip("v5e");
  Program fusion, loop;
  fusion.items = {p.program.items[0]};
  loop.items = {p.program.items[1]};
  const RunResult f = simulate(v5e, fusion);
  EXPECT_EQ(f.hbm_read_bytes, 1024 * 128 * 4);   // x; the constant is a literal
  EXPECT_EQ(f.hbm_write_bytes, 1024 * 128 * 4);  // e
  // Each trip reads c and writes c2 (4 KiB each); t stays in VMEM.
  const RunResult l = simulate(v5e, loop);
  EXPECT_EQ(l.hbm_read_bytes, 8 * 8 * 128 * 4);
  EXPECT_EQ(l.hbm_write_bytes, 8 * 8 * 128 * 4);
}

// y = exp(x); r = all-reduce(y) over 4 devices; then a fusion of x (overlapping the all-reduce)
// and one of r (after it).
const std::string kCollective = R"({
 "format": "tpusim-program", "version": 1, "name": "reduce", "functional": false,
 "items": [
  {"xla": {"name": "exp", "params": [{"name": "x", "opcode": "parameter", "shape": [512, 128],
   "dtype": "f32"}], "ops": [{"name": "y", "opcode": "exponential", "shape": [512, 128],
   "dtype": "f32", "operands": ["x"]}], "results": ["y"]}},
  {"collective": {"name": "psum", "kind": "all_reduce", "bytes": 262144,
   "axis": {"name": "model", "size": 4}, "results": ["r"]}},
  {"xla": {"name": "tanh x", "params": [{"name": "x", "opcode": "parameter", "shape": [512, 128],
   "dtype": "f32"}], "ops": [{"name": "t", "opcode": "tanh", "shape": [512, 128], "dtype": "f32",
   "operands": ["x"]}], "results": ["t"]}},
  {"xla": {"name": "tanh r", "params": [{"name": "r", "opcode": "parameter", "shape": [512, 128],
   "dtype": "f32"}], "ops": [{"name": "u", "opcode": "tanh", "shape": [512, 128], "dtype": "f32",
   "operands": ["r"]}], "results": ["u"]}}],
 "outputs": ["t", "u"]
}
)";

TEST(ProgramXla, ACollectiveFollowsItsProducerAndOnlyItsReadersWaitForIt) {
  const ImportedProgram p = import_program(testing::write_program(kCollective));
  ASSERT_EQ(p.program.items.size(), 4u);
  const Collective& c = std::get<Collective>(p.program.items[1].what);
  EXPECT_EQ(c.kind, CollectiveKind::all_reduce);
  EXPECT_EQ(c.bytes, 262144);
  EXPECT_EQ(c.axis.name, "model");
  EXPECT_EQ(c.axis.size, 4);
  EXPECT_EQ(p.program.items[1].deps, std::vector<int>{0});
  EXPECT_TRUE(p.program.items[2].deps.empty());  // overlaps the all-reduce
  EXPECT_EQ(p.program.items[3].deps, std::vector<int>{1});
  const RunResult r = simulate(load_chip("v5e"), p.program);
  ASSERT_EQ(r.items.size(), 4u);
  EXPECT_LT(r.items[2].start, r.items[1].start + r.items[1].cycles);
  EXPECT_GE(r.items[3].start, r.items[1].start + r.items[1].cycles);
}

TEST(ProgramXla, TheFunctionalCheckIsRefusedForWorkItDoesNotExecute) {
  const ImportedProgram p = import_program(testing::write_program(kProgram));
  const std::string e = error_of([&] { check_program(p, "unused.json"); });
  EXPECT_NE(e.find("the functional check runs programs of Pallas kernels only"), std::string::npos)
      << e;
}

TEST(ProgramXla, BadItemsAreOneLineNamingThePlace) {
  auto error = [](const std::string& text) {
    return error_of([&] { import_program(testing::write_program(text)); });
  };
  std::string e = error(replaced(kProgram, R"("operands": ["x", "two"])", R"("operands": ["q"])"));
  EXPECT_NE(e.find("key 'items[0].xla.ops[1].operands': 'q' is not defined before"),
            std::string::npos)
      << e;
  e = error(replaced(kProgram, R"("memory": "vmem")", R"("memory": "smem")"));
  EXPECT_NE(e.find("ops[0].memory': expected hbm or vmem"), std::string::npos) << e;
  e = error(replaced(kProgram, R"("name": "two", "opcode": "constant")",
                     R"("name": "two", "opcode": "constant", "dims": {})"));
  EXPECT_NE(e.find("ops[0].dims': only a dot takes it"), std::string::npos) << e;
  e = error(replaced(kProgram, R"("shape": [2, 128, 128])", R"("shape": [2, 256, 256])"));
  EXPECT_NE(e.find("key 'items[2].solve.a': a solve of n = 256 > 128"), std::string::npos) << e;
  e = error(replaced(kProgram, R"({"loop": {"name": "scan", "trips": 8, "items": [)",
                     R"({"loop": {"name": "scan", "trips": 8, "items": [{"loop": {"name": "in",
                     "trips": 2, "items": []}},)"));
  EXPECT_NE(e.find("items[1].loop.items[0].loop': a loop inside a loop's body is not supported"),
            std::string::npos)
      << e;
  const std::string dot = R"({"format": "tpusim-program", "version": 1, "name": "d",
 "items": [{"xla": {"name": "dot",
  "params": [{"name": "a", "opcode": "parameter", "shape": [256, 512], "dtype": "bf16"},
             {"name": "b", "opcode": "parameter", "shape": [512, 128], "dtype": "bf16"}],
  "ops": [{"name": "c", "opcode": "dot", "shape": [256, 128], "dtype": "f32", "operands": ["a", "b"],
           "dims": {"lhs_contract": [1], "rhs_contract": [0], "lhs_batch": [], "rhs_batch": []},
           "precision": "default"}], "results": ["c"]}}], "outputs": ["c"]})";
  EXPECT_EQ(import_program(testing::write_program(dot)).program.items.size(), 1u);
  e = error(replaced(dot, R"("rhs_contract": [0])", R"("rhs_contract": [2])"));
  EXPECT_NE(e.find("dims.rhs_contract': dim 2 of 'b', which has rank 2"), std::string::npos) << e;
  e = error(replaced(kCollective, R"("kind": "all_reduce")", R"("kind": "all_to_all")"));
  EXPECT_NE(e.find("items[1].collective.kind': expected one of all_gather"), std::string::npos)
      << e;
  e = error(replaced(kProgram, R"("trips": 8)", R"("trips": 0)"));
  EXPECT_NE(e.find("items[1].loop.trips'"), std::string::npos) << e;
}

}  // namespace
}  // namespace tpusim
