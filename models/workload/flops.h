// MaxText's model FLOP count: calculate_tflops_training_per_device (xla_lowering.md 4.2), in FLOPs
// per device: 3x the forward's weight matmuls, attention and GDN core. It counts causal attention
// at half since mid-2025 and in full before (measured_runs.md C3), so a logged TFLOP/s is
// compared with the count of its time.
#pragma once
#include <cstdint>

#include "models/workload/model_config.h"

namespace tpusim {

enum class AttentionCount { causal, full };
double maxtext_flops_per_device(const ModelConfig& m, int64_t batch_per_chip, int64_t seq,
                                AttentionCount count = AttentionCount::causal);

}  // namespace tpusim
