// The timeline layout shared by the SVG writer and the GUI, on hand-made events: lanes, the
// per-lane window search, merging of sub-pixel events, ruler ticks; and the SVG drawn from it.
#include "app/timeline_layout.h"

#include <gtest/gtest.h>

#include "app/timeline_svg.h"

namespace tpusim {
namespace {

// Units 0 (no events), 1 and 2; events sorted by unit, then start, as the recorder leaves them.
RunResult three_units() {
  RunResult r;
  r.clock_hz = 1e9;
  r.cycles = 1000;
  r.units = {{"tc0.scalar", UnitKind::scalar, 0},
             {"tc0.mxu0", UnitKind::mxu, 0},
             {"hbm", UnitKind::hbm, -1}};
  r.labels = {"busy", "a", "b"};
  auto ev = [](int unit, int64_t s, int64_t e) {
    return TimelineEvent{.start = s, .end = e, .unit = unit, .label = 1};
  };
  // mxu0: four 2-cycle events 1 cycle apart, then a long one; hbm: one event.
  r.events = {ev(1, 0, 2), ev(1, 3, 5), ev(1, 6, 8), ev(1, 9, 11), ev(1, 100, 400), ev(2, 50, 60)};
  return r;
}

TEST(TimelineLayout, LanesSkipUnitsWithoutEvents) {
  const RunResult r = three_units();
  const TimelineLanes l = layout_lanes(r);
  EXPECT_EQ(l.count(), 2);
  EXPECT_EQ(l.lane_of, (std::vector<int>{-1, 0, 1}));
  EXPECT_EQ(l.unit_of, (std::vector<int>{1, 2}));
  EXPECT_EQ(l.events[1].begin, 0u);
  EXPECT_EQ(l.events[1].end, 5u);
  EXPECT_EQ(l.events[1].longest, 300);
}

TEST(TimelineLayout, WindowSearchFindsOnlyEventsThatCanOverlap) {
  const RunResult r = three_units();
  const TimelineLanes l = layout_lanes(r);
  // [200, 300] on mxu0: the long event (starts 100, longest 300) and nothing after it.
  auto [first, last] = lane_events(r, l, 1, 200, 300);
  ASSERT_EQ(last - first, 5);  // everything from start >= 200 - 300 up to start <= 300
  EXPECT_EQ((last - 1)->start, 100);
  std::tie(first, last) = lane_events(r, l, 1, 350, 900);
  EXPECT_EQ(last - first, 1);  // only the long one still reaches past 350
  std::tie(first, last) = lane_events(r, l, 1, 401, 900);
  EXPECT_EQ(last - first, 0);  // it ends at 400
}

TEST(TimelineLayout, SubPixelEventsMergeWithinThreePixels) {
  const RunResult r = three_units();
  const TimelineLanes l = layout_lanes(r);
  std::vector<TimelineBox> boxes;
  // A pixel of 4 cycles: the 2-cycle events are narrow, 1 cycle apart; a box stays under 12.
  for_each_box(r, l, 0, 1000, 4, [&](const TimelineBox& b) { boxes.push_back(b); });
  ASSERT_EQ(boxes.size(), 3u);
  EXPECT_EQ(boxes[0].start, 0);  // events at 0, 3, 6, 9: 9 + 2 - 0 = 11 < 12
  EXPECT_EQ(boxes[0].end, 11);
  EXPECT_EQ(boxes[0].events, 4);
  EXPECT_EQ(boxes[1].start, 100);  // the long event, alone
  EXPECT_EQ(boxes[1].events, 1);
  EXPECT_EQ(boxes[2].lane, 1);  // hbm
  EXPECT_EQ(boxes[2].start, 50);
  // A pixel of 1 cycle: nothing is narrow, nothing merges.
  boxes.clear();
  for_each_box(r, l, 0, 1000, 1, [&](const TimelineBox& b) { boxes.push_back(b); });
  EXPECT_EQ(boxes.size(), 6u);
}

TEST(TimelineLayout, RulerTicksAtARoundStep) {
  const std::vector<double> ticks = ruler_ticks_us(0, 1, 10);  // 0, 0.1, ..., 1
  ASSERT_EQ(ticks.size(), 11u);
  for (size_t i = 0; i < ticks.size(); ++i) EXPECT_NEAR(ticks[i], 0.1 * i, 1e-12);
  EXPECT_EQ(ruler_ticks_us(3, 47, 8), (std::vector<double>{10, 20, 30, 40}));  // 44/8 -> step 10
  // Labels follow the step's unit, with the decimals it needs.
  EXPECT_EQ(ruler_label(0.25, 0.05), "250 ns");
  EXPECT_EQ(ruler_label(0.0005, 0.0005), "0.5 ns");
  EXPECT_EQ(ruler_label(1.5, 0.5), "1.5 us");
  EXPECT_EQ(ruler_label(40, 10), "40 us");
  EXPECT_EQ(ruler_label(1200, 200), "1.2 ms");
  EXPECT_EQ(ruler_label(12000, 2000), "12 ms");
  EXPECT_EQ(ruler_label(2.5e6, 5e5), "2.5 s");
  EXPECT_EQ(ruler_label(-1e-12, 0.1), "0 us");  // not "-0.0 us"
}

TEST(TimelineSvg, DrawsLanesBoxesRulerAndLegend) {
  RunResult r = three_units();
  r.cycles = 100000;  // 100 us over 1280 px: a pixel is 78 cycles
  const std::string svg = timeline_svg(r, {});
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(">tc0.mxu0</text>"), 1u);
  EXPECT_EQ(count(">hbm</text>"), 1u);
  EXPECT_EQ(count(">tc0.scalar</text>"), 0u);  // no events, no lane
  EXPECT_EQ(count("<title>"), 3u);  // the four short mxu events merge; the long one; hbm's
  EXPECT_EQ(count("4 merged events"), 1u);
  EXPECT_EQ(count("text-anchor=\"middle\""), 11u);  // ticks 0, 10, ..., 100 us
  EXPECT_EQ(count("fill=\"#e45756\""), 1u);         // the legend's dma_wait swatch
}

}  // namespace
}  // namespace tpusim
