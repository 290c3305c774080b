"""The GDN layer's query (or key) heads repeated to the value heads and L2-normalised, forward and
backward, as the layer runs it (python/tpusim_jax/gdn_step.py; MaxText's Qwen3-Next): at C1's
shape the compiler writes the repeat as a broadcast into a [T, 16, 2, 128] f32 buffer in VMEM
whose (2, 128) tiles make it far slower than its bytes, and sums the repeats' gradient with a
reduction; the VLIW schedules of both are the test data of the vliw floors (tests/jax/
vliw_floors.sh, tests/data/hlo/qk_repeat).

  .venv/bin/python -m tpusim_jax compile python/examples/gdn_qk_repeat.py:repeat_l2norm_train \
      --topology v5e:2x2 --arg q=1x4096x16x128:bf16 --arg g=1x4096x32x128:bf16 \
      --vliw-floors -o qk_repeat
"""
import jax
import jax.numpy as jnp
from jax import lax

REPEATS = 2  # 32 value heads over 16 key heads


def l2norm(x):
    x32 = x.astype(jnp.float32)
    return (x32 * lax.rsqrt(jnp.sum(x32 * x32, -1, keepdims=True) + 1e-6)).astype(x.dtype)


def repeat_l2norm(q):
    return l2norm(jnp.repeat(q, REPEATS, axis=2))


def repeat_l2norm_train(q, g):
    """The forward and, for the cotangent g, the gradient with respect to q."""
    y, vjp = jax.vjp(repeat_l2norm, q)
    return y, vjp(g)[0]
