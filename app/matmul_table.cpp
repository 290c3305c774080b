#include "app/matmul_table.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <cmath>
#include <filesystem>

#include "kernels/generic.h"
#include "models/chip_loader.h"
#include "models/yaml_map.h"
#include "sim/timing/engine.h"

namespace tpusim {

MatmulTable load_matmul_table(const std::string& file) {
  const YamlMap top(file, yaml_load_file(file), "", {"source", "chip", "rows"});
  MatmulTable t;
  t.file = file;
  t.source = top.string("source");
  t.chip = top.string("chip");
  for (const YamlMap& r : top.list("rows", {"kernel", "size", "bm", "bk", "bn", "measured_s"})) {
    MatmulRow row;
    row.kernel = r.choice("kernel", {"pallas", "xla"});
    row.size = r.positive("size");
    if (row.kernel == "pallas") {
      row.bm = r.positive("bm");
      row.bk = r.positive("bk");
      row.bn = r.positive("bn");
    }
    if (r.has("measured_s")) row.measured_s = r.positive_number("measured_s");
    t.rows.push_back(row);
  }
  return t;
}

void predict(const ChipSpec& chip, MatmulTable& table) {
  for (MatmulRow& row : table.rows) {
    const auto k =
        row.kernel == "pallas"
            ? kernels::pallas_matmul({row.size, row.size, row.size, row.bm, row.bk, row.bn})
            : kernels::xla_dot(chip, row.size, row.size, row.size);
    row.predicted_s = simulate_kernel(chip, k).time_s;
  }
}

ChipSpec with_constants(ChipSpec chip, const CalibratedConstants& c) {
  chip.grid_step_overhead_cycles = c.grid_step_overhead_cycles;
  chip.dma_latency_cycles = c.dma_latency_cycles;
  chip.host_dispatch_s = c.host_dispatch_s;
  return chip;
}

namespace {

// Parameters in natural units: cycles, cycles, microseconds; clamped to be non-negative.
using Point = std::array<double, 3>;

CalibratedConstants to_constants(const Point& p) {
  CalibratedConstants c;
  c.grid_step_overhead_cycles = std::llround(std::max(0.0, p[0]));
  c.dma_latency_cycles = std::llround(std::max(0.0, p[1]));
  c.host_dispatch_s = std::round(std::max(0.0, p[2]) * 1000) / 1e9;  // whole nanoseconds
  return c;
}

}  // namespace

CalibratedConstants fit_constants(const ChipSpec& chip, const MatmulTable& table) {
  int evaluations = 0;
  auto cost = [&](const Point& p) {
    ++evaluations;
    MatmulTable t = table;
    predict(with_constants(chip, to_constants(p)), t);
    double sum = 0;
    int n = 0;
    for (const MatmulRow& r : t.rows)
      if (r.measured_s) {
        const double e = std::log(r.predicted_s / *r.measured_s);
        sum += e * e;
        ++n;
      }
    return sum / n;
  };
  // Nelder-Mead with the standard coefficients from a fixed simplex.
  std::array<Point, 4> s = {Point{500, 1000, 100}, Point{1000, 1000, 100}, Point{500, 2000, 100},
                            Point{500, 1000, 150}};
  std::array<double, 4> f;
  for (int i = 0; i < 4; ++i) f[i] = cost(s[i]);
  for (int iter = 0; iter < 300; ++iter) {
    std::array<int, 4> o = {0, 1, 2, 3};
    std::sort(o.begin(), o.end(), [&](int a, int b) { return f[a] < f[b]; });
    const int best = o[0], worst = o[3], second = o[2];
    if (f[worst] - f[best] < 1e-12) break;
    Point centroid{};
    for (int i = 0; i < 3; ++i)
      for (int d = 0; d < 3; ++d) centroid[d] += s[o[i]][d] / 3;
    auto along = [&](double t) {
      Point p;
      for (int d = 0; d < 3; ++d) p[d] = centroid[d] + t * (s[worst][d] - centroid[d]);
      return p;
    };
    const Point xr = along(-1);
    const double fr = cost(xr);
    if (fr < f[best]) {
      const Point xe = along(-2);
      const double fe = cost(xe);
      if (fe < fr)
        s[worst] = xe, f[worst] = fe;
      else
        s[worst] = xr, f[worst] = fr;
    } else if (fr < f[second]) {
      s[worst] = xr, f[worst] = fr;
    } else {
      const Point xc = along(0.5);
      const double fc = cost(xc);
      if (fc < f[worst]) {
        s[worst] = xc, f[worst] = fc;
      } else {
        for (int i = 1; i < 4; ++i) {
          for (int d = 0; d < 3; ++d) s[o[i]][d] = s[best][d] + 0.5 * (s[o[i]][d] - s[best][d]);
          f[o[i]] = cost(s[o[i]]);
        }
      }
    }
  }
  int best = 0;
  for (int i = 1; i < 4; ++i)
    if (f[i] < f[best]) best = i;
  CalibratedConstants c = to_constants(s[best]);
  c.rms_log_error = std::sqrt(cost(s[best]));
  c.evaluations = evaluations;
  return c;
}

namespace {
std::string table_markdown(const MatmulTable& t) {
  std::string out = "| kernel | m=k=n | blocks (bm,bk,bn) | measured | predicted | error |\n";
  out += "|---|---|---|---|---|---|\n";
  for (const MatmulRow& r : t.rows) {
    const std::string blocks =
        r.kernel == "pallas" ? fmt::format("{},{},{}", r.bm, r.bk, r.bn) : "XLA's choice";
    out += fmt::format("| {} | {} | {} | {} | {:.4f} ms | {} |\n", r.kernel, r.size, blocks,
                       r.measured_s ? fmt::format("{:.4f} ms", *r.measured_s * 1e3) : "withheld",
                       r.predicted_s * 1e3,
                       r.measured_s ? fmt::format("{:+.1f}%", r.error_pct()) : "-");
  }
  return out;
}
}  // namespace

std::string calibration_markdown(const ChipSpec& chip, const CalibratedConstants& c,
                                 const MatmulTable& cal, const MatmulTable& blind) {
  std::string out;
  out += "# Calibration\n\n";
  out += "<!-- Generated by `build/tpusim calibrate --write`; do not edit by hand. -->\n\n";
  out +=
      "tpusim's predictions come from the chip specs (`models/chips/*.yaml`, every value with its\n"
      "source), the kernel schedules, and a few constants fitted to public measurements. This "
      "page\n"
      "lists each fitted constant, the data it was fitted on, and predicted against measured for\n"
      "every row of that data. `tests/app/calibration_test.cpp` re-runs the fit and checks that "
      "it\n"
      "reproduces the values recorded in `models/chips/shared.yaml` and `v6e.yaml`.\n\n";
  out += "## Engine constants, fitted on the v5e Pallas matmul table\n\n";
  out += fmt::format("Data: `{}` ({}).\n\n", repo_relative(cal.file), cal.source);
  out +=
      "Fit: Nelder-Mead on the mean squared log error of predicted against measured time over all\n"
      "rows, from a fixed starting simplex (deterministic). The timings come from `timeit` around "
      "a\n"
      "jitted call, so they include the host dispatch of one program.\n\n";
  out += "| constant | fitted value | meaning |\n|---|---|---|\n";
  out += fmt::format(
      "| `grid_step_overhead_cycles` | {} ({:.3f} us on v5e) | scalar work between two grid steps: "
      "index maps, DMA issue, semaphore waits |\n",
      c.grid_step_overhead_cycles, chip.cycles_to_s(c.grid_step_overhead_cycles) * 1e6);
  out += fmt::format(
      "| `dma_latency_cycles` | {} ({:.3f} us on v5e) | from a DMA's issue until HBM starts "
      "serving it |\n",
      c.dma_latency_cycles, chip.cycles_to_s(c.dma_latency_cycles) * 1e6);
  out += fmt::format(
      "| `host_dispatch_s` | {:.3f} us | host dispatch of one jitted program (paid once per "
      "program) |\n\n",
      c.host_dispatch_s * 1e6);
  out += fmt::format("RMS log error {:.4f} after {} evaluations of the table.\n\n", c.rms_log_error,
                     c.evaluations);
  out +=
      "The table cannot tell the grid-step overhead from the MXU fill/drain latency (both are paid "
      "once\nper dependent step of a block chain; the fit is equally good over a range of the "
      "pair). The\nfill/drain latency is fixed by C1's head-batching saving (below), and the fits "
      "repeat until\nboth settle.\n\n";
  out +=
      "The constants are shared by v6e and v5p (in cycles, for the two on-chip ones): no public\n"
      "micro-benchmark of those chips is in the calibration set.\n\n";
  out += table_markdown(cal);
  out += "\n## Blind configuration B4 (predictions only)\n\n";
  out += fmt::format("`{}`: measured results are withheld and judge the model.\n\n",
                     repo_relative(blind.file));
  out += table_markdown(blind);
  return out;
}

std::vector<CalibratedValue> calibrated_values(const CalibratedConstants& c,
                                               const MatmulTable& cal) {
  const std::string how = fmt::format(
      "fitted by `tpusim calibrate` on {} ({} rows, v5e Pallas and XLA matmul timings, "
      "tpu_hardware.md section 3); RMS log error {:.4f}",
      std::filesystem::path(cal.file).filename().string(), cal.rows.size(), c.rms_log_error);
  return {
      {"grid_step_overhead_cycles", static_cast<double>(c.grid_step_overhead_cycles), true, how},
      {"dma_latency_cycles", static_cast<double>(c.dma_latency_cycles), true, how},
      {"host_dispatch_s", c.host_dispatch_s, false, how}};
}

}  // namespace tpusim
