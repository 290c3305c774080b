// The op profile and the charts: the profile's rows against the run they come from (merged ops,
// bounds, CSV and JSON that parse), and every chart as well-formed SVG (read by expat) with one
// marker per row, op or heatmap cell, in its group's colour.
#include "app/plots.h"

#include <expat.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "app/op_profile.h"
#include "kernels/catalog.h"
#include "kernels/gdn/layer.h"
#include "kernels/generic.h"
#include "models/chip_loader.h"
#include "sim/timing/engine.h"

namespace tpusim {
namespace {

// The filled polylines of an SVG (PLplot draws markers and cells that way), by fill colour; the
// SVG must be well-formed XML.
std::map<std::string, int> filled_shapes(const std::string& svg) {
  std::map<std::string, int> fills;
  XML_Parser parser = XML_ParserCreate(nullptr);
  XML_SetUserData(parser, &fills);
  XML_SetStartElementHandler(parser, [](void* data, const XML_Char* name, const XML_Char** attrs) {
    if (std::string(name) != "polyline") return;
    for (int i = 0; attrs[i]; i += 2)
      if (std::string(attrs[i]) == "fill" && std::string(attrs[i + 1]) != "none")
        ++(*static_cast<std::map<std::string, int>*>(data))[attrs[i + 1]];
  });
  const bool ok = XML_Parse(parser, svg.data(), static_cast<int>(svg.size()), 1) == XML_STATUS_OK;
  const std::string error = ok ? "" : XML_ErrorString(XML_GetErrorCode(parser));
  XML_ParserFree(parser);
  EXPECT_TRUE(ok) << error;
  return fills;
}

int total(const std::map<std::string, int>& fills) {
  int n = 0;
  for (const auto& [colour, count] : fills) n += count;
  return n;
}

TEST(OpProfile, OneRowPerOpWithTheRunsTimeAndCounters) {
  const ChipSpec v5e = load_chip("v5e");
  const RunResult r = simulate(
      v5e,
      kernels::gdn::layer_core({.seq = 2048, .heads = 8}, {.build = kernels::gdn::Build::ladder}));
  const std::vector<OpProfileRow> rows = op_profile(r, v5e);
  // The forward kernels and their remat recompute share a name: one row with two calls.
  std::set<std::string> names;
  double time = 0, flops = 0, bytes = 0;
  for (const OpProfileRow& row : rows) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
    time += row.time_s;
    flops += row.flops;
    bytes += row.hbm_bytes;
    EXPECT_NE(row.bound, "-") << row.name;
  }
  EXPECT_LT(rows.size(), r.kernels.size());
  int64_t cycles = 0;
  for (const KernelStats& k : r.kernels) cycles += k.cycles;
  EXPECT_NEAR(time, v5e.cycles_to_s(cycles), 1e-12);
  EXPECT_EQ(flops, static_cast<double>(r.flops));
  EXPECT_EQ(bytes, static_cast<double>(r.hbm_bytes()));
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i - 1].time_s, rows[i].time_s);
  const auto ladder = std::find_if(rows.begin(), rows.end(), [](const OpProfileRow& row) {
    return row.name.find("ladder") != std::string::npos;
  });
  ASSERT_NE(ladder, rows.end());
  EXPECT_EQ(ladder->calls, 2);

  // CSV: a header and one line per row, every line with the header's field count.
  std::istringstream csv(op_profile_csv(rows));
  std::string line;
  std::getline(csv, line);
  const auto fields = [](const std::string& l) { return std::count(l.begin(), l.end(), ',') + 1; };
  const auto header_fields = fields(line);
  size_t lines = 0;
  while (std::getline(csv, line)) {
    EXPECT_EQ(fields(line), header_fields) << line;  // the names have no commas to quote
    ++lines;
  }
  EXPECT_EQ(lines, rows.size());
  const nlohmann::json j = nlohmann::json::parse(op_profile_file("x.json", rows, v5e));
  EXPECT_EQ(j["ops"].size(), rows.size());
  EXPECT_EQ(j["ops"][0]["op"], rows[0].name);
  EXPECT_TRUE(j.contains("tool"));
}

TEST(OpProfile, BoundsFollowWhereTheTimeWent) {
  const ChipSpec v5e = load_chip("v5e");
  // A large square matmul keeps the MXUs busy; scaling an array only streams it through HBM.
  const RunResult mm =
      simulate_kernel(v5e, kernels::pallas_matmul({2048, 2048, 2048, 512, 512, 512}));
  EXPECT_EQ(op_profile(mm, v5e)[0].bound, "MXU");
  const RunResult scale = simulate_kernel(v5e, kernels::elementwise_scale(8192, 1024, 512));
  EXPECT_EQ(op_profile(scale, v5e)[0].bound, "HBM");
}

TEST(Plots, ValidationHasOneMarkerPerRowInItsChipsColour) {
  std::vector<ValidationRow> rows;
  for (int i = 0; i < 7; ++i) rows.push_back({"a", "step_time_s", "", 1.0 + i, 1.1 + i, "v5e"});
  for (int i = 0; i < 3; ++i) rows.push_back({"b", "mfu", "", 0.4, 0.45, "v6e"});
  rows.push_back({"c", "step_time_s", "", 0, 2, "v5p"});  // not drawable on log axes
  const auto fills = filled_shapes(validation_svg(rows));
  EXPECT_EQ(fills.at("#1F77B4"), 7);  // the first chip's colour
  EXPECT_EQ(fills.at("#FF7F0E"), 3);
  EXPECT_EQ(total(fills), 10);
}

TEST(Plots, RooflinePlacesEveryOpWithFlopsInItsBoundsColour) {
  std::vector<OpProfileRow> rows;
  auto row = [&](const char* bound, double flops, double bytes) {
    rows.push_back({"op", "xla", bound, 1, 1e-3, 0.1, flops, bytes});
  };
  row("MXU", 1e11, 1e8);
  row("MXU", 2e11, 1e8);
  row("HBM", 1e9, 1e9);
  row("latency", 1e8, 1e7);
  row("HBM", 0, 1e9);  // no FLOPs: not placed
  const auto fills = filled_shapes(roofline_svg(rows, load_chip("v5e"), "test"));
  EXPECT_EQ(fills.at("#1F77B4"), 2);  // MXU
  EXPECT_EQ(fills.at("#2CA02C"), 1);  // HBM
  EXPECT_EQ(fills.at("#D62728"), 1);  // latency
  EXPECT_EQ(total(fills), 4);
}

std::string repo(const std::string& rel) {
  return (std::filesystem::path(models_dir()).parent_path() / rel).string();
}

TEST(Plots, SweepHeatmapsHaveOneCellPerPairOfValuesThatRan) {
  const Sweep s = load_sweep(repo("scenarios/sweeps/gdn_knobs.yaml"));
  // Made-up results: every fifth point failed.
  std::vector<PointResult> results;
  for (const SweepPoint& p : s.points) {
    PointResult r;
    r.index = p.index;
    r.ok = p.index % 5 != 0;
    r.metrics.assign(s.metrics().size(), 1.0 + p.index);
    results.push_back(r);
  }
  // Expected: for every pair of axes, the pairs of values some successful point has.
  int cells = 0;
  for (size_t a = 0; a < s.axes.size(); ++a)
    for (size_t b = a + 1; b < s.axes.size(); ++b) {
      std::set<std::pair<std::string, std::string>> seen;
      for (const PointResult& r : results)
        if (r.ok) seen.emplace(s.points[r.index].values[a], s.points[r.index].values[b]);
      cells += static_cast<int>(seen.size());
    }
  EXPECT_EQ(total(filled_shapes(sweep_svg(s, results, "step_time_s"))), cells);
  EXPECT_THROW(sweep_svg(s, results, "no_such_metric"), Error);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The pictures in docs/: well-formed, with one marker per row of docs/validation.md (both written
// by `validate --write`) and one per placed op of the GDN layer whose roofline docs/cli.md shows.
TEST(Plots, TheDocsPicturesHoldOnePointPerRowAndOp) {
  const std::string md = slurp(repo("docs/validation.md"));
  int rows = 0;
  std::istringstream lines(md.substr(md.find("| scenario | metric |")));
  std::string line;
  std::getline(lines, line);  // header
  std::getline(lines, line);  // separator
  while (std::getline(lines, line) && line.rfind("| ", 0) == 0) ++rows;
  EXPECT_GT(rows, 40);
  EXPECT_EQ(total(filled_shapes(slurp(repo("docs/img/validation.svg")))), rows)
      << "run `build/tpusim validate --write`";

  const ChipSpec v5e = load_chip("v5e");
  const kernels::CatalogEntry& layer = kernels::find_kernel("gdn-layer");
  const RunResult r = simulate(v5e, layer.program(v5e, layer.defaults()));
  int placed = 0;
  for (const OpProfileRow& row : op_profile(r, v5e)) placed += row.flops > 0 && row.hbm_bytes > 0;
  EXPECT_EQ(total(filled_shapes(slurp(repo("docs/img/roofline_gdn_ladder_v5e.svg")))), placed)
      << "run scripts/docs_images.sh";
}

}  // namespace
}  // namespace tpusim
