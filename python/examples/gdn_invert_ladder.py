"""The GDN triangular inversion ladder as a Pallas TPU kernel, written in this project from
gdn_kernels.md stage 3 (MaxText PR #4348's `gdn_invert_unit_lower`; its code is not copied here).

A = (I + S)^-1 for S strictly lower triangular, per [C, C] chunk tile of a [B, N, H, C, C] f32
array: X starts at I; for b = 1, 2, ..., C/2, X <- X - X (S_b X), S_b being S on the off-diagonal
b x b blocks of each 2b x 2b diagonal block; every product is a manual bf16x3 (hi*hi + hi*lo +
lo*hi, f32 accumulation), batched over the tile_n chunk tiles of a grid cell (grid (B, H, N /
tile_n), all parallel).

  .venv/bin/python -m tpusim_jax export python/examples/gdn_invert_ladder.py:invert_ladder \
      --arg S=1x32x32x128x128:f32 -o ladder.json
  build/tpusim kernel import ladder.json      # against: build/tpusim kernel gdn-invert
With `--check ladder.check.json --inputs python/examples/gdn_invert_ladder.py:strictly_lower`
the functional check runs on inputs that meet the kernel's precondition.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# [t, m, k] x [t, k, n] -> [t, m, n]
_BATCHED = (((2,), (1,)), ((0,), (0,)))


def _dot_bf16x3(a, b):
    """a @ b to about f32 accuracy from three bf16 MXU passes (Mosaic has no HIGH precision)."""
    a_hi = a.astype(jnp.bfloat16)
    a_lo = (a - a_hi.astype(jnp.float32)).astype(jnp.bfloat16)
    b_hi = b.astype(jnp.bfloat16)
    b_lo = (b - b_hi.astype(jnp.float32)).astype(jnp.bfloat16)

    def dot(x, y):
        return jax.lax.dot_general(x, y, _BATCHED, preferred_element_type=jnp.float32)

    return dot(a_hi, b_hi) + dot(a_hi, b_lo) + dot(a_lo, b_hi)


def _ladder_kernel(s_ref, a_ref):
    tile_n, c = s_ref.shape[1], s_ref.shape[3]
    s = s_ref[...].reshape(tile_n, c, c)
    row = jax.lax.broadcasted_iota(jnp.int32, (tile_n, c, c), 1)
    col = jax.lax.broadcasted_iota(jnp.int32, (tile_n, c, c), 2)
    x = jnp.where(row == col, 1.0, 0.0)
    b = 1
    while b < c:
        sibling = (row // (2 * b) == col // (2 * b)) & (row // b != col // b)
        s_b = jnp.where(sibling, s, 0.0)
        x = x - _dot_bf16x3(x, _dot_bf16x3(s_b, x))
        b *= 2
    a_ref[...] = x.reshape(a_ref.shape)


def default_tile(n: int) -> int:
    """MaxText's choice: the first of 8, 4, 2 dividing the chunks, else 1."""
    return next((t for t in (8, 4, 2) if n % t == 0), 1)


def invert_ladder(s, tile_n=None):
    """(I + S)^-1 for every [C, C] tile of S [B, N, H, C, C] f32 (S strictly lower)."""
    batch, n, heads, c, _ = s.shape
    tile_n = tile_n or default_tile(n)
    spec = pl.BlockSpec((1, tile_n, 1, c, c), lambda b, h, i: (b, i, h, 0, 0))
    return pl.pallas_call(
        _ladder_kernel,
        grid=(batch, heads, n // tile_n),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(s.shape, jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",) * 3),
        name="gdn_invert_unit_lower",
    )(s)


def strictly_lower(key, shapes):
    """Check inputs: S strictly lower triangular, entries N(0, 0.1^2), as the ladder requires."""
    (s,) = shapes
    return [jnp.tril(jax.random.normal(key, s.shape, jnp.float32) * 0.1, k=-1)]


@jax.custom_vjp
def invert_unit_lower(s):
    """The ladder with its VJP as gdn_kernels.md stage 3/3' gives it (MaxText's custom_vjp):
    forward the Pallas ladder, backward dS = -tril(A^T (dA A^T), -1) in XLA, two f32 products at
    HIGHEST."""
    return invert_ladder(s)


def _invert_fwd(s):
    a = invert_ladder(s)
    return a, a


def _invert_bwd(a, da):
    highest = jax.lax.Precision.HIGHEST
    at = a.swapaxes(-1, -2)
    ds = -jnp.matmul(at, jnp.matmul(da, at, precision=highest), precision=highest)
    return (jnp.tril(ds, k=-1),)


invert_unit_lower.defvjp(_invert_fwd, _invert_bwd)


def invert_unit_lower_grad(s, w):
    """The gradient with respect to S of sum(A * w), A = invert_unit_lower(S): the VJP's work,
    for `python -m tpusim_jax compile` (XLA) after the forward's Pallas kernel."""
    return jax.grad(lambda x: jnp.sum(invert_unit_lower(x) * w))(s)
