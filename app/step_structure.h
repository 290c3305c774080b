// A training step's predicted structure as trace spans (`tpusim run SCENARIO --trace` and the
// GUI's step timeline): host dispatch; every layer's forward in the model's order (a hybrid
// model's full-attention layers where full_attention_interval puts them); the embedding and
// logits; the backward in reverse order, each layer's recompute then its backward; each
// instance's exposed collectives on a track of their own right after its backward; the
// optimizer; the exposed DCN all-reduce. Each span lasts what the step model gives its part per
// instance, laid end to end, so the spans add up to the predicted step time. Where in a layer its
// exposed collectives fall is not modelled: they are drawn after the layer's backward. A span of
// a simulated part names the part and the pass (TraceSpan::part, pass) whose stages in
// one_of_each_part (models/workload/step.h) are its kernels: "gdn layer / remat: ...".
#pragma once
#include <vector>

#include "app/chrome_trace.h"
#include "models/workload/step.h"

namespace tpusim {

std::vector<TraceSpan> step_structure(const StepConfig& c, const StepPrediction& p);

}  // namespace tpusim
