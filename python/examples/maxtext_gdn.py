"""The GDN main path as MaxText writes it: `jax_chunk_gated_delta_rule` (maxtext/models/qwen3.py of
the pinned MaxText 0.2.5 wheel, read at run time: the chunked delta rule with
jax.scipy.linalg.solve_triangular and a lax.scan over chunks), for compiling with libtpu.

  .venv/bin/python -m tpusim_jax compile python/examples/maxtext_gdn.py:main_path_train \
      --topology v5e:2x2 --arg q=1x4096x32x128:bf16 --arg k=1x4096x32x128:bf16 \
      --arg v=1x4096x32x128:bf16 --arg g=1x4096x32:f32 --arg beta=1x4096x32:bf16 -o c1_main
C1's shape: one chip's batch of 1, T 4096, the 32 value heads (query and key heads repeated to
match), head dim 128, chunk 128 (scenarios/calibration/c1/c1_main.yaml).
"""
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from tpusim_jax.maxtext_source import function

CHUNK = 128

# The names the function's body uses; with use_qk_norm_in_gdn False and cp_axis None it calls
# neither l2norm nor gdn_cp, which are left out.
_rule = function("maxtext/models/qwen3.py", "jax_chunk_gated_delta_rule",
                 {"jax": jax, "jnp": jnp, "lax": lax, "Array": Any})


def main_path(q, k, v, g, beta):
    """The layer core's forward: o [B, T, H, Dv]."""
    o, _ = _rule(q, k, v, g, beta, chunk_size=CHUNK)
    return o


def main_path_train(q, k, v, g, beta):
    """Forward and backward as a training step runs them: the gradients of a scalar of o with
    respect to every input (the cotangent of o is o itself, so nothing is constant-folded)."""
    def loss(*args):
        o = main_path(*args).astype(jnp.float32)
        return 0.5 * jnp.sum(o * lax.stop_gradient(o))

    return jax.grad(loss, argnums=(0, 1, 2, 3, 4))(q, k, v, g, beta)
