// `tpusim import maxtext [MODEL.yml] KEY=VALUE ...`: a training run as MaxText users write it (a
// model config of MaxText's configs/models/ and the overrides of its command line) turned into a
// scenario. Keys are MaxText's: base_emb_dim, base_num_query_heads, ... in the model config;
// model_name, per_device_batch_size, max_target_length, remat_policy, ici_*_parallelism,
// dcn_data_parallelism, quantization, weight_dtype, compile_topology (v5e-256: chip and chips;
// v5p-N counts TensorCores, N/2 chips) and compile_topology_num_slices on the command line (MaxText
// 0.2.5's defaults for the sequence, batch and remat policy where it leaves them out). Every
// key tpusim does not model is listed, never dropped silently. A mixture of experts takes
// num_experts, num_experts_per_tok, base_moe_mlp_dim, shared_experts, and from the command line
// sparse_matmul, capacity_factor and ici_expert_parallelism.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "models/workload/step_config.h"

namespace tpusim {

struct MaxTextImport {
  std::string scenario;                   // the scenario's YAML
  std::string model;                      // the model's YAML when a model config was given
  std::vector<std::string> not_modelled;  // "key=value (why)" for each key left out
  std::vector<std::string> defaults;      // MaxText defaults taken for keys the run left out
};

// `model_file`: a MaxText model config, or "" when `model_name=` names a tpusim model.
// `model_path`: how the scenario names the model file it comes with (beside the scenario).
MaxTextImport import_maxtext(const std::string& model_file,
                             const std::vector<std::string>& overrides, const std::string& name,
                             const std::string& model_path);

// The inverse: the MaxText command line (model dims, run, topology and mesh as KEY=VALUE) of a
// step, as `tpusim export maxtext` prints it and `python -m tpusim_jax compile-step` compiles it.
// Throws Error for what MaxText's command line cannot say here (Gated Delta Net layers).
std::vector<std::string> maxtext_command_line(const StepConfig& c);

}  // namespace tpusim
