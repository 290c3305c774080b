"""The GDN inter-chunk scan as a Pallas TPU kernel, written in this project from gdn_kernels.md
stage 5 (MaxText PR #4348's `gdn_scan_fwd`; its code is not copied here).

Grid (B, H / th, N), semantics (parallel, parallel, arbitrary): the chunk axis is innermost and
sequential, and the recurrent state h [th, Dk, Dv] f32 stays in a VMEM scratch for the whole walk.
Per grid step, batched over the th heads of the tile (every product casts its operands to the
compute dtype, q's: bf16 in training, and accumulates in f32):
  h_saved[n] = h;  o = (q e^g) h + (q k^T * decay) v_new  with  v_new = u - w h;
  h <- e^{g_last} h + (k e^{g_last - g})^T v_new.
The inter-chunk output and v' = w h come from one merged product [q e^g; w] h.

  .venv/bin/python -m tpusim_jax export python/examples/gdn_scan.py:scan_fwd \
      --arg w=1x32x32x128x128:bf16 --arg u=1x32x32x128x128:bf16 --arg q=1x32x32x128x128:bf16 \
      --arg k=1x32x32x128x128:bf16 --arg g=1x32x32x128x1:f32 --arg h0=1x32x128x128:f32 -o scan.json
  build/tpusim kernel import scan.json       # against: build/tpusim kernel gdn-scan
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

# dot_general dimension numbers over [th, ...] operands, batch dim 0
_NN = (((2,), (1,)), ((0,), (0,)))  # [t, m, k] x [t, k, n]
_NT = (((2,), (2,)), ((0,), (0,)))  # [t, m, k] x [t, n, k]
_TN = (((1,), (1,)), ((0,), (0,)))  # [t, k, m] x [t, k, n]


def _bdot(a, b, dims, dtype):
    """A batched product with operands cast to the compute dtype (bf16 in training: one MXU
    pass) and f32 accumulation."""
    return jax.lax.dot_general(a.astype(dtype), b.astype(dtype), dims,
                               preferred_element_type=jnp.float32)


def head_tile(heads: int, max_tile: int = 8) -> int:
    """MaxText's _head_tile: the first of (8, 4, 2) not above max_tile dividing the heads, else 1."""
    return next((t for t in (8, 4, 2) if t <= max_tile and 1 < t <= heads and heads % t == 0), 1)


def _decay(g):
    """exp(g_i - g_j) on and below the diagonal, 0 above, for g [th, C, 1]."""
    th, c, _ = g.shape
    row = jax.lax.broadcasted_iota(jnp.int32, (th, c, c), 1)
    col = jax.lax.broadcasted_iota(jnp.int32, (th, c, c), 2)
    lower = row >= col
    diff = g - g.reshape(th, 1, c)
    return jnp.where(lower, jnp.exp(jnp.where(lower, diff, 0.0)), 0.0)


def _scan_fwd_kernel(w_ref, u_ref, q_ref, k_ref, g_ref, h0_ref, o_ref, h_saved_ref, h_final_ref,
                     h_ref):
    n = pl.program_id(2)

    @pl.when(n == 0)
    def _():
        h_ref[...] = h0_ref[0]

    h = h_ref[...]
    h_saved_ref[0, 0] = h
    w, u, q, k, g = (r[0, 0] for r in (w_ref, u_ref, q_ref, k_ref, g_ref))
    c = q.shape[1]
    q_g = q.astype(jnp.float32) * jnp.exp(g)
    merged = _bdot(jnp.concatenate([q_g, w.astype(jnp.float32)], axis=1), h, _NN, q.dtype)
    o_inter, v_prime = merged[:, :c], merged[:, c:]
    v_new = u.astype(jnp.float32) - v_prime
    s = _bdot(q, k, _NT, q.dtype) * _decay(g)
    o_ref[0, 0] = (o_inter + _bdot(s, v_new, _NN, q.dtype)).astype(o_ref.dtype)
    g_last = g[:, c - 1:, :]
    kd = k.astype(jnp.float32) * jnp.exp(g_last - g)
    h_new = jnp.exp(g_last) * h + _bdot(kd, v_new, _TN, q.dtype)
    h_ref[...] = h_new

    @pl.when(n == pl.num_programs(2) - 1)
    def _():
        h_final_ref[0] = h_new


@functools.partial(jax.jit, static_argnames=("th",))
def scan_fwd(w, u, q, k, g, h0, th=None):
    """o [B,N,H,C,Dv] (q's dtype), h_saved [B,N,H,Dk,Dv] f32 (the state entering each chunk) and
    h_final [B,H,Dk,Dv] f32 from w, q, k [B,N,H,C,Dk], u [B,N,H,C,Dv], g [B,N,H,C,1] f32 (the
    within-chunk cumulative gate) and h0 [B,H,Dk,Dv] f32."""
    batch, chunks, heads, c, dk = k.shape
    dv = u.shape[-1]
    th = th or head_tile(heads)

    def per_chunk(d):
        return pl.BlockSpec((1, 1, th, c, d), lambda b, h, n: (b, n, h, 0, 0))

    def per_head(shape):
        return pl.BlockSpec((1, th) + shape, lambda b, h, n: (b, h, 0, 0))

    return pl.pallas_call(
        _scan_fwd_kernel,
        grid=(batch, heads // th, chunks),
        in_specs=[per_chunk(dk), per_chunk(dv), per_chunk(dk), per_chunk(dk), per_chunk(1),
                  per_head((dk, dv))],
        out_specs=[per_chunk(dv), pl.BlockSpec((1, 1, th, dk, dv),
                                               lambda b, h, n: (b, n, h, 0, 0)),
                   per_head((dk, dv))],
        out_shape=[jax.ShapeDtypeStruct((batch, chunks, heads, c, dv), q.dtype),
                   jax.ShapeDtypeStruct((batch, chunks, heads, dk, dv), jnp.float32),
                   jax.ShapeDtypeStruct((batch, heads, dk, dv), jnp.float32)],
        scratch_shapes=[pltpu.VMEM((th, dk, dv), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
        name="gdn_scan_fwd",
    )(w, u, q, k, g, h0)


def _scan_bwd_kernel(w_ref, u_ref, q_ref, k_ref, g_ref, h_ref, do_ref, dh_final_ref, dw_ref,
                     du_ref, dq_ref, dk_ref, dg_ref, dh0_ref, dh_ref):
    """One chunk of the reverse walk (grid step n is chunk N - 1 - n): recompute the chunk's
    forward from h_saved, then carry the state's cotangent dh back through it."""
    n = pl.program_id(2)

    @pl.when(n == 0)
    def _():
        dh_ref[...] = dh_final_ref[0]

    dh_next = dh_ref[...]
    w, u, q, k, g, h, d_o = (r[0, 0] for r in (w_ref, u_ref, q_ref, k_ref, g_ref, h_ref, do_ref))
    dt = q.dtype
    th, c, _ = q.shape
    f32 = jnp.float32
    q, k, w, u, d_o = (x.astype(f32) for x in (q, k, w, u, d_o))
    e = jnp.exp(g)
    q_g = q * e
    v_new = u - _bdot(w, h, _NN, dt)
    decay = _decay(g)
    p = _bdot(q, k, _NT, dt)
    s = p * decay
    g_last = g[:, c - 1:, :]
    gamma = jnp.exp(g_last)
    dvec = jnp.exp(g_last - g)
    kd = k * dvec
    # through h' = gamma h + kd^T v_new
    d_gamma = jnp.sum(h * dh_next, axis=(1, 2), keepdims=True)
    dkd = _bdot(v_new, dh_next, _NT, dt)
    dv_new = _bdot(kd, dh_next, _NN, dt)
    dh = gamma * dh_next
    dk = dkd * dvec
    ddvec = jnp.sum(dkd * k, axis=2, keepdims=True)
    # through o = q_g h + s v_new
    row = jax.lax.broadcasted_iota(jnp.int32, (th, c, c), 1)
    col = jax.lax.broadcasted_iota(jnp.int32, (th, c, c), 2)
    ds = jnp.where(row >= col, _bdot(d_o, v_new, _NT, dt), 0.0)
    dv_new = dv_new + _bdot(s, d_o, _TN, dt)
    dp = ds * decay
    d_decay = ds * p * decay
    dq = _bdot(dp, k, _NN, dt)
    dk = dk + _bdot(dp, q, _TN, dt)
    dg = (jnp.sum(d_decay, axis=2, keepdims=True)
          - jnp.sum(d_decay, axis=1, keepdims=True).reshape(th, c, 1))
    dq_g = _bdot(d_o, h, _NT, dt)
    dh = dh + _bdot(q_g, d_o, _TN, dt)
    # through v_new = u - w h
    dw = -_bdot(dv_new, h, _NT, dt)
    dh = dh - _bdot(w, dv_new, _TN, dt)
    # through q_g = q e^g and the chunk-end decays
    dq = dq + dq_g * e
    dg = dg + jnp.sum(dq_g * q, axis=2, keepdims=True) * e - ddvec * dvec
    last_row = jax.lax.broadcasted_iota(jnp.int32, (th, c, 1), 1) == c - 1
    end = jnp.sum(ddvec * dvec, axis=1, keepdims=True) + d_gamma * gamma
    dg = dg + jnp.where(last_row, end, 0.0)
    for ref, x in ((dw_ref, dw), (du_ref, dv_new), (dq_ref, dq), (dk_ref, dk), (dg_ref, dg)):
        ref[0, 0] = x
    dh_ref[...] = dh

    @pl.when(n == pl.num_programs(2) - 1)
    def _():
        dh0_ref[0] = dh


@functools.partial(jax.jit, static_argnames=("th",))
def scan_bwd(w, u, q, k, g, h_saved, d_o, dh_final, th=None):
    """The cotangents dw, du, dq, dk [B,N,H,C,D], dg [B,N,H,C,1] and dh0 [B,H,Dk,Dv], all f32,
    of scan_fwd's inputs, from its residuals (h_saved) and the cotangents of o and h_final.
    MaxText's head tile for this kernel is at most 4 (14 resident blocks overflow 16 MiB at 8)."""
    batch, chunks, heads, c, dk = k.shape
    dv = u.shape[-1]
    th = th or head_tile(heads, max_tile=4)

    def rev(d0, d1):
        return pl.BlockSpec((1, 1, th, d0, d1), lambda b, h, n: (b, chunks - 1 - n, h, 0, 0))

    state = pl.BlockSpec((1, th, dk, dv), lambda b, h, n: (b, h, 0, 0))
    f32 = jnp.float32

    def per_chunk(d):
        return jax.ShapeDtypeStruct((batch, chunks, heads, c, d), f32)

    return pl.pallas_call(
        _scan_bwd_kernel,
        grid=(batch, heads // th, chunks),
        in_specs=[rev(c, dk), rev(c, dv), rev(c, dk), rev(c, dk), rev(c, 1), rev(dk, dv),
                  rev(c, dv), state],
        out_specs=[rev(c, dk), rev(c, dv), rev(c, dk), rev(c, dk), rev(c, 1), state],
        out_shape=[per_chunk(dk), per_chunk(dv), per_chunk(dk), per_chunk(dk), per_chunk(1),
                   jax.ShapeDtypeStruct((batch, heads, dk, dv), f32)],
        scratch_shapes=[pltpu.VMEM((th, dk, dv), f32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
        name="gdn_scan_bwd",
    )(w, u, q, k, g, h_saved, d_o, dh_final)


def scan_reference(w, u, q, k, g, h0):
    """scan_fwd's o and h_final in plain jnp (f32), one lax.scan step per chunk: what the
    backward kernel is checked against through jax.vjp."""
    c = q.shape[3]
    lower = jnp.tril(jnp.ones((c, c), bool))

    def step(h, x):
        w, u, q, k, g = x  # [B, H, C, D], g [B, H, C, 1]
        v_new = u - w @ h
        decay = jnp.where(lower, jnp.exp(jnp.where(lower, g - g.swapaxes(-1, -2), 0.0)), 0.0)
        o = (q * jnp.exp(g)) @ h + ((q @ k.swapaxes(-1, -2)) * decay) @ v_new
        g_last = g[..., -1:, :]
        h = jnp.exp(g_last) * h + (k * jnp.exp(g_last - g)).swapaxes(-1, -2) @ v_new
        return h, o

    xs = tuple(x.astype(jnp.float32).swapaxes(0, 1) for x in (w, u, q, k, g))
    h, o = jax.lax.scan(step, h0, xs)
    return o.swapaxes(0, 1), h


# ---- references: the chunked pipeline around the kernel and the per-token recurrence ----------


def chunk_inputs(q, k, v, g, beta, c):
    """Stages 1-4 of gdn_kernels.md in plain jnp (f32, exact solve): w, u, q, k [B,N,H,C,D],
    the within-chunk cumulative gate [B,N,H,C,1], from per-token q, k [B,T,H,Dk], v [B,T,H,Dv],
    g, beta [B,T,H] (T a multiple of c)."""
    b, t, h, _ = q.shape

    def to_chunks(x):
        return x.reshape(b, t // c, c, h, *x.shape[3:]).swapaxes(2, 3)

    q, k, v, g, beta = (to_chunks(x) for x in (q, k, v, g, beta))
    g_cum = jnp.cumsum(g, axis=-1)
    k_beta = k * beta[..., None]
    lower = jnp.tril(jnp.ones((c, c), bool), -1)
    diff = jnp.where(lower, g_cum[..., :, None] - g_cum[..., None, :], -1e30)
    s = jnp.where(lower, jnp.einsum("...id,...jd->...ij", k_beta, k) * jnp.exp(diff), 0.0)
    a = jnp.linalg.inv(jnp.eye(c) + s)
    u = a @ (v * beta[..., None])
    w = a @ (k_beta * jnp.exp(g_cum)[..., None])
    return w, u, q, k, g_cum[..., None]


def per_token(q, k, v, g, beta, h0):
    """The gated delta rule one token at a time: h <- e^g h; h += k beta (v - h^T k)^T; o = h^T q.
    Returns o [B,T,H,Dv] and the final state [B,H,Dk,Dv]."""
    def step(h, x):
        q_t, k_t, v_t, g_t, b_t = x
        h = h * jnp.exp(g_t)[..., None, None]
        v_new = b_t[..., None] * (v_t - jnp.einsum("bhkv,bhk->bhv", h, k_t))
        h = h + k_t[..., :, None] * v_new[..., None, :]
        return h, jnp.einsum("bhkv,bhk->bhv", h, q_t)

    xs = tuple(x.swapaxes(0, 1) for x in (q, k, v, g, beta))
    h, o = jax.lax.scan(step, h0, xs)
    return o.swapaxes(0, 1), h


def scan_inputs(key, avals):
    """Check inputs the kernel meets in training (`--inputs`): w, u, q, k and the gates made by
    chunk_inputs from unit-norm keys and queries, gates in (-0.1, 0) and betas in (0, 1), so the
    state stays bounded (normal random gates would grow it as e^(sum g))."""
    b, n, h, c, dk = avals[0].shape
    dv = avals[1].shape[-1]
    ks = jax.random.split(key, 6)
    q = jax.random.normal(ks[0], (b, n * c, h, dk))
    k = jax.random.normal(ks[1], (b, n * c, h, dk))
    q, k = (x / jnp.linalg.norm(x, axis=-1, keepdims=True) for x in (q, k))
    v = jax.random.normal(ks[2], (b, n * c, h, dv))
    g = -0.1 * jax.random.uniform(ks[3], (b, n * c, h))
    beta = jax.random.uniform(ks[4], (b, n * c, h))
    w, u, q, k, g_cum = chunk_inputs(q, k, v, g, beta, c)
    h0 = 0.1 * jax.random.normal(ks[5], avals[5].shape)
    return [x.astype(a.dtype) for x, a in zip((w, u, q, k, g_cum, h0), avals)]


def scan_bwd_inputs(key, avals):
    """Check inputs for scan_bwd (`--inputs`): scan_inputs' forward inputs, the states the
    forward kernel saves for them, and normal random cotangents of o and h_final."""
    ks = jax.random.split(key, 3)
    fwd = scan_inputs(ks[0], avals[:5] + [avals[7]])
    with pltpu.force_tpu_interpret_mode():
        _, h_saved, _ = scan_fwd(*fwd)
    d_o = jax.random.normal(ks[1], avals[6].shape).astype(avals[6].dtype)
    dh_final = jax.random.normal(ks[2], avals[7].shape)
    return fwd[:5] + [h_saved, d_o, dh_final]
