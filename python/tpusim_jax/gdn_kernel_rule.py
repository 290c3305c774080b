"""The Gated Delta Net's chunked rule on MaxText PR #4348's Pallas path, for the compiled training
step of C1's scan, heads and ladder builds (which MaxText 0.2.5 does not have).

Stages 0-4 follow gdn_kernels.md section 3 (as MaxText 0.2.5's jax_chunk_gated_delta_rule runs
them, models/qwen3.py L235-317): q, k, v and beta in the compute dtype (bf16), g in f32, the query
scaled by Dk^-1/2, padding to whole chunks, chunks laid out [B, N, H, C, D], the within-chunk
cumulative gate, S = tril(k_beta k^T e^(g_i - g_j), -1), the inverse A = (I + S)^-1 and the WY
factors u = A v_beta and w = A (k_beta e^g) at HIGHEST precision. Then per build:
- scan: A by solve_triangular; the inter-chunk walk by this project's gdn_scan_fwd and
  gdn_scan_bwd kernels (python/examples/gdn_scan.py) as one custom VJP (gdn_kernels.md section 4),
  one head a grid cell;
- heads: as scan with MaxText's head tiles: 8 heads a forward cell, 4 a backward one;
- ladder: as heads, A by the inversion ladder with its custom VJP
  (python/examples/gdn_invert_ladder.py; tile_n chunks a cell).
The kernels are this project's, written from gdn_kernels.md; the PR's own code is not used.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import jax
import jax.numpy as jnp

BUILDS = ("scan", "heads", "ladder")
GDN_KERNELS = {"gdn_scan_fwd", "gdn_scan_bwd", "gdn_invert_unit_lower"}
_EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"tpusim_examples_{name}",
                                                  os.path.join(_EXAMPLES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _scan_with_vjp(scan, th_fwd: int, th_bwd: int):
    """The inter-chunk walk (w, u, q, k, g, h0) -> (o, h_final) as the PR's custom VJP: the
    forward kernel saves the state entering each chunk, the backward kernel walks the chunks in
    reverse from it; the f32 cotangents are cast back to the inputs' dtypes."""

    @jax.custom_vjp
    def walk(w, u, q, k, g, h0):
        o, _, h_final = scan.scan_fwd(w, u, q, k, g, h0, th=th_fwd)
        return o, h_final

    def forward(w, u, q, k, g, h0):
        o, h_saved, h_final = scan.scan_fwd(w, u, q, k, g, h0, th=th_fwd)
        return (o, h_final), (w, u, q, k, g, h_saved)

    def backward(residuals, cotangents):
        w, u, q, k, g, h_saved = residuals
        d_o, dh_final = cotangents
        grads = scan.scan_bwd(w, u, q, k, g, h_saved, d_o, dh_final, th=th_bwd)
        return tuple(d.astype(x.dtype) for d, x in zip(grads, (w, u, q, k, g, h_saved)))

    walk.defvjp(forward, backward)
    return walk


def kernel_rule(build: str):
    """rule(q, k, v, g, beta, chunk_size) -> (o [B, T, H, Dv] in q's dtype, the final state), the
    signature of MaxText's jax_chunk_gated_delta_rule."""
    scan = _example("gdn_scan")
    ladder = _example("gdn_invert_ladder") if build == "ladder" else None
    highest = jax.lax.Precision.HIGHEST

    def rule(query, key, value, g, beta, chunk_size):
        dtype, compute = query.dtype, jnp.bfloat16
        b, t, heads, dk = key.shape
        q, k, v, beta = (x.astype(compute) for x in (query, key, value, beta))
        q = q * jax.lax.rsqrt(jnp.float32(dk)).astype(compute)
        g = g.astype(jnp.float32)
        pad = -t % chunk_size
        if pad:
            q, k, v, g, beta = (jnp.pad(x, ((0, 0), (0, pad)) + ((0, 0),) * (x.ndim - 2))
                                for x in (q, k, v, g, beta))
        n = (t + pad) // chunk_size

        def chunks(x):  # [B, T, H, ...] -> [B, N, H, C, ...]
            return jnp.moveaxis(x.reshape(b, n, chunk_size, heads, *x.shape[3:]), 2, 3)

        q, k, v, g, beta = (chunks(x) for x in (q, k, v, g, beta))
        g_cum = jnp.cumsum(g, axis=-1)
        k_beta = k * beta[..., None]
        strict = jnp.tril(jnp.ones((chunk_size, chunk_size), bool), -1)
        s = jnp.matmul(k_beta, k.swapaxes(-1, -2), precision=highest).astype(jnp.float32)
        s = jnp.where(strict, s * jnp.exp(jnp.where(strict, g_cum[..., :, None]
                                                    - g_cum[..., None, :], -1e30)), 0.0)
        if ladder:
            a = ladder.invert_unit_lower(s)
        else:
            eye = jnp.broadcast_to(jnp.eye(chunk_size, dtype=jnp.float32), s.shape)
            a = jax.scipy.linalg.solve_triangular(eye + s, eye, lower=True, unit_diagonal=True)
        u = jnp.matmul(a, (v * beta[..., None]).astype(jnp.float32), precision=highest)
        w = jnp.matmul(a, k_beta.astype(jnp.float32) * jnp.exp(g_cum)[..., None],
                       precision=highest)
        ths = (1, 1) if build == "scan" else (scan.head_tile(heads), scan.head_tile(heads, 4))
        h0 = jnp.zeros((b, heads, dk, v.shape[-1]), jnp.float32)
        o, h_final = _scan_with_vjp(scan, *ths)(w.astype(compute), u.astype(compute), q, k,
                                                g_cum[..., None], h0)
        o = jnp.moveaxis(o, 3, 2).reshape(b, n * chunk_size, heads, -1)[:, :t]
        return o.astype(dtype), h_final

    return rule
