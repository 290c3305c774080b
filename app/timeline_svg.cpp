#include "app/timeline_svg.h"

#include <fmt/format.h>

#include <algorithm>

#include "app/timeline_layout.h"

namespace tpusim {
namespace {

constexpr int kLabel = 110, kLane = 22, kTop = 30;

std::string hex(Rgb c) { return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b); }

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

std::string lane_labels(const RunResult& r, const TimelineLanes& lanes, int plot) {
  std::string svg;
  for (int lane = 0; lane < lanes.count(); ++lane) {
    const int y = kTop + lane * kLane;
    svg += fmt::format("<text x=\"4\" y=\"{}\">{}</text>\n", y + 15,
                       escape(r.units[lanes.unit_of[lane]].name));
    svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#eee\"/>\n", kLabel,
                       y + kLane, kLabel + plot, y + kLane);
  }
  return svg;
}

// The stall colours of the scalar lane.
std::string legend(int y) {
  std::string svg;
  int x = kLabel;
  for (int c = 1; c < kNumCauses; ++c) {
    const auto cause = static_cast<Cause>(c);
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" "
        "y=\"{}\">{}</text>\n",
        x, y, hex(cause_colour(cause)), x + 14, y + 9, name(cause));
    x += 120;
  }
  return svg;
}

}  // namespace

std::string timeline_svg(const RunResult& r, const SvgWindow& w) {
  const double us_per_cycle = 1e6 / r.clock_hz;
  const double total_us = r.cycles * us_per_cycle;
  const double from = w.to_us > w.from_us ? w.from_us : 0;
  const double to = w.to_us > w.from_us ? w.to_us : total_us;
  const int plot = w.width_px - kLabel - 10;
  const double px_per_us = plot / (to - from);
  auto x_of = [&](double us) { return kLabel + (us - from) * px_per_us; };
  const TimelineLanes lanes = layout_lanes(r);
  const int height = kTop + lanes.count() * kLane + 60;

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      w.width_px, height);
  svg += lane_labels(r, lanes, plot);
  const auto from_c = static_cast<int64_t>(from / us_per_cycle),
             to_c = static_cast<int64_t>(to / us_per_cycle);
  const int64_t pixel = std::max<int64_t>(1, (to_c - from_c) / std::max(1, plot));
  for_each_box(r, lanes, from_c, to_c, pixel, [&](const TimelineBox& b) {
    const double s = b.start * us_per_cycle, t = b.end * us_per_cycle;
    const double x0 = x_of(std::max(s, from)), x1 = x_of(std::min(t, to));
    const TimelineEvent& e = *b.first;
    std::string title = b.events > 1
                            ? fmt::format("{} merged events", b.events)
                            : fmt::format("{} [{:.3f}, {:.3f}] us", r.labels[e.label], s, t);
    if (b.events == 1 && e.item >= 0) title += " " + r.items[e.item].name;
    svg += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" "
        "fill=\"{}\"><title>{}</title></rect>\n",
        x0, kTop + b.lane * kLane + 3, std::max(0.6, x1 - x0), kLane - 6, hex(event_colour(r, e)),
        escape(title));
  });
  const int ruler = kTop + lanes.count() * kLane + 4;
  const std::vector<double> ticks = ruler_ticks_us(from, to, 10);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : to - from;
  for (double t : ticks) {
    svg +=
        fmt::format("<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"#999\"/>\n",
                    x_of(t), ruler, ruler + 5);
    svg += fmt::format("<text x=\"{:.2f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x_of(t),
                       ruler + 17, ruler_label(t, step));
  }
  svg += legend(ruler + 30);
  svg += fmt::format(
      "<text x=\"4\" y=\"18\" font-size=\"13\">tpusim {}: {:.3f} us shown of {:.3f} us</text>\n",
      r.chip, to - from, total_us);
  return svg + "</svg>\n";
}

}  // namespace tpusim
