#include "app/plots.h"

#include <fmt/format.h>
#include <plplot/plstream.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

#include "sim/error.h"

namespace tpusim {
namespace {

// PLplot's colour map 0 as the charts use it: 0 background, then axes and text, guides (roofs,
// the diagonal, bands), and one colour per group of points (chips, bounds).
constexpr int kBackground = 0, kAxes = 1, kGuide = 2, kFirstGroup = 3, kGroups = 8;
// Heatmaps with at most this many cells print each cell's value.
constexpr size_t kLabelledCells = 64;
constexpr int kGroupRgb[kGroups][3] = {{31, 119, 180},  {255, 127, 14},  {44, 160, 44},
                                       {214, 39, 40},   {148, 103, 189}, {140, 86, 75},
                                       {227, 119, 194}, {127, 127, 127}};

// A PLplot stream that draws one SVG page into memory.
class SvgPage {
 public:
  SvgPage(int width, int height, int columns = 1, int rows = 1) {
    FILE* file = open_memstream(&buffer_, &size_);
    if (!file) throw Error("cannot open a memory stream for a plot");
    pls_ = std::make_unique<plstream>();
    pls_->sdev("svg");
    pls_->sfile(file);
    pls_->spage(0, 0, width, height, 0, 0);
    pls_->scolbg(255, 255, 255);
    pls_->scol0(kAxes, 0, 0, 0);
    pls_->scol0(kGuide, 150, 150, 150);
    for (int g = 0; g < kGroups; ++g)
      pls_->scol0(kFirstGroup + g, kGroupRgb[g][0], kGroupRgb[g][1], kGroupRgb[g][2]);
    pls_->ssub(columns, rows);
    pls_->init();
  }
  SvgPage(const SvgPage&) = delete;
  SvgPage& operator=(const SvgPage&) = delete;
  ~SvgPage() {
    pls_.reset();  // PLplot closes the stream's file (the memory stream) as it ends
    std::free(buffer_);
  }
  plstream& operator*() { return *pls_; }
  plstream* operator->() { return pls_.get(); }

  std::string finish() {
    pls_.reset();  // ends the page: PLplot writes the rest of the SVG and closes the file
    return std::string(buffer_, size_);
  }

 private:
  std::unique_ptr<plstream> pls_;
  char* buffer_ = nullptr;
  size_t size_ = 0;
};

// A filled diamond of half-widths (dx, dy) in world coordinates.
void marker(plstream& p, double x, double y, double dx, double dy, int colour) {
  p.col0(colour);
  PLFLT xs[4] = {x - dx, x, x + dx, x}, ys[4] = {y, y + dy, y, y - dy};
  p.fill(4, xs, ys);
}

int group_colour(size_t group) { return kFirstGroup + static_cast<int>(group % kGroups); }

// A legend line inside the top-left of the box, in the group's colour.
void legend_line(plstream& p, int line, int colour, const std::string& text) {
  p.col0(colour);
  p.mtex("t", -1.5 - 1.4 * line, 0.02, 0, text.c_str());
}

}  // namespace

std::string validation_svg(const std::vector<ValidationRow>& rows) {
  std::vector<std::string> chips;
  std::map<std::string, int> per_chip;
  double lo = INFINITY, hi = 0;
  int skipped = 0;
  for (const ValidationRow& r : rows) {
    if (r.predicted <= 0 || r.measured <= 0) {
      ++skipped;
      continue;
    }
    if (per_chip[r.chip]++ == 0) chips.push_back(r.chip);
    lo = std::min({lo, r.predicted, r.measured});
    hi = std::max({hi, r.predicted, r.measured});
  }
  if (chips.empty()) throw Error("no validation row with positive values to plot");
  const double x0 = std::floor(std::log10(lo)), x1 = std::ceil(std::log10(hi));
  SvgPage page(900, 800);
  plstream& p = *page;
  p.col0(kAxes);
  p.env(x0, x1, x0, x1, 1, 30);  // both axes logarithmic
  p.lab("measured (each row in its own metric's unit)", "predicted",
        fmt::format("predicted against measured: {} rows", rows.size() - skipped).c_str());
  p.col0(kGuide);
  p.join(x0, x0, x1, x1);
  p.lsty(2);
  for (double band : {1.1, 0.9}) p.join(x0, x0 + std::log10(band), x1, x1 + std::log10(band));
  p.lsty(1);
  const double d = 0.008 * (x1 - x0);
  for (const ValidationRow& r : rows)
    if (r.predicted > 0 && r.measured > 0) {
      const size_t g = std::find(chips.begin(), chips.end(), r.chip) - chips.begin();
      marker(p, std::log10(r.measured), std::log10(r.predicted), d, d, group_colour(g));
    }
  for (size_t g = 0; g < chips.size(); ++g)
    legend_line(p, static_cast<int>(g), group_colour(g),
                fmt::format("{} ({} rows)", chips[g], per_chip[chips[g]]));
  legend_line(
      p, static_cast<int>(chips.size()), kGuide,
      skipped ? fmt::format("dashed: +-10%; {} rows without a positive value not drawn", skipped)
              : std::string("dashed: +-10%"));
  return page.finish();
}

namespace {

const char* const kBounds[] = {"MXU", "VPU", "HBM", "latency", "overhead"};
int bound_colour(const std::string& bound) {
  for (size_t b = 0; b < std::size(kBounds); ++b)
    if (bound == kBounds[b]) return group_colour(b);
  return group_colour(kGroups - 1);  // nothing recorded
}

}  // namespace

std::string roofline_svg(const std::vector<OpProfileRow>& rows, const ChipSpec& chip,
                         const std::string& title) {
  constexpr size_t kNamed = 8;
  const double peak = chip.peak_bf16_flops / 1e12, bandwidth = chip.hbm_effective_bytes_per_s();
  const double ridge = chip.peak_bf16_flops / bandwidth;  // FLOP per byte
  double ai_lo = ridge, ai_hi = ridge, perf_lo = peak;
  std::vector<const OpProfileRow*> placed;
  double unplaced_s = 0;
  for (const OpProfileRow& r : rows) {
    if (r.flops <= 0 || r.hbm_bytes <= 0 || r.time_s <= 0) {
      unplaced_s += r.time_s;
      continue;
    }
    placed.push_back(&r);
    ai_lo = std::min(ai_lo, r.intensity());
    ai_hi = std::max(ai_hi, r.intensity());
    perf_lo = std::min(perf_lo, r.flops_per_s() / 1e12);
  }
  const double x0 = std::floor(std::log10(ai_lo)), x1 = std::ceil(std::log10(ai_hi) + 0.01);
  const double y0 = std::floor(std::log10(perf_lo) - 0.1), y1 = std::ceil(std::log10(peak) + 0.1);
  SvgPage page(1000, 800);
  plstream& p = *page;
  p.adv(0);
  p.vpor(0.1, 0.95, 0.36, 0.92);
  p.wind(x0, x1, y0, y1);
  p.col0(kAxes);
  p.box("bcnstl", 0, 0, "bcnstlv", 0, 0);
  p.lab("arithmetic intensity (FLOP per HBM byte)", "achieved TFLOP/s", title.c_str());
  // The roofs: HBM at the achievable rate up to the ridge, then the bf16 peak.
  p.col0(kGuide);
  const double ridge_x = std::log10(ridge), peak_y = std::log10(peak);
  p.join(x0, x0 + std::log10(bandwidth / 1e12), ridge_x, peak_y);
  p.join(ridge_x, peak_y, x1, peak_y);
  p.ptex(x1, peak_y + 0.04 * (y1 - y0), 1, 0, 1,
         fmt::format("bf16 peak {:.0f} TFLOP/s", peak).c_str());
  p.mtex("t", -1.5, 0.98, 1,
         fmt::format("sloped roof: HBM at {:.0f} GB/s (achievable)", bandwidth / 1e9).c_str());
  const double dx = 0.008 * (x1 - x0), dy = 0.008 * (y1 - y0);
  for (size_t i = 0; i < placed.size(); ++i) {
    const OpProfileRow& r = *placed[i];
    const double x = std::log10(r.intensity()), y = std::log10(r.flops_per_s() / 1e12);
    marker(p, x, y, dx, dy, bound_colour(r.bound));
    if (i < kNamed) {
      p.col0(kAxes);
      p.ptex(x + 1.5 * dx, y, 1, 0, 0, std::to_string(i + 1).c_str());
    }
  }
  for (size_t b = 0; b < std::size(kBounds); ++b)
    legend_line(p, static_cast<int>(b), group_colour(b), kBounds[b]);
  // The numbered ops by name, under the chart.
  p.col0(kAxes);
  p.schr(0, 0.8);
  for (size_t i = 0; i < std::min(kNamed, placed.size()); ++i)
    p.mtex("b", 5.5 + 1.5 * i, 0, 0,
           fmt::format("{}  {} ({:.3g} ms, {:.1f}% of the time, {}-bound)", i + 1, placed[i]->name,
                       placed[i]->time_s * 1e3, 100 * placed[i]->share, placed[i]->bound)
               .c_str());
  if (placed.size() < rows.size())
    p.mtex("b", 5.5 + 1.5 * std::min(kNamed, placed.size()), 0, 0,
           fmt::format("{} ops without FLOPs (copies, elementwise work) are not placed: {:.3g} ms",
                       rows.size() - placed.size(), unplaced_s * 1e3)
               .c_str());
  return page.finish();
}

namespace {

// Each axis's distinct values in the order the points first use them.
std::vector<std::vector<std::string>> axis_values(const Sweep& s) {
  std::vector<std::vector<std::string>> values(s.axes.size());
  for (const SweepPoint& p : s.points)
    for (size_t a = 0; a < s.axes.size(); ++a)
      if (std::find(values[a].begin(), values[a].end(), p.values[a]) == values[a].end())
        values[a].push_back(p.values[a]);
  return values;
}

// Category labels under (side "b") or left of ("lv") a box of `n` unit-wide cells.
void category_labels(plstream& p, const char* side, const std::vector<std::string>& labels) {
  const size_t n = labels.size();
  for (size_t i = 0; i < n; ++i)
    p.mtex(side, side[0] == 'b' ? 1.5 : 0.8, (i + 0.5) / n, side[0] == 'b' ? 0.5 : 1,
           labels[i].c_str());
}

void sweep_line(plstream& p, const Sweep& s, const std::vector<PointResult>& results,
                const SweepMetric& m, size_t axis, const std::vector<std::string>& values) {
  std::vector<double> x, y;
  for (const PointResult& r : results)
    if (r.ok) {
      const std::string& v = s.points[r.index].values[axis];
      x.push_back(std::find(values.begin(), values.end(), v) - values.begin());
      y.push_back(r.metric(s, m.name));
    }
  if (y.empty()) throw Error(fmt::format("sweep {}: no point ran, nothing to plot", s.name));
  double lo = *std::min_element(y.begin(), y.end()), hi = *std::max_element(y.begin(), y.end());
  const double pad = hi > lo ? 0.08 * (hi - lo) : std::max(std::abs(hi) * 0.1, 1e-12);
  p.adv(0);
  p.vpor(0.12, 0.95, 0.15, 0.9);
  p.wind(-0.5, values.size() - 0.5, lo - pad, hi + pad);
  p.col0(kAxes);
  p.box("bc", 0, 0, "bcnstv", 0, 0);
  category_labels(p, "b", values);
  p.lab(s.axes[axis].c_str(), m.name.c_str(), fmt::format("{}: {}", s.name, m.name).c_str());
  p.col0(kGuide);
  p.line(static_cast<int>(x.size()), x.data(), y.data());
  const double dx = 0.01 * values.size(), dy = 0.015 * (hi - lo + 2 * pad);
  for (size_t i = 0; i < x.size(); ++i) marker(p, x[i], y[i], dx, dy, group_colour(0));
}

// One heatmap: the best value of `m` for each pair of values of axes a and b.
void sweep_heatmap(plstream& p, const Sweep& s, const std::vector<PointResult>& results,
                   const SweepMetric& m, size_t a, size_t b,
                   const std::vector<std::vector<std::string>>& values) {
  const size_t na = values[a].size(), nb = values[b].size();
  std::vector<double> best(na * nb, NAN);
  for (const PointResult& r : results) {
    if (!r.ok) continue;
    const SweepPoint& pt = s.points[r.index];
    const size_t i =
        std::find(values[a].begin(), values[a].end(), pt.values[a]) - values[a].begin();
    const size_t j =
        std::find(values[b].begin(), values[b].end(), pt.values[b]) - values[b].begin();
    const double v = r.metric(s, m.name);
    double& cell = best[i * nb + j];
    if (std::isnan(cell) || (m.lower_is_better ? v < cell : v > cell)) cell = v;
  }
  double lo = INFINITY, hi = -INFINITY;
  for (double v : best)
    if (!std::isnan(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  p.adv(0);
  p.vpor(0.2, 0.9, 0.2, 0.85);
  p.wind(-0.5, na - 0.5, -0.5, nb - 0.5);
  for (size_t i = 0; i < na; ++i)
    for (size_t j = 0; j < nb; ++j) {
      const double v = best[i * nb + j];
      if (std::isnan(v)) continue;
      // 0 (dark) is the best value of the panel, 1 (light) the worst.
      const double worse = hi > lo ? (m.lower_is_better ? v - lo : hi - v) / (hi - lo) : 0;
      p.col1(worse);
      PLFLT xs[4] = {i - 0.5, i + 0.5, i + 0.5, i - 0.5},
            ys[4] = {j - 0.5, j - 0.5, j + 0.5, j + 0.5};
      p.fill(4, xs, ys);
      if (na * nb <= kLabelledCells) {
        p.col0(worse < 0.5 ? kBackground : kAxes);
        p.ptex(i, j, 1, 0, 0.5, fmt::format("{:.4g}", v).c_str());
      }
    }
  p.col0(kAxes);
  p.box("bc", 0, 0, "bc", 0, 0);
  category_labels(p, "b", values[a]);
  category_labels(p, "lv", values[b]);
  p.lab(s.axes[a].c_str(), s.axes[b].c_str(),
        std::isinf(lo) ? "no point ran"
                       : fmt::format("best {} (dark) {:.4g} .. {:.4g}", m.name,
                                     m.lower_is_better ? lo : hi, m.lower_is_better ? hi : lo)
                             .c_str());
}

}  // namespace

std::string sweep_svg(const Sweep& s, const std::vector<PointResult>& results,
                      const std::string& metric) {
  const auto found = std::find_if(s.metrics().begin(), s.metrics().end(),
                                  [&](const SweepMetric& m) { return m.name == metric; });
  if (found == s.metrics().end()) {
    std::vector<std::string> names;
    for (const SweepMetric& m : s.metrics()) names.push_back(m.name);
    throw Error(fmt::format("sweep {}: no metric '{}' to plot (its metrics: {})", s.name, metric,
                            fmt::join(names, ", ")));
  }
  const auto values = axis_values(s);
  std::vector<size_t> varying;
  for (size_t a = 0; a < s.axes.size(); ++a)
    if (values[a].size() > 1) varying.push_back(a);
  if (varying.empty())
    throw Error(fmt::format("sweep {}: no axis has two values, nothing to plot", s.name));
  if (varying.size() == 1) {
    SvgPage page(900, 600);
    sweep_line(*page, s, results, *found, varying[0], values[varying[0]]);
    return page.finish();
  }
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t i = 0; i < varying.size(); ++i)
    for (size_t j = i + 1; j < varying.size(); ++j) pairs.emplace_back(varying[i], varying[j]);
  const int columns = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(pairs.size()))));
  const int rows = static_cast<int>((pairs.size() + columns - 1) / columns);
  SvgPage page(360 * columns, 330 * rows, columns, rows);
  plstream& p = *page;
  // Colour map 1: dark blue (the best value) to pale yellow (the worst).
  PLFLT at[2] = {0, 1}, r[2] = {0.05, 1}, g[2] = {0.2, 0.95}, b[2] = {0.45, 0.7};
  p.scmap1l(true, 2, at, r, g, b, nullptr);
  p.schr(0, 0.8);
  for (const auto& [a, b] : pairs) sweep_heatmap(p, s, results, *found, a, b, values);
  return page.finish();
}

}  // namespace tpusim
