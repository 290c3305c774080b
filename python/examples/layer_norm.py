"""A user's Pallas kernel that is not one of tpusim's: a row-tiled layer norm (no bias).

Export and simulate it:
  .venv/bin/python -m tpusim_jax export python/examples/layer_norm.py:layer_norm \
      --arg x=1024x512:bf16 --arg g=1x512:bf16 -o ln.json --check ln.check.json
  build/tpusim kernel import ln.json --check ln.check.json
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_ROWS = 256
EPS = 1e-6


def layer_norm_kernel(x_ref, g_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    mu = jnp.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = jnp.mean(xc * xc, axis=-1, keepdims=True)
    y = xc * jax.lax.rsqrt(var + EPS) * g_ref[...].astype(jnp.float32)
    o_ref[...] = y.astype(o_ref.dtype)


def layer_norm(x, g):
    rows, cols = x.shape
    return pl.pallas_call(
        layer_norm_kernel,
        grid=(rows // BLOCK_ROWS,),
        in_specs=[pl.BlockSpec((BLOCK_ROWS, cols), lambda i: (i, 0)),
                  pl.BlockSpec((1, cols), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((BLOCK_ROWS, cols), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x, g)
