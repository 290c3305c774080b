#include "models/parallel/mesh.h"

#include <algorithm>

#include "sim/timing/collectives.h"

namespace tpusim {

LocalSizes local_sizes(const ModelConfig& m, const Mesh& mesh, int64_t batch_per_chip,
                       int64_t seq) {
  const int64_t tp = mesh.tensor;
  // MaxText's global batch is per_device_batch x devices, sharded over the data and fsdp axes:
  // each tensor-parallel group works on tp x per-device batch sequences with 1/tp of the heads.
  // Under context parallelism each chip holds 1/context of every sequence.
  const int64_t batch = batch_per_chip * tp, local_seq = seq / mesh.context;
  return {batch * local_seq,
          batch,
          local_seq,
          m.q_heads / tp,
          std::max<int64_t>(1, m.kv_heads / tp),
          m.mlp_dim / tp,
          m.gdn.value_heads / tp,
          std::max<int64_t>(1, m.gdn.key_heads / tp)};
}

MeshAxis slice_axis(const ChipSpec& chip, int64_t chips_per_slice, const Mesh& mesh,
                    const std::string& name, int64_t size, bool tensor_axis) {
  const int dims = torus_dims_spanned(chip, chips_per_slice);
  MeshAxis a{name, size, chips_per_slice >= chip.ici_wraparound_chips, 1, false};
  a.torus_dims = tensor_axis ? 1 : std::max(1, dims - (mesh.tensor > 1 ? 1 : 0));
  return a;
}

}  // namespace tpusim
