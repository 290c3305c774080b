"""Multi-head latent attention's projections as MaxText 0.2.5 writes them (layers/attention_mla.py,
mla_query_projection L811- and mla_kv_projection L1003-), for the compiled training step
(train_step.py): the query straight from the layer input (q_lora_rank 0) or through a low-rank
projection and its RMSNorm (wq_a, q_norm, wq_b: checkpoint names query_wa_proj and mla_q); the keys
and values from one low-rank projection (wkv_a, kv_wa_proj) whose first kv_lora_rank columns are
normalised (kv_norm, mla_kv) and projected up to each head's nope key and value (wkv_b), the
rope part of the key shared by every head (broadcast, L905-909). The query's and key's head dim is
qk_nope + qk_rope, the value's v_head_dim. Sharding by the kernels' logical axes (L670-745) and
base.yml's rules: embed_attn and the low ranks' q_lora / kv_lora over fsdp (L673-677, L714), the
up-projections' own lora columns unsharded (q_lora_up_proj, kv_lora_up_proj, L675, L678), heads
over tensor, the norms over tensor ('norm'). Left out: RoPE and YaRN's mscale (elementwise work).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def mla_shapes(E: int, H: int, dims: dict, fsdp, spec, lead):
    """The attention's weights: name -> (shape with the `lead` dims, sharding); `dims` the KEYS."""
    n = (None,) * len(lead)
    qk = dims["qk_nope_head_dim"] + dims["qk_rope_head_dim"]
    out = {"wkv_a": (lead + (E, dims["kv_lora_rank"] + dims["qk_rope_head_dim"]),
                     spec(*n, fsdp, None)),
           "kv_norm": (lead + (dims["kv_lora_rank"],), spec(*n, "tensor")),
           "wkv_b": (lead + (dims["kv_lora_rank"], H, dims["qk_nope_head_dim"]
                             + dims["v_head_dim"]), spec(*n, fsdp, "tensor", None)),
           "wo": (lead + (H, dims["v_head_dim"], E), spec(*n, "tensor", None, fsdp))}
    if dims["q_lora_rank"]:
        out |= {"wq_a": (lead + (E, dims["q_lora_rank"]), spec(*n, fsdp, None)),
                "q_norm": (lead + (dims["q_lora_rank"],), spec(*n, "tensor")),
                "wq_b": (lead + (dims["q_lora_rank"], H, qk), spec(*n, fsdp, "tensor", None))}
    else:
        out["wq"] = (lead + (E, H, qk), spec(*n, fsdp, "tensor", None))
    return out


def mla_qkv(h, p, dims: dict, norm, bf16):
    """h [B, S, E] (normalised) -> q, k [B, H, S, nope + rope] and v [B, H, S, v_head_dim]."""
    if dims["q_lora_rank"]:
        low = checkpoint_name(jnp.einsum("bse,er->bsr", h, bf16(p["wq_a"])), "query_wa_proj")
        low = checkpoint_name(norm(low, p["q_norm"]), "mla_q")
        q = jnp.einsum("bsr,rhd->bhsd", low, bf16(p["wq_b"]))
    else:
        q = jnp.einsum("bse,ehd->bhsd", h, bf16(p["wq"]))
    low = checkpoint_name(jnp.einsum("bse,er->bsr", h, bf16(p["wkv_a"])), "kv_wa_proj")
    main, k_rope = low[..., :dims["kv_lora_rank"]], low[..., dims["kv_lora_rank"]:]
    main = checkpoint_name(norm(main, p["kv_norm"]), "mla_kv")
    kv = jnp.einsum("bsr,rhd->bhsd", main, bf16(p["wkv_b"]))
    nope = dims["qk_nope_head_dim"]
    k_nope, v = kv[..., :nope], kv[..., nope:]
    b, heads, s, _ = k_nope.shape
    k_rope = jnp.broadcast_to(k_rope[:, None], (b, heads, s, k_rope.shape[-1]))
    return q, jnp.concatenate([k_nope, k_rope], axis=-1), v
