#include "app/timeline_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tpusim {
namespace {

const char* cause_colour(Cause c) {
  switch (c) {
    case Cause::busy:
      return "#4c78a8";
    case Cause::dma_wait:
      return "#e45756";
    case Cause::dependency:
      return "#f58518";
    case Cause::mxu_fill_drain:
      return "#eeca3b";
    case Cause::step_overhead:
      return "#9d755d";
    case Cause::loop_overhead:
      return "#bab0ac";
    case Cause::collective:
      return "#b279a2";
    case Cause::dispatch:
      return "#79706e";
    case Cause::idle:
      return "#d8d8d8";
  }
  return "#000";
}

const char* unit_colour(UnitKind k) {
  switch (k) {
    case UnitKind::mxu:
      return "#4c78a8";
    case UnitKind::vpu:
      return "#54a24b";
    case UnitKind::dma:
      return "#f2a65a";
    case UnitKind::hbm:
      return "#8c8c8c";
    case UnitKind::ici:
      return "#b279a2";
    case UnitKind::scalar:
      return "#9d755d";
  }
  return "#000";
}

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else
      o += c;
  }
  return o;
}

}  // namespace

std::string timeline_svg(const RunResult& r, const SvgWindow& w) {
  const double us_per_cycle = 1e6 / r.clock_hz;
  const double total_us = r.cycles * us_per_cycle;
  const double from = w.to_us > w.from_us ? w.from_us : 0;
  const double to = w.to_us > w.from_us ? w.to_us : total_us;
  constexpr int kLabel = 110, kLane = 22, kTop = 30;
  const int plot = w.width_px - kLabel - 10;
  const double px_per_us = plot / (to - from);
  auto x_of = [&](double us) { return kLabel + (us - from) * px_per_us; };

  // Lanes: units that have at least one event, in unit order.
  std::vector<int> lane_of(r.units.size(), -1);
  int lanes = 0;
  for (const TimelineEvent& e : r.events)
    if (lane_of[e.unit] < 0) lane_of[e.unit] = 0;
  for (size_t u = 0; u < r.units.size(); ++u)
    if (lane_of[u] == 0) lane_of[u] = lanes++;
  const int height = kTop + lanes * kLane + 60;

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      w.width_px, height);
  for (size_t u = 0; u < r.units.size(); ++u)
    if (lane_of[u] >= 0) {
      const int y = kTop + lane_of[u] * kLane;
      svg += fmt::format("<text x=\"4\" y=\"{}\">{}</text>\n", y + 15, escape(r.units[u].name));
      svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#eee\"/>\n",
                         kLabel, y + kLane, kLabel + plot, y + kLane);
    }
  // Events, merged per lane while narrower than a pixel and touching the previous one.
  struct Box {
    double x0, x1;
    const char* colour;
    std::string title;
  };
  std::vector<Box> pending(r.units.size(), {0, -1, nullptr, {}});
  auto flush = [&](size_t u) {
    Box& b = pending[u];
    if (b.x1 < b.x0) return;
    const int y = kTop + lane_of[u] * kLane + 3;
    svg += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" "
        "fill=\"{}\"><title>{}</title></rect>\n",
        b.x0, y, std::max(0.6, b.x1 - b.x0), kLane - 6, b.colour, escape(b.title));
    b.x1 = -1;
  };
  for (const TimelineEvent& e : r.events) {
    const double s = e.start * us_per_cycle, t = e.end * us_per_cycle;
    if (t < from || s > to) continue;
    const double x0 = x_of(std::max(s, from)), x1 = x_of(std::min(t, to));
    const char* colour =
        e.cause == Cause::busy ? unit_colour(r.units[e.unit].kind) : cause_colour(e.cause);
    Box& b = pending[e.unit];
    if (b.x1 >= b.x0 && x1 - b.x0 < 1.0 && x0 - b.x1 < 0.5) {
      b.x1 = x1;
      b.title = "merged events";
      continue;
    }
    flush(e.unit);
    std::string title = fmt::format("{} [{:.3f}, {:.3f}] us", r.labels[e.label], s, t);
    if (e.item >= 0) title += " " + r.item_names[e.item];
    b = {x0, x1, colour, title};
  }
  for (size_t u = 0; u < r.units.size(); ++u) flush(u);

  // Ruler: about ten ticks at a round step.
  const double span = to - from;
  double step = std::pow(10.0, std::floor(std::log10(span / 10)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (span / (step * m) <= 10) {
      step *= m;
      break;
    }
  const int ruler = kTop + lanes * kLane + 4;
  for (double t = std::ceil(from / step) * step; t <= to + 1e-9; t += step) {
    svg +=
        fmt::format("<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"#999\"/>\n",
                    x_of(t), ruler, ruler + 5);
    svg += fmt::format("<text x=\"{:.2f}\" y=\"{}\" text-anchor=\"middle\">{:g} us</text>\n",
                       x_of(t), ruler + 17, t);
  }
  // Legend: the stall colours of the scalar lane.
  int lx = kLabel;
  const int ly = ruler + 30;
  for (int c = 1; c < kNumCauses; ++c) {
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" "
        "y=\"{}\">{}</text>\n",
        lx, ly, cause_colour(static_cast<Cause>(c)), lx + 14, ly + 9, name(static_cast<Cause>(c)));
    lx += 120;
  }
  svg += fmt::format(
      "<text x=\"4\" y=\"18\" font-size=\"13\">tpusim {}: {:.3f} us shown of {:.3f} us</text>\n",
      r.chip, to - from, total_us);
  return svg + "</svg>\n";
}

}  // namespace tpusim
