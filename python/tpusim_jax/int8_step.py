"""MaxText's `quantization=int8`: the layers' weight matmuls through AQT (the library MaxText
calls), configured as MaxText 0.2.5 configures it (layers/quantizations.py L636-658,
_get_int8_quant_config): aqt_config.config_v3 with int8 forward and input-gradient products
(int32 accumulation, stochastic rounding of the gradient operand from a "jax.uniform" key), and
an int8 weight-gradient product with local AQT (its range found per shard of the contraction axis,
`quantization_local_shard_count` shards) unless that count is 0, which leaves it in bf16.
MaxText passes the projections' DenseGeneral dot_general through AQT (attentions.py, linears.py
`quant=`), not the attention kernel's products nor the logits (nnx_decoders.py L474-485 gives
logits_dense no `quant`)."""
from __future__ import annotations

from tpusim_jax.export import ExportError


def int8_einsum(local_shard_count: int):
    """An einsum(eqn, activations, weight, key) running MaxText's int8 AQT dot_general."""
    import jax.numpy as jnp
    from aqt.jax.v2 import aqt_dot_general
    from aqt.jax.v2 import config as aqt_config

    if local_shard_count < 0:
        # MaxText replaces -1 with jax.local_device_count() of the run's host (configs/types.py
        # L4430-4435), which a compile on this host cannot know.
        raise ExportError("quantization_local_shard_count: set it to the run's local devices "
                          "(MaxText's -1 means jax.local_device_count() on the TPU host)")
    local = local_shard_count != 0
    cfg = aqt_config.config_v3(
        fwd_bits=8, dlhs_bits=8, drhs_bits=8 if local else None, rng_type="jax.uniform",
        dlhs_local_aqt=None,
        drhs_local_aqt=aqt_config.LocalAqt(contraction_axis_shard_count=local_shard_count)
        if local else None,
        fwd_accumulator_dtype=jnp.int32, dlhs_accumulator_dtype=jnp.int32,
        drhs_accumulator_dtype=jnp.int32 if local else None)

    def einsum(eqn, x, w, key):
        dot_general = aqt_config.set_context(cfg, key, train_step=None)
        return aqt_dot_general.einsum(eqn, x, w, dg=dot_general)

    return einsum
