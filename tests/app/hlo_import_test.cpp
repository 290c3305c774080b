// The TPU compiler's programs in tpusim: HLO text read strictly (shapes, tuples, memory spaces,
// attributes; bad text is one error naming file:line:column), and programs compiled by
// `python -m tpusim_jax compile` for a v5e topology (tests/data/hlo, made by
// scripts/make_hlo_test_data.sh) imported with the work the compiler chose.
#include "app/hlo_import.h"

#include <gtest/gtest.h>

#include <set>

#include "app/hlo_work.h"
#include "app/vliw_floors.h"
#include "models/chip_loader.h"
#include "sim/timing/engine.h"
#include "tests/error_of.h"

namespace tpusim {
namespace {

using testing::error_of;

int64_t time_of(const RunResult& r, Cause c) { return r.time[static_cast<int>(c)]; }

const std::string kData = std::string(TPUSIM_SOURCE_DIR) + "/tests/data/hlo/";

const char* kLoop =
    R"(HloModule jit_loop, entry_computation_layout={(f32[8,128]{1,0})->f32[8,128]{1,0}}

FileNames
1 "loop.py"

%body (p: (s32[], f32[8,128])) -> (s32[], f32[8,128]) {
  %p = (s32[]{:T(128)}, f32[8,128]{1,0:T(8,128)S(1)}) parameter(0)
  %i = s32[]{:T(128)} get-tuple-element(%p), index=0
  %x = f32[8,128]{1,0:T(8,128)S(1)} get-tuple-element(%p), index=1
  %one = s32[]{:T(128)} constant(1)
  %next = s32[]{:T(128)} add(%i, %one)
  %y = f32[8,128]{1,0:T(8,128)} exponential(%x), metadata={op_name="jit(f)/while/body/exp"}
  ROOT %t = (s32[]{:T(128)}, /*index=1*/f32[8,128]{1,0:T(8,128)S(1)}) tuple(%next, %y)
}

%cond (q: (s32[], f32[8,128])) -> pred[] {
  %q = (s32[]{:T(128)}, f32[8,128]{1,0:T(8,128)S(1)}) parameter(0)
  %j = s32[]{:T(128)} get-tuple-element(%q), index=0
  %n = s32[]{:T(128)} constant(12)
  ROOT %lt = pred[]{:T(512)} compare(%j, %n), direction=LT
}

ENTRY %main (a: f32[8,128]) -> f32[8,128] {
  %a = f32[8,128]{1,0:T(8,128)} parameter(0)
  %zero = s32[]{:T(128)} constant(2)
  %init = (s32[]{:T(128)}, f32[8,128]{1,0:T(8,128)S(1)}) tuple(%zero, %a)
  %w = (s32[]{:T(128)}, f32[8,128]{1,0:T(8,128)S(1)}) while(%init), condition=%cond, body=%body, metadata={op_name="jit(f)/while"}
  ROOT %r = f32[8,128]{1,0:T(8,128)} get-tuple-element(%w), index=1
}
)";

TEST(HloText, ReadsShapesTuplesMemorySpacesAndAttributes) {
  const HloModule m = parse_hlo(kLoop, "loop.hlo");
  EXPECT_EQ(m.name, "jit_loop");
  ASSERT_EQ(m.computations.size(), 3u);
  EXPECT_TRUE(m.entry().name == "main");
  const HloInstruction& w = *m.entry().find("w");
  EXPECT_EQ(w.opcode, "while");
  EXPECT_EQ(w.attr("body"), "%body");
  EXPECT_EQ(w.op_name(), "jit(f)/while");
  ASSERT_TRUE(w.shape.is_tuple());
  EXPECT_EQ(w.shape.tuple[1].memory_space, 1);  // S(1): VMEM
  EXPECT_EQ(w.shape.bytes(), 4 + 8 * 128 * 4);
  const HloInstruction& t = m.computation("body").root();
  EXPECT_EQ(t.operands, (std::vector<std::string>{"next", "y"}));
  EXPECT_EQ(m.computation("%cond").find("n")->literal, "12");
}

TEST(HloText, BadTextIsOneErrorNamingTheLineAndColumn) {
  std::string e =
      error_of([] { parse_hlo("ENTRY %m () -> f32[] {\n  %x = f33[2] add(%a)\n}\n", "b.hlo"); });
  EXPECT_EQ(e, "b.hlo:2:11: expected a shape such as f32[8,128], found 'f33'") << e;
  e = error_of([] { parse_hlo("ENTRY %m () -> f32[] {\n  %x = f32[2] add(%a\n}\n", "b.hlo"); });
  EXPECT_NE(e.find("b.hlo:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("no ')' closes this"), std::string::npos) << e;
  e = error_of([] { parse_hlo("ENTRY %m () -> f32[] {\n  %x = f32[2] add(%a)\n", "b.hlo"); });
  EXPECT_EQ(e, "b.hlo: computation 'm' is not closed by '}'") << e;
}

TEST(HloImport, AWhileLoopsTripCountComesFromItsCondition) {
  const HloProgram p = import_hlo_module(parse_hlo(kLoop, "loop.hlo"), {});
  ASSERT_EQ(p.loops.size(), 1u);
  EXPECT_EQ(p.loops[0].trips, 10);            // i from 2 while i < 12
  EXPECT_EQ(p.loops[0].body_ops.size(), 1u);  // the exponential (the counter's add is scalar)
  ASSERT_EQ(p.program.items.size(), 1u);
  const Loop& loop = std::get<Loop>(p.program.items[0].what);
  EXPECT_EQ(loop.trips, 10);
  // The exponential reads x from VMEM (S(1)) and writes y to HBM: 4 KiB written, nothing read.
  const HloModule m = parse_hlo(kLoop, "loop.hlo");
  const HloWork w = work_of(m, m.computation("body"), *m.computation("body").find("y"));
  EXPECT_TRUE(w.reads.empty());
  ASSERT_EQ(w.writes.size(), 1u);
  EXPECT_EQ(w.writes[0].bytes, 8 * 128 * 4);
  EXPECT_EQ(w.eup_elements, 8 * 128);
  // A loop the compiler unrolled by two (XLA's "wide" windowed einsum bodies) adds 2 a trip.
  std::string unrolled = kLoop;
  unrolled.replace(unrolled.find("constant(1)"), 11, "constant(2)");
  EXPECT_EQ(import_hlo_module(parse_hlo(unrolled, "wide.hlo"), {}).loops.at(0).trips, 5);
}

TEST(HloImport, ADotFusionCarriesTheCompilersFlops) {
  const HloProgram p = import_hlo(kData + "dot_tanh");
  EXPECT_EQ(p.chip, "v5e");
  const RunResult r = simulate(load_chip(p.chip), p.program);
  // 2 x 256 x 512 x 256 on the MXU; XLA's cost analysis adds the tanh's 65536 elements twice.
  EXPECT_EQ(r.flops, 2LL * 256 * 512 * 256);
  EXPECT_NEAR(double(r.flops), p.compile["cost"]["flops"].get<double>(), 0.002 * r.flops);
  // It reads both operands and writes the result once: 256 KiB + 256 KiB in, 128 KiB out.
  EXPECT_EQ(r.hbm_write_bytes, 256 * 256 * 2);
  EXPECT_EQ(r.hbm_read_bytes, 256 * 512 * 2 + 512 * 256 * 2);
}

// A reduction over the lanes (the operand's minor dim) ends on the XLU, one cross-lane reduction
// per 8 rows once a row's vregs are added up: f32[4096,16,128] summed over its 128 lanes is 8192
// of them, f32[512,4096] summed over its 4096 lanes 64; summed over dim 1 (not minor) none.
TEST(HloImport, ALaneReductionEndsOnTheXlu) {
  const char* text = R"(HloModule jit_sums

ENTRY %main (x: f32[4096,16,128], y: f32[512,4096]) -> (f32[4096,16], f32[512], f32[4096,128]) {
  %x = f32[4096,16,128]{2,1,0:T(8,128)S(1)} parameter(0)
  %y = f32[512,4096]{1,0:T(8,128)S(1)} parameter(1)
  %zero = f32[]{:T(128)} constant(0)
  %lanes = f32[4096,16]{1,0:T(8,128)S(1)} reduce(%x, %zero), dimensions={2}, to_apply=%add
  %wide = f32[512]{0:T(512)S(1)} reduce(%y, %zero), dimensions={1}, to_apply=%add
  %rows = f32[4096,128]{1,0:T(8,128)S(1)} reduce(%x, %zero), dimensions={1}, to_apply=%add
  ROOT %t = (f32[4096,16]{1,0}, f32[512]{0}, f32[4096,128]{1,0}) tuple(%lanes, %wide, %rows)
}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[]{:T(128)} parameter(0)
  %b = f32[]{:T(128)} parameter(1)
  ROOT %s = f32[]{:T(128)} add(%a, %b)
}
)";
  const HloModule m = parse_hlo(text, "sums.hlo");
  EXPECT_EQ(m.entry().find("x")->shape.minor_dim(), 2);
  auto rows = [&](const char* name) {
    return work_of(m, m.entry(), *m.entry().find(name)).lane_reduced_rows;
  };
  EXPECT_EQ(rows("lanes"), 4096 * 16);
  EXPECT_EQ(rows("wide"), 512);
  EXPECT_EQ(rows("rows"), 0);
  // The kernel charges the XLU a cross-lane reduction per 8 of those rows: 8192 for %lanes.
  const ChipSpec v5e = load_chip("v5e");
  const auto lanes = work_kernel("lanes", work_of(m, m.entry(), *m.entry().find("lanes")));
  const RunResult r = simulate_kernel(v5e, lanes);
  EXPECT_GE(r.cycles, static_cast<int64_t>(8192 / v5e.vpu_cross_lane_per_cycle));
}

TEST(HloImport, TheCompilersCostModelIsReadBesideTheSimulation) {
  // dot_tanh's one fusion carries "estimated_cycles":"5700" in its backend config: 3.8 us at
  // v5e's 1.5 GHz, once; the simulation of the same kernel is what tpusim adds up.
  const HloProgram p = import_hlo(kData + "dot_tanh");
  ASSERT_EQ(p.estimated_cycles.size(), 1u);
  EXPECT_EQ(p.estimated_cycles.begin()->second, 5700);
  const RunResult r = simulate(load_chip("v5e"), p.program);
  const CompilerEstimate e = compiler_estimate(p, r, 1.5e9);
  EXPECT_EQ(e.kernels, 1);
  EXPECT_DOUBLE_EQ(e.compiler_s, 5700 / 1.5e9);
  double estimated = 0, all = 0;
  for (const KernelStats& k : r.kernels) {
    all += k.cycles / r.clock_hz;
    if (p.estimated_cycles.count(k.name)) estimated += k.cycles / r.clock_hz;
  }
  EXPECT_DOUBLE_EQ(e.tpusim_s, estimated);
  EXPECT_DOUBLE_EQ(e.tpusim_s + e.not_estimated_s, all);
  // In a loop each call counts: the main path's scan body runs twice.
  const HloProgram main = import_hlo(kData + "gdn_main_path");
  const RunResult rm = simulate(load_chip("v5e"), main.program);
  double by_hand = 0;
  for (const KernelStats& k : rm.kernels)
    if (main.estimated_cycles.count(k.name))
      by_hand += main.estimated_cycles.at(k.name) * k.calls / 1.5e9;
  EXPECT_GT(main.estimated_cycles.size(), 20u);
  EXPECT_DOUBLE_EQ(compiler_estimate(main, rm, 1.5e9).compiler_s, by_hand);
  bool looped = false;
  for (const KernelStats& k : rm.kernels)
    looped = looped || (main.estimated_cycles.count(k.name) && k.calls == 2);
  EXPECT_TRUE(looped);
}

// qk_repeat was compiled with --vliw-floors: each of its 14 XLA ops has its final bundles' length
// as a floor. The repeat's broadcast writes its output in VMEM, which the import's units do in
// 221 cycles of step overhead, but its schedule is 73,614 cycles (tests/jax/vliw_floors.sh
// re-derives it): each floored call lasts max(its units' time, the floor).
TEST(HloImport, TheCompiledScheduleIsAFloorOnEachOp) {
  const HloProgram p = import_hlo(kData + "qk_repeat", true);
  EXPECT_EQ(p.vliw_floored_kernels, 14);
  const auto floors = vliw_floors_of(p.compile, "qk_repeat");
  EXPECT_EQ(floors.at("broadcast.12"), 73614);
  const ChipSpec chip = load_chip("v5e");
  const RunResult floored = simulate(chip, p.program),
                  unfloored = simulate(chip, import_hlo(kData + "qk_repeat").program);
  std::map<std::string, int64_t> own;
  for (const KernelStats& k : unfloored.kernels) own[k.name] = k.cycles / k.calls;
  int raised = 0;
  for (const KernelStats& k : floored.kernels) {
    const auto f = floors.find(k.name);
    const int64_t expected = f == floors.end() ? own[k.name] : std::max(own[k.name], f->second);
    EXPECT_EQ(k.cycles / k.calls, expected) << k.name;
    raised += f != floors.end() && f->second > own[k.name];
  }
  EXPECT_EQ(own["broadcast.12"], 221);
  EXPECT_GT(raised, 5);
  EXPECT_GT(time_of(floored, Cause::vliw_schedule), 0);
  EXPECT_EQ(time_of(unfloored, Cause::vliw_schedule), 0);
}

TEST(HloImport, BadFloorsAreOneErrorNamingTheFile) {
  const auto bad = nlohmann::json::parse(R"({"vliw_floors": {"cycles": {"fusion": -3}}})");
  EXPECT_EQ(error_of([&] { vliw_floors_of(bad, "r.json"); }),
            "r.json: vliw_floors: 'fusion' is not a count of cycles");
  const auto no_map = nlohmann::json::parse(R"({"vliw_floors": {"source": "x"}})");
  EXPECT_EQ(error_of([&] { vliw_floors_of(no_map, "r.json"); }),
            "r.json: 'vliw_floors' has no 'cycles' map of instruction -> cycles");
  EXPECT_TRUE(vliw_floors_of(nlohmann::json::parse("{}"), "r.json").empty());
  // Floors are applied when asked, and asking for a compile that recorded none is an error.
  EXPECT_EQ(import_hlo(kData + "qk_repeat").vliw_floored_kernels, 0);
  EXPECT_EQ(error_of([&] { import_hlo(kData + "dot_tanh", true); }),
            kData +
                "dot_tanh: --vliw-floors: the compile recorded no VLIW floors (compile it with "
                "--vliw-floors)");
}

TEST(HloImport, TheMaxTextMainPathsSolveAndScanAsCompiled) {
  const HloProgram p = import_hlo(kData + "gdn_main_path");
  // One while loop, the lax.scan over the 2 chunks; solve_triangular is no loop: the TPU backend
  // inverts the diagonal blocks in one custom call.
  ASSERT_EQ(p.loops.size(), 1u);
  EXPECT_EQ(p.loops[0].trips, 2);
  EXPECT_NE(p.loops[0].op_name.find("while"), std::string::npos);
  // The custom call runs as the block-at-a-time inversion: one grid step per [C, C] block (2
  // chunks x 2 heads), C - 1 = 127 row steps in each.
  int inversions = 0;
  for (const ProgramItem& item : p.program.items)
    if (const auto* k = std::get_if<KernelCall>(&item.what);
        k && k->kernel->name == "InvertDiagBlocksLowerTriangular (xla)") {
      ++inversions;
      EXPECT_EQ(k->kernel->grid_steps(), 4);
      int row_steps = 0;
      for (const Op& op : k->kernel->body) row_steps += op.latency == Latency::xla_row_solve_step;
      EXPECT_EQ(row_steps, 127);
      EXPECT_NE(item.stage.find("triangular_solve"), std::string::npos) << item.stage;
    }
  EXPECT_EQ(inversions, 1);
  // Dots: S, u, w and inv x I per (chunk, head) in the forward, 4 x 4 x 2 x 128^3; five per
  // iteration of the scan over both heads, 2 x 5 x 2 x 2 x 128^3.
  const RunResult r = simulate(load_chip("v5e"), p.program);
  EXPECT_EQ(r.flops, 4LL * 4 * 2 * 128 * 128 * 128 + 2LL * 5 * 2 * 2 * 128 * 128 * 128);
}

TEST(HloImport, APallasCustomCallIsTheExportedKernel) {
  const HloProgram p = import_hlo(kData + "gdn_scan_fwd");
  bool found = false;
  for (const ProgramItem& item : p.program.items)
    if (const auto* k = std::get_if<KernelCall>(&item.what);
        k && k->kernel->name == "gdn_scan_fwd") {
      found = true;
      EXPECT_EQ(k->kernel->grid, (std::vector<int64_t>{1, 1, 2}));
    }
  EXPECT_TRUE(found);
  // Without the exported kernels the custom call is an error naming it.
  const std::string e = error_of([] { import_hlo(kData + "gdn_scan_fwd/optimized.hlo"); });
  EXPECT_NE(e.find("Pallas kernel 'gdn_scan_fwd'"), std::string::npos) << e;
  EXPECT_NE(e.find("optimized.hlo:"), std::string::npos) << e;
}

// A real int8 step (tests/data/compiled/small_int8: MaxText's AQT int8 on v5e-4, remat minimal).
// Read independently from its HLO text: 21 convolutions take two s8 operands, the forward's 7
// projections (q, k, v, out, two up and the down projection) and the backward's 14 (each one's
// input and weight gradients); the gradients' stochastic rounding draws from rng-bit-generator,
// the key's halves joined by X64Combine and split by X64Split* custom calls. The step simulates,
// its int8 dots at the chip's int8 rate.
TEST(HloImport, ARealInt8StepRunsItsProjectionsOnInt8Operands) {
  const HloProgram h =
      import_hlo(std::string(TPUSIM_SOURCE_DIR) + "/tests/data/compiled/small_int8.hlo.gz");
  std::set<const Kernel*> int8_dots;
  auto visit = [&](const std::shared_ptr<const Kernel>& k) {
    for (const Op& op : k->body)
      if (op.kind == OpKind::dot && k->values[op.inputs[0]].dtype == DType::s8 &&
          k->values[op.inputs[1]].dtype == DType::s8)
        int8_dots.insert(k.get());
  };
  for (const ProgramItem& item : h.program.items) {
    if (const auto* k = std::get_if<KernelCall>(&item.what)) visit(k->kernel);
    if (const auto* l = std::get_if<Loop>(&item.what))
      for (const auto& k : l->body) visit(k);
  }
  EXPECT_EQ(int8_dots.size(), 21u);
  const ChipSpec v5e = load_chip("v5e");
  const RunResult r = simulate(v5e, h.program);
  // Some kernel's dots outrun the bf16 peak: only the int8 rate allows it.
  bool beyond_bf16 = false;
  for (const KernelStats& k : r.kernels)
    beyond_bf16 = beyond_bf16 ||
                  (k.flops > 0 &&
                   static_cast<double>(k.flops) / (static_cast<double>(k.cycles) / v5e.clock_hz) >
                       1.2 * v5e.peak_bf16_flops);
  EXPECT_TRUE(beyond_bf16);
}

// A real megablox step (tests/data/compiled/small_moe_sparse: 8 experts, top 2, 2 x 1024 tokens a
// chip, width 1024, expert MLP 2048). Each layer's routed rows are 4096, 512 an expert under
// balanced routing (one 512-row tile each), so every grouped matmul does 2 x 4096 x 1024 x 2048
// FLOPs: in the layer loop's body, gmm for wi_0, wi_1 and wo in the forward and again in the
// recompute, gmm for the three input gradients (wo's [4096, 1024] x [1024, 2048], wi's
// [4096, 2048] x [2048, 1024]) and tgmm for the three weight gradients (m = 8 experts x the
// output rows, k = an expert's 512 rows).
TEST(HloImport, MegabloxCallsAreGroupedMatmulsOfTheirOperands) {
  const HloProgram h =
      import_hlo(std::string(TPUSIM_SOURCE_DIR) + "/tests/data/compiled/small_moe_sparse.hlo.gz");
  // The layer loop holds collectives, so the import unrolls it: one kernel per call site.
  std::set<const Kernel*> distinct;
  for (const ProgramItem& item : h.program.items) {
    if (const auto* k = std::get_if<KernelCall>(&item.what)) distinct.insert(k->kernel.get());
    if (const auto* l = std::get_if<Loop>(&item.what))
      for (const auto& k : l->body) distinct.insert(k.get());
  }
  std::multiset<std::string> grouped;
  for (const Kernel* k : distinct)
    if (k->name.rfind("megablox", 0) == 0) grouped.insert(k->name);
  const std::multiset<std::string> expected = {
      "megablox 4096x1024x2048 (512,1024,1024)", "megablox 4096x1024x2048 (512,1024,1024)",
      "megablox 4096x1024x2048 (512,1024,1024)", "megablox 4096x1024x2048 (512,1024,1024)",
      "megablox 4096x1024x2048 (512,1024,1024)", "megablox 4096x2048x1024 (512,1024,1024)",
      "megablox 4096x2048x1024 (512,1024,1024)", "megablox 4096x2048x1024 (512,1024,1024)",
      "megablox 4096x2048x1024 (512,1024,1024)", "megablox 16384x512x1024 (512,512,1024)",
      "megablox 8192x512x2048 (512,512,1024)",   "megablox 8192x512x2048 (512,512,1024)"};
  EXPECT_EQ(grouped, expected);
}

}  // namespace
}  // namespace tpusim
