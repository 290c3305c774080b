"""A mixture-of-experts MLP as MaxText 0.2.5 runs it with `sparse_matmul: false` and a capacity
factor (layers/moe.py): the router's softmax and top-k (L4040-), `generate_masks` (L3783-3854:
expert capacity ceil(seq x top_k / experts) x capacity_factor per batch row, tokens past it
dropped, the dispatch and combine masks [B, S, E, C]), then the einsums "BSM,BSEC -> EBCM",
"EBCM,EMH -> EBCH" (gate and up, SiLU), "EBCH,EHM -> EBCM" and "EBCM,BSEC -> BSM" (L4073-4076),
for the compiled training step (train_step.py). The megablox path (sparse_matmul: true) and
shared experts are not compiled here.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def moe_shapes(E: int, experts: int, H: int, fsdp, spec, lead):
    """The router and the experts' weights: name -> (shape with the `lead` dims, sharding)."""
    n = (None,) * len(lead)
    return {
        "gate": (lead + (E, experts), spec(*n, fsdp, None)),
        "moe_wi_0": (lead + (experts, E, H), spec(*n, None, fsdp, "tensor")),
        "moe_wi_1": (lead + (experts, E, H), spec(*n, None, fsdp, "tensor")),
        "moe_wo": (lead + (experts, H, E), spec(*n, None, "tensor", fsdp)),
    }


def dispatch_masks(top_k_indices, probs, experts: int, capacity_factor: float):
    """MaxText's generate_masks: (dispatch bool, combine f32), both [B, S, E, C]."""
    b, s, k = top_k_indices.shape
    capacity = int(max(math.ceil(s * k / experts) * capacity_factor, capacity_factor))
    mask = jax.nn.one_hot(top_k_indices, experts, dtype=jnp.int32)  # [B, S, K, E]
    count = jnp.cumsum(mask.reshape(b, s * k, experts), axis=1).reshape(b, s, k, experts)
    kept = mask * (count <= capacity)
    combined = jnp.sum(kept, axis=2)  # [B, S, E]
    probs = probs * combined
    position = jnp.sum(mask * count, axis=2) * combined
    in_capacity = jax.nn.one_hot(position, capacity + 1, dtype=jnp.int32)
    combine = (probs[..., None] * in_capacity)[..., 1:]
    return combine.astype(bool), combine


def moe_mlp(experts: int, top_k: int, capacity_factor: float, bf16):
    """h [B, S, E] (normalised) -> the experts' weighted output [B, S, E]."""

    def mlp(h, p):
        logits = jnp.einsum("bse,ex->bsx", h, bf16(p["gate"])).astype(jnp.float32)
        probs = jax.nn.softmax(logits, axis=-1)
        weights, indices = jax.lax.top_k(probs, top_k)
        routed = jnp.zeros_like(probs).at[
            jnp.arange(probs.shape[0])[:, None, None], jnp.arange(probs.shape[1])[None, :, None],
            indices].set(weights)
        dispatch, combine = dispatch_masks(indices, routed, experts, capacity_factor)
        x = jnp.einsum("bsm,bsec->ebcm", h, dispatch.astype(h.dtype))
        a = checkpoint_name(jnp.einsum("ebcm,emh->ebch", x, bf16(p["moe_wi_0"])), "mlpwi_0")
        g = checkpoint_name(jnp.einsum("ebcm,emh->ebch", x, bf16(p["moe_wi_1"])), "mlpwi_1")
        y = checkpoint_name(jnp.einsum("ebch,ehm->ebcm", jax.nn.silu(a) * g, bf16(p["moe_wo"])),
                            "mlpwo")
        return jnp.einsum("ebcm,bsec->bsm", y, combine.astype(y.dtype))

    return mlp
