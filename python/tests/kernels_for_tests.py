"""Small Pallas kernels the export tests trace: ones tpusim takes and ones it must refuse."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def squared_index_map(x):
    """A block index of i * i: not affine in the grid index."""
    return pl.pallas_call(
        _copy_kernel,
        grid=(4,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i * i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def work_outside_kernels(x):
    """XLA work and no kernel: one fusion."""
    return jnp.tanh(x) + 1.0


def _sort_kernel(x_ref, o_ref):
    o_ref[...] = jnp.cumsum(x_ref[...], axis=1)


def unsupported_in_body(x):
    return pl.pallas_call(
        _sort_kernel,
        grid=(1,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def _matmul_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def matmul(x, y):
    """A grid of (64, K) @ (K, 128) blocks, f32 results."""
    m, n = x.shape[0], y.shape[1]
    return pl.pallas_call(
        _matmul_kernel,
        grid=(m // 64, n // 128),
        in_specs=[pl.BlockSpec((64, x.shape[1]), lambda i, j: (i, 0)),
                  pl.BlockSpec((y.shape[0], 128), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((64, 128), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
    )(x, y)


def _causal_kernel(s_ref, o_ref):
    """Scores masked causally as attention kernels write it: iotas, a comparison, a select."""
    n = s_ref.shape[0]
    row = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
    col = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
    o_ref[...] = jnp.where(row >= col, s_ref[...], -1e30)


def _whole_array(kernel, s):
    """`kernel` on all of s as one block (a grid of one step)."""
    return pl.pallas_call(
        kernel,
        grid=(1,),
        in_specs=[pl.BlockSpec(s.shape, lambda i: (0, 0))],
        out_specs=pl.BlockSpec(s.shape, lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct(s.shape, s.dtype),
    )(s)


def causal_mask(s):
    return _whole_array(_causal_kernel, s)


def _sibling_kernel(s_ref, o_ref):
    """The ladder's sibling-block mask for b = 2: integer division of iotas."""
    n = s_ref.shape[0]
    i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
    j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
    mask = (i // 4 == j // 4) & (i // 2 != j // 2)
    o_ref[...] = jnp.where(mask, s_ref[...], 0.0)


def sibling_mask(s):
    return _whole_array(_sibling_kernel, s)


def _middle_step_kernel(x_ref, o_ref):
    @pl.when(pl.program_id(0) == 1)
    def _():
        o_ref[...] = x_ref[...]


def when_on_a_middle_step(x):
    """pl.when on grid index 1 of 4: tpusim's ops run always, or at the first or last index."""
    return pl.pallas_call(
        _middle_step_kernel,
        grid=(4,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def dot_tanh(x, y):
    """XLA work only: a bf16 dot and a tanh, which XLA fuses into one output fusion."""
    return jnp.tanh(x @ y)


def add_one(x):
    """One elementwise XLA fusion streaming x from and to HBM (the compiler's stream rate)."""
    return x + 1


def _sum_rows_kernel(x_ref, o_ref):
    # The loop reads one [8, 128] slab of the [4, 8, 128] block per trip (its index a constant
    # once unrolled) and accumulates; the body scales before adding.
    def body(i, acc):
        return acc + x_ref[i] * 2.0

    o_ref[...] = jax.lax.fori_loop(0, 4, body, jnp.zeros((8, 128), jnp.float32))


def fori_sum(x):
    """sum over the leading dim of 2 x, with a fori_loop over it in the kernel body."""
    return pl.pallas_call(
        _sum_rows_kernel,
        grid=(x.shape[0] // 4,),
        in_specs=[pl.BlockSpec((4, 8, 128), lambda i: (i, 0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((x.shape[0] // 4 * 8, 128), jnp.float32),
    )(x)


def _write_slab_kernel(x_ref, o_ref):
    def body(i, carry):
        o_ref[i] = x_ref[i]  # a write into one slab of the block
        return carry

    jax.lax.fori_loop(0, 4, body, 0)


def fori_write(x):
    """A fori_loop writing one slab of its output block per trip (refused for now)."""
    spec = pl.BlockSpec((4, 8, 128), lambda i: (i, 0, 0))
    return pl.pallas_call(_write_slab_kernel, grid=(x.shape[0] // 4,), in_specs=[spec],
                          out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
