// Catalog entries of the GDN kernels (kernels/gdn/*.h): the layer core by build, the scan kernels,
// the inversion ladder and their XLA baselines. Head and chunk tiles default to 0, which means
// MaxText's choice (_head_tile: the first of 8, 4, 2 dividing the extent; the build's own tiles
// for a layer).
#include "kernels/catalog_entries.h"
#include "kernels/gdn/invert.h"
#include "kernels/gdn/layer.h"
#include "kernels/gdn/scan.h"
#include "kernels/gdn/xla.h"

namespace tpusim::kernels {
namespace {

namespace g = gdn;

constexpr int64_t kMaxSeq = int64_t{1} << 24;  // beyond the 1M-token runs of the blind set
constexpr int64_t kMaxExtent = 1024;           // batch, heads, head dims, chunk

Knob head_tile(const std::string& name, const std::string& help) {
  return Knob::integer(name, 0, kMaxExtent, 0, help + " (0: MaxText's _head_tile)");
}

Knob tile_n() {
  return Knob::integer("tile-n", 0, kMaxSeq, 0,
                       "chunk tiles per inversion grid cell (0: the first of 8, 4, 2 dividing the "
                       "chunks)");
}

Knob precision() {
  return Knob::choice("precision", {"default", "highest"}, "default", "precision",
                      "the scan's dot precision: DEFAULT (one bf16 pass, as the TPU runs it) or "
                      "HIGHEST (as the functional tests check the algorithm)");
}

Precision precision_of(const KnobValues& v) {
  return v.choice("precision") == "highest" ? Precision::highest : Precision::default_;
}

std::vector<Knob> with_shape(std::vector<Knob> knobs) {
  std::vector<Knob> all = gdn_shape_knobs();
  all.insert(all.end(), knobs.begin(), knobs.end());
  return all;
}

Program one_kernel(std::shared_ptr<const Kernel> k) {
  Program p;
  p.add_kernel(std::move(k));
  return p;
}

}  // namespace

std::vector<Knob> gdn_shape_knobs() {
  const g::GdnShape d;
  return {Knob::integer("batch-per-chip", 1, kMaxExtent, d.batch, "batch per chip B"),
          Knob::integer("seq", 1, kMaxSeq, d.seq, "sequence length T (a multiple of the chunk)"),
          Knob::integer("heads", 1, kMaxExtent, d.heads, "value heads H"),
          Knob::integer("chunk", 1, kMaxExtent, d.chunk, "chunk size C"),
          Knob::integer("dk", 1, kMaxExtent, d.dk, "key head dim"),
          Knob::integer("dv", 1, kMaxExtent, d.dv, "value head dim"),
          Knob::choice("dtype", {"bf16", "f32"}, "bf16", "dtype", "compute dtype")};
}

g::GdnShape gdn_shape_of(const KnobValues& v) {
  g::GdnShape s{.batch = v.integer("batch-per-chip"),
                .seq = v.integer("seq"),
                .heads = v.integer("heads"),
                .dk = v.integer("dk"),
                .dv = v.integer("dv"),
                .chunk = v.integer("chunk"),
                .compute = dtype_of(v.choice("dtype"))};
  s.check();
  return s;
}

CatalogEntry gdn_layer_entry() {
  Knob build = Knob::choice("build", g::build_names(), g::name(g::Build::ladder), "GDN build",
                            "the build of the kernel change (MaxText PR #4348)");
  return {"gdn-layer",
          "one GDN layer core, forward + remat forward + backward, for a build of the kernel "
          "change",
          with_shape({build, head_tile("head-tile-fwd", "heads per scan forward grid cell"),
                      head_tile("head-tile-bwd", "heads per scan backward grid cell"), tile_n()}),
          [](const ChipSpec&, const KnobValues& v) {
            return g::layer_core(gdn_shape_of(v),
                                 {g::parse_build(v.choice("build")), v.integer("head-tile-fwd"),
                                  v.integer("head-tile-bwd"), v.integer("tile-n")});
          }};
}

CatalogEntry gdn_scan_forward_entry() {
  return {"gdn-scan-fwd", "the inter-chunk scan forward kernel",
          with_shape({head_tile("head-tile-fwd", "heads per grid cell"), precision()}),
          [](const ChipSpec&, const KnobValues& v) {
            const g::GdnShape s = gdn_shape_of(v);
            const int64_t th = v.integer("head-tile-fwd");
            return one_kernel(
                g::scan_forward(s, {th > 0 ? th : g::default_tile(s.heads), precision_of(v)}));
          }};
}

CatalogEntry gdn_scan_backward_entry() {
  return {"gdn-scan-bwd", "the inter-chunk scan backward kernel",
          with_shape({head_tile("head-tile-bwd", "heads per grid cell"), precision()}),
          [](const ChipSpec&, const KnobValues& v) {
            const g::GdnShape s = gdn_shape_of(v);
            const int64_t th = v.integer("head-tile-bwd");
            return one_kernel(
                g::scan_backward(s, {th > 0 ? th : g::default_tile(s.heads, 4), precision_of(v)}));
          }};
}

CatalogEntry gdn_lax_scan_entry() {
  return {"gdn-lax-scan", "the XLA baseline: lax.scan over chunks with the state in HBM",
          with_shape({Knob::choice(
              "pass", {"fwd", "remat", "bwd"}, "fwd", "pass",
              "the forward, the forward stacking residuals (remat) or the backward")}),
          [](const ChipSpec&, const KnobValues& v) {
            const g::GdnShape s = gdn_shape_of(v);
            const std::string& pass = v.choice("pass");
            return pass == "bwd" ? g::xla_lax_scan_backward(s)
                                 : g::xla_lax_scan_forward(s, pass == "remat");
          }};
}

CatalogEntry gdn_invert_entry() {
  return {"gdn-invert", "the triangular inversion ladder kernel", with_shape({tile_n()}),
          [](const ChipSpec&, const KnobValues& v) {
            const g::GdnShape s = gdn_shape_of(v);
            const int64_t tn = v.integer("tile-n");
            return one_kernel(g::invert_ladder(s, tn > 0 ? tn : g::default_tile(s.chunks())));
          }};
}

CatalogEntry gdn_solve_triangular_entry() {
  return {"gdn-solve-triangular", "the XLA baseline: solve_triangular's row-sequential loop",
          gdn_shape_knobs(), [](const ChipSpec&, const KnobValues& v) {
            return g::xla_solve_triangular(gdn_shape_of(v));
          }};
}

}  // namespace tpusim::kernels
