// Programs from the JAX bridge, read strictly into the IR: a hand-written program (y = 2x + 1 in
// row blocks, then a row sum) imports, simulates and runs functionally; bad files are one error
// line naming file:line:column and the key.
#include "app/program_import.h"

#include <gtest/gtest.h>

#include "models/chip_loader.h"
#include "sim/timing/engine.h"
#include "tests/app/program_text.h"
#include "tests/error_of.h"

namespace tpusim {
namespace {

using testing::error_of;

const std::string kProgram = R"({
 "format": "tpusim-program", "version": 1, "name": "affine", "source": "hand-written",
 "items": [{"kernel": {
  "name": "two_x_plus_one", "origin": "pallas", "grid": [4], "semantics": ["parallel"],
  "inputs": [{"name": "x", "shape": [64, 128], "dtype": "f32", "block": [16, 128],
              "index_map": [{"offset": 0, "coeff": [1]}, {"offset": 0, "coeff": [0]}]}],
  "outputs": [{"name": "y", "shape": [64, 1], "dtype": "f32", "block": [16, 1],
               "index_map": [{"offset": 0, "coeff": [1]}, {"offset": 0, "coeff": [0]}]}],
  "scratch": [],
  "ops": [
   {"op": "elementwise", "fn": "mul", "in": [0], "scalar": 2.0, "out": 2},
   {"op": "elementwise", "fn": "add", "in": [2], "scalar": 1.0, "out": 3},
   {"op": "reduce", "fn": "add", "in": [3], "axes": [1], "out": 4},
   {"op": "copy", "in": [4], "into": 1}]}}],
 "outputs": ["y"]
}
)";

std::string write(const std::string& text) { return testing::write_program(text); }
using testing::replaced;

TEST(ProgramImport, ImportsSimulatesAndComputes) {
  const ImportedProgram p = import_program(write(kProgram));
  EXPECT_EQ(p.name, "affine");
  ASSERT_EQ(p.program.items.size(), 1u);
  const Kernel& k = *std::get<KernelCall>(p.program.items[0].what).kernel;
  EXPECT_EQ(k.grid, (std::vector<int64_t>{4}));
  EXPECT_EQ(k.body.size(), 4u);
  std::vector<int64_t> block;
  k.inputs[0].index.eval({3}, block);
  EXPECT_EQ(block, (std::vector<int64_t>{3, 0}));
  const RunResult r = simulate(load_chip("v5e"), p.program);
  EXPECT_GT(r.time_s, 0);
  EXPECT_EQ(r.hbm_read_bytes, 64 * 128 * 4);
  ArrayMap arrays;
  arrays["x"] = HostArray::zeros({64, 128}, DType::f32);
  for (size_t i = 0; i < arrays["x"].data.size(); ++i) arrays["x"].data[i] = float(i % 128);
  execute(p.program, arrays);
  // Each row: sum over j of 2j + 1 = 128^2.
  for (float v : arrays.at("y").data) EXPECT_EQ(v, 128.0f * 128.0f);
}

// A running sum over a sequential grid axis, as exported from pl.when: the accumulator in scratch
// starts at the first step, the result is stored at the last; concat and slice on the way.
const std::string kRunningSum = R"({
 "format": "tpusim-program", "version": 1, "name": "running_sum",
 "items": [{"kernel": {
  "name": "running_sum", "origin": "pallas", "grid": [4], "semantics": ["arbitrary"],
  "inputs": [{"name": "x", "shape": [64, 128], "dtype": "f32", "block": [16, 128],
              "index_map": [{"offset": 0, "coeff": [1]}, {"offset": 0, "coeff": [0]}]}],
  "outputs": [{"name": "y", "shape": [16, 128], "dtype": "f32", "block": [16, 128],
               "index_map": [{"offset": 0, "coeff": [0]}, {"offset": 0, "coeff": [0]}]}],
  "scratch": [{"name": "acc", "shape": [16, 128], "dtype": "f32"}],
  "ops": [
   {"op": "copy", "in": [0], "into": 2, "when": {"kind": "first", "axis": 0}},
   {"op": "elementwise", "fn": "add", "in": [2, 0], "out": 3,
    "when": {"kind": "not_first", "axis": 0}},
   {"op": "copy", "in": [3], "into": 2, "when": {"kind": "not_first", "axis": 0}},
   {"op": "concat", "in": [2, 2], "axis": 1, "out": 4},
   {"op": "slice", "in": [4], "axis": 1, "start": 128, "size": 128, "out": 5},
   {"op": "copy", "in": [5], "into": 1, "when": {"kind": "last", "axis": 0}}]}}],
 "outputs": ["y"]
}
)";

TEST(ProgramImport, WhensConcatAndSliceRunAsExported) {
  const ImportedProgram p = import_program(write(kRunningSum));
  const Kernel& k = *std::get<KernelCall>(p.program.items[0].what).kernel;
  EXPECT_EQ(k.body[0].when.kind, When::first);
  EXPECT_EQ(k.body[1].when.kind, When::not_first);
  EXPECT_EQ(k.body[5].when.kind, When::last);
  EXPECT_EQ(k.body[4].kind, OpKind::slice);
  ArrayMap arrays;
  arrays["x"] = HostArray::zeros({64, 128}, DType::f32);
  for (size_t i = 0; i < arrays["x"].data.size(); ++i) arrays["x"].data[i] = float(i / 128);
  execute(p.program, arrays);
  // Row r of y: r + (r + 16) + (r + 32) + (r + 48).
  const HostArray& y = arrays.at("y");
  for (size_t i = 0; i < y.data.size(); ++i) EXPECT_EQ(y.data[i], 4.0f * float(i / 128) + 96.0f);
  const std::string e = error_of([&] {
    import_program(write(
        replaced(kRunningSum, R"({"kind": "last", "axis": 0})", R"({"kind": "last", "axis": 1})")));
  });
  EXPECT_NE(e.find("ops[5].when.axis': grid axis 1 of a 1-axis grid"), std::string::npos) << e;
}

TEST(ProgramImport, JoinsTheCatalog) {
  const ImportedProgram p = import_program(write(kProgram));
  const kernels::CatalogEntry e = catalog_entry(p);
  EXPECT_EQ(e.name, "imported:affine");
  EXPECT_TRUE(e.knobs.empty());
  EXPECT_EQ(e.program(load_chip("v6e"), {}).items.size(), 1u);
}

TEST(ProgramImport, BadFilesAreOneLineNamingThePlace) {
  auto error = [](const std::string& text) {
    return error_of([&] { import_program(write(text)); });
  };
  // A missing field.
  std::string e = error(replaced(kProgram, R"("block": [16, 128],)", ""));
  EXPECT_NE(e.find(".json:5:14: key 'items[0].kernel.inputs[0].block': missing"), std::string::npos)
      << e;
  // A block of the wrong rank.
  e = error(replaced(kProgram, R"("block": [16, 128])", R"("block": [16])"));
  EXPECT_NE(e.find("key 'items[0].kernel.inputs[0].block': block rank 1 is not the array's rank 2"),
            std::string::npos)
      << e;
  // An index map that does not fit the grid.
  e = error(replaced(kProgram, R"([{"offset": 0, "coeff": [1]}, {"offset": 0, "coeff": [0]}]}],
  "outputs")",
                     R"([{"offset": 0, "coeff": [1, 0]}, {"offset": 0, "coeff": [0]}]}],
  "outputs")"));
  EXPECT_NE(e.find("coeff': 2 coefficients for a grid of rank 1"), std::string::npos) << e;
  // A value used before it is defined, an unknown field, an impossible op.
  e = error(replaced(kProgram, R"("in": [2], "scalar": 1.0)", R"("in": [7], "scalar": 1.0)"));
  EXPECT_NE(e.find("ops[1].in': value 7 is not defined yet (3 are)"), std::string::npos) << e;
  e = error(replaced(kProgram, R"("source": "hand-written")", R"("sauce": 1)"));
  EXPECT_NE(e.find(":2:62: key 'sauce': unknown key"), std::string::npos) << e;
  e = error(replaced(kProgram, R"("axes": [1])", R"("axes": [1], "dtype": "bf17")"));
  EXPECT_NE(e.find("ops[2].dtype': unknown field of a reduce op (known: op, name, in, when, out, "
                   "fn, axes)"),
            std::string::npos)
      << e;
  e = error(replaced(kProgram, R"("fn": "add", "in": [2])", R"("fn": "pow", "in": [2])"));
  EXPECT_NE(e.find("ops[1].fn': expected one of add, and, div"), std::string::npos) << e;
  e = error(replaced(kProgram, R"("format": "tpusim-program")", R"("format": "scenario")"));
  EXPECT_NE(e.find("key 'format': expected 'tpusim-program'"), std::string::npos) << e;
}

}  // namespace
}  // namespace tpusim
