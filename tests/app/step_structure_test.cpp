// A step's predicted structure for the trace: C1's hybrid model (every fourth layer full
// attention) laid out layer by layer, forward in order and backward in reverse, adding up to the
// predicted step time.
#include "app/step_structure.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "app/scenario.h"
#include "app/step_report.h"
#include "models/chip_loader.h"

namespace tpusim {
namespace {

TEST(StepStructure, LayersInOrderAddUpToTheStep) {
  const Scenario s = load_scenario((std::filesystem::path(models_dir()).parent_path() /
                                    "scenarios/calibration/c1/c1_ladder.yaml")
                                       .string());
  const StepPrediction p = predict_step(s.step);
  const std::vector<TraceSpan> spans = step_structure(s.step, p);
  ASSERT_FALSE(spans.empty());
  EXPECT_EQ(spans.front().name, "host dispatch");
  EXPECT_EQ(spans.back().name, "optimizer");
  double total = 0, end = 0;
  int forward = 0, backward = 0, recompute = 0;
  std::vector<std::string> order;
  for (const TraceSpan& t : spans) {
    EXPECT_NEAR(t.start_s, end, 1e-12) << t.name;  // end to end
    end = t.start_s + t.duration_s;
    total += t.duration_s;
    if (t.name.ends_with(" fwd") && t.name.starts_with("layer ")) {
      ++forward;
      order.push_back(t.name);
    }
    if (t.name.starts_with("layer ")) {
      backward += t.name.ends_with(" bwd");
      recompute += t.name.ends_with(" recompute");
      if (t.track == "step (predicted)") {  // a layer's compute names its part and pass
        EXPECT_TRUE(t.part == "gdn layer" || t.part == "attention layer") << t.name;
        EXPECT_EQ(t.pass, t.name.ends_with(" fwd")   ? "fwd"
                          : t.name.ends_with(" bwd") ? "bwd"
                                                     : "remat");
      }
    }
  }
  EXPECT_NEAR(total, p.step_time_s, 1e-9 * p.step_time_s);
  EXPECT_EQ(forward, s.step.model.layers);
  EXPECT_EQ(backward, s.step.model.layers);
  EXPECT_EQ(recompute, s.step.model.layers);  // C1 recomputes (remat full)
  EXPECT_EQ(order[0], "layer 0 gdn fwd");
  EXPECT_EQ(order[3], "layer 3 attention fwd");  // full_attention_interval 4
  EXPECT_EQ(order[4], "layer 4 gdn fwd");
}

// Two steps part by part, by hand: each part counts count x (compute + exposed).
TEST(StepStructure, TwoStepsSideBySidePartByPart) {
  StepPrediction a, b;
  a.step_time_s = 10;
  a.parts = {{.name = "gdn layer", .count = 3, .compute_s = 2, .exposed_s = 1},
             {.name = "optimizer", .count = 1, .compute_s = 1}};
  b.step_time_s = 4;
  b.parts = {{.name = "attention layer", .count = 2, .compute_s = 1},
             {.name = "optimizer", .count = 1, .compute_s = 2}};
  const std::vector<StageDifference> d = step_part_difference(a, b);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].stage, "gdn layer");
  EXPECT_DOUBLE_EQ(d[0].first_s, 9);
  EXPECT_DOUBLE_EQ(d[0].first_share, 0.9);
  EXPECT_DOUBLE_EQ(d[0].second_s, 0);
  EXPECT_EQ(d[1].stage, "optimizer");
  EXPECT_DOUBLE_EQ(d[1].delta_s, 1);
  EXPECT_DOUBLE_EQ(d[1].second_share, 0.5);
  EXPECT_EQ(d[2].stage, "attention layer");
  EXPECT_DOUBLE_EQ(d[2].second_s, 2);
  EXPECT_EQ(d[3].stage, "step");
  EXPECT_DOUBLE_EQ(d[3].delta_s, -6);
}

}  // namespace
}  // namespace tpusim
