"""The Gated Delta Net layer of MaxText 0.2.5's Qwen3-Next decoder (models/qwen3.py
Qwen3NextGatedDeltaNet, L474-: in_proj_qkvz and in_proj_ba, a depthwise causal conv over q, k, v
with SiLU, q and k repeated to the value heads and L2-normalised, beta = sigmoid(b),
g = -exp(A_log) softplus(a + dt_bias), the chunked delta rule, a gated RMSNorm with z, out_proj)
for the compiled training step (train_step.py). The rule itself is MaxText's
`jax_chunk_gated_delta_rule` (L219-), read from the pinned wheel at run time: the main build's XLA
path, the only one MaxText 0.2.5 has, with its context-parallel form (`context_parallel_rule`);
the Pallas builds' rule is gdn_kernel_rule.py.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from typing import Any

from tpusim_jax.maxtext_source import function, module


def _rule():
    # With use_qk_norm_in_gdn False (the norm is applied here) the body calls no l2norm; with a
    # cp_axis it calls gdn_cp (kernels/attention/gdn_cp.py, also from the wheel).
    modules = {"jax": jax, "jnp": jnp, "lax": lax}
    gdn_cp = module("maxtext/kernels/attention/gdn_cp.py", modules)
    return function("maxtext/models/qwen3.py", "jax_chunk_gated_delta_rule",
                    modules | {"Array": Any, "gdn_cp": gdn_cp})


def context_parallel_rule(mesh, batch_axes, axis: str = "context"):
    """MaxText's rule with the sequence over the context axis (qwen3.py L1110-1187): q, k, v, g
    and beta enter a shard_map sharded (batch, length over `axis`, heads over tensor), and the rule
    runs with cp_axis: each shard folds its chunks into one affine map of the state, the maps
    compose across the shards by a Hillis-Steele prefix of log2(shards) ppermutes, and each
    shard replays its chunks from the state that reaches it (gdn_cp.py)."""
    from jax.sharding import PartitionSpec as P
    rule = _rule()
    vectors, scalars = P(batch_axes, axis, "tensor", None), P(batch_axes, axis, "tensor")

    def sharded_rule(q, k, v, g, beta, chunk_size):
        sharded = jax.shard_map(
            lambda *a: rule(*a, chunk_size=chunk_size, cp_axis=axis)[0], mesh=mesh,
            in_specs=(vectors,) * 3 + (scalars,) * 2, out_specs=vectors, check_vma=False)
        return sharded(q, k, v, g, beta), None

    return sharded_rule


def gdn_shapes(E: int, hk: int, hv: int, dk: int, dv: int, kernel: int, fsdp, spec, lead):
    """The layer's parameters (before the MLP): name -> (shape with the `lead` dims, sharding)."""
    conv_dim = 2 * hk * dk + hv * dv
    return {
        "gdn_norm_1": (lead + (E,), spec(*[None] * len(lead), None)),
        "w_qkvz": (lead + (E, conv_dim + hv * dv), spec(*[None] * len(lead), fsdp, "tensor")),
        "w_ba": (lead + (E, 2 * hv), spec(*[None] * len(lead), fsdp, None)),
        "conv": (lead + (kernel, conv_dim), spec(*[None] * len(lead), None, None)),
        "a_log": (lead + (hv,), spec(*[None] * len(lead), None)),
        "dt_bias": (lead + (hv,), spec(*[None] * len(lead), None)),
        "gated_norm": (lead + (dv,), spec(*[None] * len(lead), None)),
        "w_out": (lead + (hv * dv, E), spec(*[None] * len(lead), "tensor", fsdp)),
    }


def gdn_mixer(hk: int, hv: int, dk: int, dv: int, chunk: int, norm, bf16, rule=None):
    """x [B, S, E] (the layer input, normalised inside) -> the mixer's output [B, S, E]. `rule`
    stands in for MaxText's chunked rule (the Pallas builds, gdn_kernel_rule.py)."""
    rule = rule or _rule()

    def l2norm(x):
        x32 = x.astype(jnp.float32)
        return (x32 * lax.rsqrt(jnp.sum(x32 * x32, -1, keepdims=True) + 1e-6)).astype(x.dtype)

    def mixer(x, p):
        b, s, _ = x.shape
        h = norm(x, p["gdn_norm_1"])
        qkvz = jnp.einsum("bse,ef->bsf", h, bf16(p["w_qkvz"]))
        ba = jnp.einsum("bse,ef->bsf", h, bf16(p["w_ba"]))
        conv_dim = 2 * hk * dk + hv * dv
        qkv, z = qkvz[..., :conv_dim], qkvz[..., conv_dim:].reshape(b, s, hv, dv)
        kernel = p["conv"].shape[0]
        padded = jnp.pad(qkv, ((0, 0), (kernel - 1, 0), (0, 0)))
        qkv = sum(padded[:, i:i + s] * bf16(p["conv"][i]) for i in range(kernel))
        qkv = jax.nn.silu(qkv)
        q = qkv[..., :hk * dk].reshape(b, s, hk, dk)
        k = qkv[..., hk * dk:2 * hk * dk].reshape(b, s, hk, dk)
        v = qkv[..., 2 * hk * dk:].reshape(b, s, hv, dv)
        q, k = (l2norm(jnp.repeat(t, hv // hk, axis=2)) for t in (q, k))
        beta = jax.nn.sigmoid(ba[..., :hv])
        g = -jnp.exp(p["a_log"]) * jax.nn.softplus(ba[..., hv:].astype(jnp.float32) + p["dt_bias"])
        o, _ = rule(q, k, v, g, beta, chunk_size=chunk)
        o = norm(o, p["gated_norm"]) * jax.nn.silu(z)
        return jnp.einsum("bsf,fe->bse", o.reshape(b, s, hv * dv), bf16(p["w_out"]))

    return mixer
