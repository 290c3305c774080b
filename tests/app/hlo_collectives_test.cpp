// Whole training steps as the TPU compiler writes them: a layer loop whose body gathers each
// weight with an async collective fusion (MaxText's flags: --xla_tpu_enable_async_collective_
// fusion...), reduces a gradient with a synchronous all-reduce, and runs a dot the TPU backend
// writes as a padded-window convolution. The forms are those of the compiled C5 #24 step
// (v5p-256, libtpu 0.0.42.1): mesh replica groups, device_ids sub-axes, a Pallas call's
// kernel_metadata printed over two lines.
#include "app/hlo_collectives.h"

#include <gtest/gtest.h>

#include <set>

#include "app/hlo_import.h"
#include "app/hlo_work.h"
#include "kernels/transformer.h"
#include "models/chip_loader.h"
#include "sim/timing/collectives.h"
#include "sim/timing/engine.h"
#include "tests/error_of.h"

namespace tpusim {
namespace {

const char* kStep = R"(HloModule jit_step

%start_computation (param_0: bf16[32,128]) -> (bf16[32,128], bf16[128,128], u32[]) {
  %param_0 = bf16[32,128]{1,0:T(8,128)(2,1)} parameter(0)
  %all-gather.1 = bf16[128,128]{1,0:T(8,128)(2,1)} all-gather(%param_0), channel_id=1, replica_groups=mesh['axis_0'=4,'axis_1'=2] {'axis_0'}, dimensions={0}, use_global_device_ids=true
  ROOT %custom-call.1 = (bf16[32,128]{1,0:T(8,128)(2,1)}, bf16[128,128]{1,0:T(8,128)(2,1)}, u32[]{:S(2)}) custom-call(%all-gather.1), custom_call_target="AsyncCollectiveStart"
}

%done_computation (param_0: bf16[32,128], param_1: bf16[128,128], param_2: u32[]) -> bf16[128,128] {
  %param_0 = bf16[32,128]{1,0:T(8,128)(2,1)} parameter(0)
  %param_1 = bf16[128,128]{1,0:T(8,128)(2,1)} parameter(1)
  %param_2 = u32[]{:S(2)} parameter(2)
  %all-gather.2 = bf16[128,128]{1,0:T(8,128)(2,1)} all-gather(%param_0), channel_id=1, replica_groups=mesh['axis_0'=4,'axis_1'=2] {'axis_0'}, dimensions={0}, use_global_device_ids=true
  ROOT %custom-call.2 = bf16[128,128]{1,0:T(8,128)(2,1)} custom-call(%param_0, %param_1, %all-gather.2, %param_2), custom_call_target="AsyncCollectiveDone"
}

%scale_computation (param_0: bf16[8,512,128]) -> bf16[8,512,128] {
  %param_0 = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} parameter(0)
  ROOT %multiply.1 = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} multiply(%param_0, %param_0)
}

%dot_computation (param_0: bf16[128,128], param_1: bf16[8,512,128]) -> bf16[8,512,128] {
  %param_0 = bf16[128,128]{1,0:T(8,128)(2,1)} parameter(0)
  %bitcast.1 = bf16[128,1,128]{2,1,0:T(8,128)(2,1)} bitcast(%param_0)
  %param_1 = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} parameter(1)
  ROOT %convolution.1 = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} convolution(%bitcast.1, %param_1), window={size=8 pad=7_7 rhs_reversal=1}, dim_labels=f0b_0oi->0fb
}

%body (p: (s32[], bf16[32,128], bf16[8,512,128])) -> (s32[], bf16[32,128], bf16[8,512,128]) {
  %p = (s32[]{:T(128)}, bf16[32,128]{1,0:T(8,128)(2,1)}, bf16[8,512,128]{2,1,0:T(8,128)(2,1)}) parameter(0)
  %i = s32[]{:T(128)} get-tuple-element(%p), index=0
  %w = bf16[32,128]{1,0:T(8,128)(2,1)} get-tuple-element(%p), index=1
  %x = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} get-tuple-element(%p), index=2
  %one = s32[]{:T(128)} constant(1)
  %next = s32[]{:T(128)} add(%i, %one)
  %start = (bf16[32,128]{1,0:T(8,128)(2,1)}, bf16[128,128]{1,0:T(8,128)(2,1)}, u32[]{:S(2)}) fusion(%w), kind=kCustom, calls=%start_computation
  %s0 = bf16[32,128]{1,0:T(8,128)(2,1)} get-tuple-element(%start), index=0
  %s1 = bf16[128,128]{1,0:T(8,128)(2,1)} get-tuple-element(%start), index=1
  %s2 = u32[]{:S(2)} get-tuple-element(%start), index=2
  %scaled = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} fusion(%x), kind=kLoop, calls=%scale_computation, frontend_attributes={kernel_metadata={
"note":"printed over two lines"}}
  %done = bf16[128,128]{1,0:T(8,128)(2,1)} fusion(%s0, %s1, %s2), kind=kCustom, calls=%done_computation
  %y = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} fusion(%done, %scaled), kind=kOutput, calls=%dot_computation
  %grad = bf16[128,128]{1,0:T(8,128)(2,1)} all-reduce(%done), channel_id=2, replica_groups=mesh['axis_0'=4,'axis_1'=2], device_ids=([2,4]T(1,0)) {'axis_0':(2)2}, to_apply=%add, backend_config={"collective_algorithm_config":{"emitter":"RotatedPincerEmitter","strategy":"StrategyND","debug":"StrategyND{colors:2 phases:2 cores:{2 4}}"}}
  ROOT %t = (s32[]{:T(128)}, bf16[32,128]{1,0:T(8,128)(2,1)}, bf16[8,512,128]{2,1,0:T(8,128)(2,1)}) tuple(%next, %w, %y)
}

%add (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %sum = bf16[] add(%a, %b)
}

%cond (q: (s32[], bf16[32,128], bf16[8,512,128])) -> pred[] {
  %q = (s32[]{:T(128)}, bf16[32,128]{1,0:T(8,128)(2,1)}, bf16[8,512,128]{2,1,0:T(8,128)(2,1)}) parameter(0)
  %j = s32[]{:T(128)} get-tuple-element(%q), index=0
  ROOT %lt = pred[]{:T(512)} compare(%j, %n), direction=LT
  %n = s32[]{:T(128)} constant(3)
}

ENTRY %main (w0: bf16[32,128], x0: bf16[8,512,128]) -> bf16[8,512,128] {
  %w0 = bf16[32,128]{1,0:T(8,128)(2,1)} parameter(0)
  %x0 = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} parameter(1)
  %zero = s32[]{:T(128)} constant(0)
  %init = (s32[]{:T(128)}, bf16[32,128]{1,0:T(8,128)(2,1)}, bf16[8,512,128]{2,1,0:T(8,128)(2,1)}) tuple(%zero, %w0, %x0)
  %loop = (s32[]{:T(128)}, bf16[32,128]{1,0:T(8,128)(2,1)}, bf16[8,512,128]{2,1,0:T(8,128)(2,1)}) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"3"}}
  ROOT %out = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} get-tuple-element(%loop), index=2
}
)";

int index_of(const Program& p, const std::string& name, int occurrence) {
  for (size_t i = 0; i < p.items.size(); ++i)
    if (p.items[i].name == name && occurrence-- == 0) return static_cast<int>(i);
  return -1;
}

bool waits_for(const ProgramItem& item, int dep) {
  return std::find(item.deps.begin(), item.deps.end(), dep) != item.deps.end();
}

TEST(HloCollectives, ReplicaGroupsOverMeshAxesAndSubAxes) {
  const HloModule m = parse_hlo(kStep, "step.hlo");
  const HloComputation& body = m.computation("%body");
  const auto gather = hlo_collective(m, *body.find("start"));
  ASSERT_TRUE(gather);
  EXPECT_EQ(gather->kind, CollectiveKind::all_gather);
  EXPECT_EQ(gather->axis.size, 4);          // 'axis_0' of the 4 x 2 mesh
  EXPECT_EQ(gather->bytes, 128 * 128 * 2);  // the gathered result
  const auto reduce = hlo_collective(m, *body.find("grad"));
  ASSERT_TRUE(reduce);
  EXPECT_EQ(reduce->kind, CollectiveKind::all_reduce);
  EXPECT_EQ(reduce->axis.size, 2);        // {'axis_0':(2)2}: 2 devices of axis_0
  EXPECT_TRUE(gather->axis.wraparound);   // a ring
  EXPECT_EQ(gather->axis.torus_dims, 1);  // no emitter named: one dimension
  EXPECT_EQ(reduce->axis.torus_dims, 2);  // StrategyND{... cores:{2 4}}
  EXPECT_NE(gather->axis.name, reduce->axis.name);
  EXPECT_FALSE(hlo_collective(m, *body.find("done")));
  EXPECT_EQ(hlo_async_collective_role(m, *body.find("done")), "AsyncCollectiveDone");
  // The attribute printed over two lines belongs to its instruction.
  EXPECT_NE(body.find("scaled")->attr("frontend_attributes").find("two lines"), std::string::npos);
}

// v5e's synchronous weight gathers on a major dimension name AllGatherWithNetRouterEmitter, whose
// final bundles send each shard in all four link directions: routed over every dimension the
// group spans (torus_dims 0), where a 1-D emitter's gather goes round one ring
// (tests/jax/weight_gathers.sh).
TEST(HloCollectives, ARoutedGatherLoadsEveryTorusDimension) {
  const HloModule m = parse_hlo(R"(HloModule gathers

ENTRY %main (w: bf16[16,32,256]) -> (bf16[4096,32,256], bf16[4096,32,256]) {
  %w = bf16[16,32,256]{2,1,0:T(8,128)(2,1)} parameter(0)
  %routed = bf16[4096,32,256]{2,1,0:T(8,128)(2,1)} all-gather(%w), channel_id=1, replica_groups=[1,256]<=[256], dimensions={0}, use_global_device_ids=true, backend_config={"collective_algorithm_config":{"emitter":"AllGatherWithNetRouterEmitter"}}
  %ring = bf16[4096,32,256]{2,1,0:T(8,128)(2,1)} all-gather(%w), channel_id=2, replica_groups=[1,256]<=[256], dimensions={0}, use_global_device_ids=true, backend_config={"collective_algorithm_config":{"emitter":"1DAllGatherOnMajorDimImbalanced"}}
  ROOT %t = (bf16[4096,32,256]{2,1,0:T(8,128)(2,1)}, bf16[4096,32,256]{2,1,0:T(8,128)(2,1)}) tuple(%routed, %ring)
}
)",
                                "gathers.hlo");
  const HloComputation& entry = m.computation("%main");
  const auto routed = hlo_collective(m, *entry.find("routed"));
  const auto ring = hlo_collective(m, *entry.find("ring"));
  ASSERT_TRUE(routed && ring);
  EXPECT_EQ(routed->axis.size, 256);
  EXPECT_EQ(routed->axis.torus_dims, 0);  // every dimension the group spans
  EXPECT_EQ(ring->axis.torus_dims, 1);
  // On a 16 x 16 v5e torus: both ways round both dimensions' rings (4 links), 8 hops each; one
  // ring (2 links) of 128 hops.
  const ChipSpec v5e = load_chip("v5e");
  const double bytes = 4096.0 * 32 * 256 * 2, link = v5e.ici_efficiency * v5e.ici_link_bytes_per_s;
  EXPECT_NEAR(collective_seconds(v5e, *routed),
              255.0 / 256 * bytes / (4 * link) + 16 * v5e.ici_hop_latency_s, 1e-12);
  EXPECT_NEAR(collective_seconds(v5e, *ring),
              255.0 / 256 * bytes / (2 * link) + 128 * v5e.ici_hop_latency_s, 1e-12);
}

// A fusion the async collective fusion hands a collective on to (its computation holds the
// all-gather beside its own work, as C1's async_collective_fusion.3824) carries the gather's
// devices: its kernel runs the chip's setup loop over the 256 of them first.
TEST(HloCollectives, AFusionCarryingAGatherCarriesItsDevices) {
  const HloModule m = parse_hlo(R"(HloModule carrier

%carry (p0: bf16[16,32,256], p1: f32[128,128]) -> (bf16[4096,32,256], f32[128,128]) {
  %p0 = bf16[16,32,256]{2,1,0:T(8,128)(2,1)} parameter(0)
  %p1 = f32[128,128]{1,0:T(8,128)} parameter(1)
  %ag = bf16[4096,32,256]{2,1,0:T(8,128)(2,1)} all-gather(%p0), channel_id=1, replica_groups=[1,256]<=[256], dimensions={0}, use_global_device_ids=true
  %sq = f32[128,128]{1,0:T(8,128)} multiply(%p1, %p1)
  ROOT %t = (bf16[4096,32,256]{2,1,0:T(8,128)(2,1)}, f32[128,128]{1,0:T(8,128)}) tuple(%ag, %sq)
}

%plain (p0: f32[128,128]) -> f32[128,128] {
  %p0 = f32[128,128]{1,0:T(8,128)} parameter(0)
  ROOT %sq = f32[128,128]{1,0:T(8,128)} multiply(%p0, %p0)
}

ENTRY %main (w: bf16[16,32,256], x: f32[128,128]) -> (bf16[4096,32,256], f32[128,128]) {
  %w = bf16[16,32,256]{2,1,0:T(8,128)(2,1)} parameter(0)
  %x = f32[128,128]{1,0:T(8,128)} parameter(1)
  %y = f32[128,128]{1,0:T(8,128)} fusion(%x), kind=kLoop, calls=%plain
  ROOT %f = (bf16[4096,32,256]{2,1,0:T(8,128)(2,1)}, f32[128,128]{1,0:T(8,128)}) fusion(%w, %y), kind=kLoop, calls=%carry
}
)",
                                "carrier.hlo");
  const HloComputation& entry = m.computation("%main");
  const HloWork carrier = work_of(m, entry, *entry.find("f"));
  EXPECT_EQ(carrier.carried_group, 256);
  EXPECT_EQ(carrier.writes.size(), 1u);  // its own product; the gather is handed on
  EXPECT_EQ(work_kernel("f", carrier)->carried_group, 256);
  EXPECT_EQ(work_of(m, entry, *entry.find("y")).carried_group, 0);
}

TEST(HloCollectives, ALoopWithCollectivesRunsItsIterationsByDataFlow) {
  const HloProgram h = import_hlo_module(parse_hlo(kStep, "step.hlo"), {});
  const Program& p = h.program;
  ASSERT_EQ(h.loops.size(), 1u);  // summarised once, written out three times
  EXPECT_EQ(h.loops[0].trips, 3);
  EXPECT_EQ(h.loops[0].async_collectives, 1);  // the gather
  EXPECT_EQ(h.loops[0].async_collective_bytes, 128 * 128 * 2);
  EXPECT_EQ(h.loops[0].sync_collectives, 1);  // the gradient's all-reduce
  EXPECT_EQ(h.loops[0].sync_collective_bytes, 128 * 128 * 2);
  int collectives = 0;
  for (const ProgramItem& item : p.items)
    collectives += std::holds_alternative<Collective>(item.what);
  EXPECT_EQ(collectives, 6);  // a gather and a reduction per iteration
  for (int t = 0; t < 3; ++t) {
    const int start = index_of(p, "start", t), scaled = index_of(p, "scaled", t),
              dot = index_of(p, "y", t), grad = index_of(p, "grad", t);
    ASSERT_TRUE(start >= 0 && scaled >= 0 && dot >= 0 && grad >= 0) << t;
    // The gather overlaps the independent fusion; the dot waits for the gathered weight.
    EXPECT_FALSE(waits_for(p.items[scaled], start)) << t;
    EXPECT_TRUE(waits_for(p.items[dot], start)) << t;
    EXPECT_TRUE(waits_for(p.items[dot], scaled)) << t;
    EXPECT_TRUE(waits_for(p.items[grad], start)) << t;  // it reduces what the gather brought
    // A synchronous collective holds the cores: the next iteration's first kernel waits.
    if (t < 2) EXPECT_TRUE(waits_for(p.items[index_of(p, "scaled", t + 1)], grad)) << t;
  }
  // One kernel per instruction, its calls counted together.
  const auto& first = std::get<KernelCall>(p.items[index_of(p, "y", 0)].what).kernel;
  const auto& last = std::get<KernelCall>(p.items[index_of(p, "y", 2)].what).kernel;
  EXPECT_EQ(first.get(), last.get());
}

// kStep with XLA's async collective fusion over multiple steps (C3 #42's compiled step): the
// start's state in flight (its shard, the buffer being gathered, a sync flag) is handed through
// the fusion beside it, which continues the gather between its own work, and the done takes it
// from that fusion's outputs.
std::string continued_step() {
  std::string s = kStep;
  auto replace = [&s](const std::string& from, const std::string& to) {
    const auto at = s.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    s.replace(at, from.size(), to);
  };
  replace(
      "%dot_computation (",
      R"(%carry_computation (param_0: bf16[8,512,128], param_1: bf16[32,128], param_2: bf16[128,128], param_3: u32[]) -> (bf16[8,512,128], bf16[32,128], bf16[128,128], u32[]) {
  %param_0 = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} parameter(0)
  %param_1 = bf16[32,128]{1,0:T(8,128)(2,1)} parameter(1)
  %param_2 = bf16[128,128]{1,0:T(8,128)(2,1)} parameter(2)
  %param_3 = u32[]{:S(2)} parameter(3)
  %multiply.2 = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} multiply(%param_0, %param_0)
  ROOT %tuple.2 = (bf16[8,512,128]{2,1,0:T(8,128)(2,1)}, bf16[32,128]{1,0:T(8,128)(2,1)}, bf16[128,128]{1,0:T(8,128)(2,1)}, u32[]{:S(2)}) tuple(%multiply.2, %param_1, %param_2, %param_3)
}

%dot_computation ()");
  replace(
      R"(%scaled = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} fusion(%x), kind=kLoop, calls=%scale_computation, frontend_attributes={kernel_metadata={
"note":"printed over two lines"}}
  %done = bf16[128,128]{1,0:T(8,128)(2,1)} fusion(%s0, %s1, %s2), kind=kCustom, calls=%done_computation
  %y = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} fusion(%done, %scaled),)",
      R"(%scaled = (bf16[8,512,128]{2,1,0:T(8,128)(2,1)}, bf16[32,128]{1,0:T(8,128)(2,1)}, bf16[128,128]{1,0:T(8,128)(2,1)}, u32[]{:S(2)}) fusion(%x, %s0, %s1, %s2), kind=kOutput, calls=%carry_computation
  %c0 = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} get-tuple-element(%scaled), index=0
  %c1 = bf16[32,128]{1,0:T(8,128)(2,1)} get-tuple-element(%scaled), index=1
  %c2 = bf16[128,128]{1,0:T(8,128)(2,1)} get-tuple-element(%scaled), index=2
  %c3 = u32[]{:S(2)} get-tuple-element(%scaled), index=3
  %done = bf16[128,128]{1,0:T(8,128)(2,1)} fusion(%c1, %c2, %c3), kind=kCustom, calls=%done_computation
  %y = bf16[8,512,128]{2,1,0:T(8,128)(2,1)} fusion(%done, %c0),)");
  return s;
}

TEST(HloCollectives, AFusionHandedAnInFlightCollectiveRunsBesideIt) {
  const Program p = import_hlo_module(parse_hlo(continued_step(), "step.hlo"), {}).program;
  for (int t = 0; t < 3; ++t) {
    const int start = index_of(p, "start", t), scaled = index_of(p, "scaled", t),
              dot = index_of(p, "y", t);
    ASSERT_TRUE(start >= 0 && scaled >= 0 && dot >= 0) << t;
    // The fusion carrying the gather's state does not wait for it; what takes the gathered
    // weight from the done does.
    EXPECT_FALSE(waits_for(p.items[scaled], start)) << t;
    EXPECT_TRUE(waits_for(p.items[dot], start)) << t;
    EXPECT_TRUE(waits_for(p.items[dot], scaled)) << t;
  }
}

TEST(HloCollectives, APaddedWindowDotCountsOneTapPerOutput) {
  // The weight shared by the 8 sequences: each output position sees the one real input position
  // of the padded window, so K is the 128 features, not 8 x 128.
  const HloModule m = parse_hlo(kStep, "step.hlo");
  const HloComputation& body = m.computation("%body");
  const HloWork w = work_of(m, body, *body.find("y"));
  ASSERT_EQ(w.dots.size(), 1u);
  EXPECT_EQ(w.dots[0].k, 128);
  EXPECT_EQ(w.dots[0].m * w.dots[0].n * w.dots[0].batch, 8 * 512 * 128);
}

// A real compiled step (tests/data/compiled/small_tp: fsdp 2 x tensor 2 on v5e-4, MaxText's v5e
// flags): its two layer loops are written out with their collectives, counted per trip as an
// independent read of the HLO text finds them (forward: 5 synchronous all-gathers of 19,922,944
// bytes and 2 all-reduces of 16,384 each, 4 async gathers of 13,631,488; backward: the same
// gathers, 4 such all-reduces and one of two f32[512] arrays together, 7 async gathers of
// 38,797,312), and the step simulates.
TEST(HloCollectives, ARealTensorParallelStepImportsWithItsCollectives) {
  const HloProgram h =
      import_hlo(std::string(TPUSIM_SOURCE_DIR) + "/tests/data/compiled/small_tp.hlo.gz");
  ASSERT_EQ(h.loops.size(), 2u);
  const HloLoopSummary& fwd = h.loops[0];
  const HloLoopSummary& bwd = h.loops[1];
  EXPECT_EQ(fwd.trips, 4);
  EXPECT_EQ(bwd.trips, 4);
  EXPECT_EQ(fwd.sync_collectives, 7);
  EXPECT_EQ(fwd.sync_collective_bytes, 19'922'944 + 32'768);
  EXPECT_EQ(fwd.async_collectives, 4);
  EXPECT_EQ(fwd.async_collective_bytes, 13'631'488);
  EXPECT_EQ(bwd.sync_collectives, 10);
  EXPECT_EQ(bwd.sync_collective_bytes, 19'922'944 + 65'536 + 2 * 2048);
  EXPECT_EQ(bwd.async_collectives, 7);
  EXPECT_EQ(bwd.async_collective_bytes, 38'797'312);
  int collectives = 0;
  for (const ProgramItem& item : h.program.items)
    collectives += std::holds_alternative<Collective>(item.what);
  EXPECT_GE(collectives, 4 * (7 + 4) + 4 * (10 + 7));  // every trip's, and the step's own
}

// A real step over 2 slices (tests/data/compiled/small_2slices, v5e-4 x 2): its reductions over
// DCN are host transfers to the megascale runtime. Read independently from the HLO text, the
// backward loop's body (3 trips written out, one peeled) sends 8 ALL_REDUCE arrays of 8,396,800
// bytes together per trip, and the entry 10 more of 41,172,992 bytes and one ALL_GATHER of
// 2,097,152 bytes from each slice: each an asynchronous collective over the 2 slices, and the
// work that reads a recv waits for its send.
TEST(HloCollectives, AMultiSliceStepReducesOverDcnByHostTransfers) {
  const HloProgram h =
      import_hlo(std::string(TPUSIM_SOURCE_DIR) + "/tests/data/compiled/small_2slices.hlo.gz");
  int reduces = 0, gathers = 0;
  int64_t reduced = 0, gathered = 0;
  std::set<int> dcn;
  for (size_t i = 0; i < h.program.items.size(); ++i) {
    const auto* c = std::get_if<Collective>(&h.program.items[i].what);
    if (!c || !c->axis.dcn) continue;
    EXPECT_EQ(c->axis.size, 2);
    dcn.insert(static_cast<int>(i));
    if (c->kind == CollectiveKind::all_reduce) ++reduces, reduced += c->bytes;
    if (c->kind == CollectiveKind::all_gather) ++gathers, gathered += c->bytes;
  }
  EXPECT_EQ(reduces, 3 * 8 + 10);
  EXPECT_EQ(reduced, 3 * 8'396'800 + 41'172'992);
  EXPECT_EQ(gathers, 1);
  EXPECT_EQ(gathered, 2 * 2'097'152);
  bool waited = false;
  for (const ProgramItem& item : h.program.items)
    if (std::holds_alternative<KernelCall>(item.what))
      for (int d : item.deps) waited = waited || dcn.count(d);
  EXPECT_TRUE(waited);
  EXPECT_GT(simulate(load_chip("v5e"), h.program).cycles, 0);
}

// The remat policy's offload as C5 #11's compiled step runs it: one layer's array written into a
// stacked array in pinned host memory (S(5)) by an asynchronous dynamic-update-slice and read
// back by an asynchronous dynamic-slice. Each moves one layer's bytes (1 x 64 x 128 bf16, 16 KiB)
// over the host link, not the stacked array, and what reads the slice waits for it.
TEST(HloCollectives, AnOffloadMovesOneLayerOverTheHostLink) {
  const char* text = R"(HloModule jit_step

ENTRY %main (x: bf16[1,64,128], stack: bf16[4,64,128], i: s32[]) -> bf16[1,64,128] {
  %x = bf16[1,64,128]{2,1,0:T(8,128)(2,1)} parameter(0)
  %stack = bf16[4,64,128]{2,1,0:T(8,128)(2,1)S(5)} parameter(1)
  %i = s32[]{:T(128)} parameter(2)
  %zero = s32[]{:T(128)} constant(0)
  %dus-start = ((bf16[4,64,128]{2,1,0:T(8,128)(2,1)S(5)}, bf16[1,64,128]{2,1,0:T(8,128)(2,1)}, s32[]{:T(128)}, s32[]{:T(128)}, s32[]{:T(128)}), bf16[4,64,128]{2,1,0:T(8,128)(2,1)S(5)}, u32[]{:S(2)}) dynamic-update-slice-start(%stack, %x, %i, %zero, %zero)
  %dus-done = bf16[4,64,128]{2,1,0:T(8,128)(2,1)S(5)} dynamic-update-slice-done(%dus-start)
  %ds-start = ((bf16[4,64,128]{2,1,0:T(8,128)(2,1)S(5)}, s32[]{:T(128)}, s32[]{:T(128)}, s32[]{:T(128)}), bf16[1,64,128]{2,1,0:T(8,128)(2,1)}, u32[]{:S(2)}) dynamic-slice-start(%dus-done, %i, %zero, %zero), dynamic_slice_sizes={1,64,128}
  %ds-done = bf16[1,64,128]{2,1,0:T(8,128)(2,1)} dynamic-slice-done(%ds-start)
  ROOT %y = bf16[1,64,128]{2,1,0:T(8,128)(2,1)} multiply(%ds-done, %x)
}
)";
  const HloProgram h = import_hlo_module(parse_hlo(text, "offload.hlo"), {});
  ASSERT_EQ(h.program.items.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    const auto* c = std::get_if<Collective>(&h.program.items[i].what);
    ASSERT_TRUE(c) << i;
    EXPECT_TRUE(c->axis.host);
    EXPECT_EQ(c->bytes, 64 * 128 * 2);
  }
  EXPECT_EQ(h.program.items[1].deps, std::vector<int>{0});
  EXPECT_TRUE(std::holds_alternative<KernelCall>(h.program.items[2].what));
  EXPECT_EQ(h.program.items[2].deps, std::vector<int>{1});
  // The two transfers one after the other, 16 KiB each over v6e's 32 GB/s, before the multiply.
  const ChipSpec v6e = load_chip("v6e");
  const RunResult r = simulate(v6e, h.program);
  EXPECT_GE(r.cycles, v6e.s_to_cycles(2 * 16384 / 32e9));
}

// A host transfer of a kind the import does not model is one clear error naming it.
TEST(HloCollectives, AnUnknownMegascaleTransferIsRefused) {
  const char* text = R"(HloModule jit_step

ENTRY %main (x: bf16[128,128]) -> token[] {
  %x = bf16[128,128]{1,0} parameter(0)
  %after-all.1 = token[] after-all()
  %send.1 = (bf16[128,128]{1,0}, u32[], token[]) send(%x, %after-all.1), channel_id=1, is_host_transfer=true, frontend_attributes={_xla_host_transfer_rendezvous="r_0",_xla_megascale_target="{1,2}x{0:3}",_xla_megascale_transfer_type="ALL_TO_ALL"}
  ROOT %send-done.1 = token[] send-done(%send.1), channel_id=1, is_host_transfer=true
}
)";
  EXPECT_EQ(testing::error_of([&] { import_hlo_module(parse_hlo(text, "step.hlo"), {}); }),
            "step.hlo:6: 'send.1': megascale transfer 'ALL_TO_ALL' has no model (ALL_REDUCE and "
            "ALL_GATHER have)");
  // Without its rendezvous a send pairs with no recv.
  std::string lone = text;
  const std::string rendezvous = "_xla_host_transfer_rendezvous=\"r_0\",";
  lone.erase(lone.find(rendezvous), rendezvous.size());
  lone.replace(lone.find("ALL_TO_ALL"), 10, "ALL_REDUCE");
  EXPECT_EQ(testing::error_of([&] { import_hlo_module(parse_hlo(lone, "step.hlo"), {}); }),
            "step.hlo:6: 'send.1': a host-transfer send needs its array in a tuple and a "
            "_xla_host_transfer_rendezvous");
}

// A splash attention call the bridge did not export runs as tpusim's splash schedule, sized from
// its q and k operands and the block size its metadata records.
TEST(HloCollectives, ASplashAttentionCallRunsAsTpusimsSplashSchedule) {
  const char* text = R"(HloModule jit_attention

ENTRY %main (q: bf16[2,4,1024,128], k: bf16[2,4,1024,128], v: bf16[2,4,1024,128]) -> bf16[2,4,1024,128] {
  %q = bf16[2,4,1024,128]{3,2,1,0} parameter(0)
  %k = bf16[2,4,1024,128]{3,2,1,0} parameter(1)
  %v = bf16[2,4,1024,128]{3,2,1,0} parameter(2)
  ROOT %splash_mha_fwd_residuals.3 = bf16[2,4,1024,128]{3,2,1,0} custom-call(%q, %k, %v), custom_call_target="tpu_custom_call", frontend_attributes={kernel_metadata={
"xprof_metadata":"{\"block_q\": 256, \"block_kv\": 256}"}}, metadata={op_name="jit(f)/splash_mha_fwd_residuals/pallas_call"}
}
)";
  const HloProgram h = import_hlo_module(parse_hlo(text, "attention.hlo"), {});
  ASSERT_EQ(h.program.items.size(), 1u);
  const auto& kernel = std::get<KernelCall>(h.program.items[0].what).kernel;
  kernels::AttentionShape a;
  a.batch = 2, a.q_heads = 4, a.kv_heads = 4, a.seq = 1024, a.head_dim = 128;
  a.block = a.block_compute = 256;
  const auto expected = kernels::attention_forward(a);
  EXPECT_EQ(kernel->name, expected->name);
  EXPECT_EQ(kernel->grid, expected->grid);
}

}  // namespace
}  // namespace tpusim
