"""A mixture-of-experts MLP as MaxText 0.2.5 runs it with `sparse_matmul: false` and a capacity
factor (layers/moe.py): the router's softmax and top-k (L4040-), `generate_masks` (L3783-3854:
expert capacity ceil(seq x top_k / experts) x capacity_factor per batch row, tokens past it
dropped, the dispatch and combine masks [B, S, E, C]), then the einsums "BSM,BSEC -> EBCM",
"EBCM,EMH -> EBCH" (gate and up, SiLU), "EBCH,EHM -> EBCM" and "EBCM,BSEC -> BSM" (L4073-4076),
for the compiled training step (train_step.py); and the dropless megablox path (sparse_matmul:
true, megablox: true, base.yml L249-250, with tensor but without expert parallelism),
`sparse_moe_mlp` below.
Shared experts are a dense MLP beside either, added by train_step.py.

Sharding follows flax's resolution of base.yml's logical rules (L636-750: rules in order, a rule
taken only if none of its mesh axes is already used by the array): the experts' weights
("exp", "embed_moe", "mlp_moe", moe.py L937) over (expert, fsdp, fsdp_transpose + tensor); the
dispatched tokens and the experts' activations ("activation_exp", "activation_batch_moe", None,
"activation_embed_moe" or "activation_mlp", L4061-4072) over (-, data + fsdp + fsdp_transpose +
expert, -, tensor): activation_batch_moe (L684) comes before activation_exp (L689) and takes the
expert axis, so with expert parallelism the expert dimension of the activations is not sharded
(the "FSDP-style fallback" of moe.py L4057-4059, moe_dispatch_no_expert_sharding false) and
the weights, kept over the expert axis by maybe_all_gather_kernel_weight_in_expert_parallelism
(L3940-3951), meet tokens sharded by batch.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import PartitionSpec as P


_MLP = ("fsdp_transpose", "tensor")  # mlp_moe (L692), before embed_moe falls to fsdp (L694)


def moe_shapes(E: int, experts: int, H: int, spec, lead):
    """The router and the experts' weights: name -> (shape with the `lead` dims, sharding)."""
    n = (None,) * len(lead)
    return {
        "gate": (lead + (E, experts), spec(*n, ("fsdp", "fsdp_transpose", "expert"), None)),
        "moe_wi_0": (lead + (experts, E, H), spec(*n, "expert", "fsdp", _MLP)),
        "moe_wi_1": (lead + (experts, E, H), spec(*n, "expert", "fsdp", _MLP)),
        "moe_wo": (lead + (experts, H, E), spec(*n, "expert", _MLP, "fsdp")),
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


def moe_mlp(experts: int, top_k: int, capacity_factor: float, bf16, spec, batch_axes,
            expert_parallel: bool):
    """h [B, S, E] (normalised) -> the experts' weighted output [B, S, E]."""
    tokens = spec(None, batch_axes, None, "tensor")  # [E, B, C, M or H]

    def constrain(x, sharding):
        return jax.lax.with_sharding_constraint(x, sharding)

    def kernel(w, dims):  # moe.py L3940-3951: only with expert parallelism
        return constrain(w, spec("expert", *dims)) if expert_parallel else w

    def mlp(h, p):
        logits = jnp.einsum("bse,ex->bsx", h, bf16(p["gate"])).astype(jnp.float32)
        probs = jax.nn.softmax(logits, axis=-1)
        weights, indices = jax.lax.top_k(probs, top_k)
        routed = jnp.zeros_like(probs).at[
            jnp.arange(probs.shape[0])[:, None, None], jnp.arange(probs.shape[1])[None, :, None],
            indices].set(weights)
        dispatch, combine = dispatch_masks(indices, routed, experts, capacity_factor)
        masks = spec(batch_axes, None, None, None)
        dispatch, combine = constrain(dispatch, masks), constrain(combine, masks)
        x = constrain(jnp.einsum("bsm,bsec->ebcm", h, dispatch.astype(h.dtype)), tokens)
        wi_0, wi_1 = (kernel(bf16(p[k]), (None, _MLP)) for k in ("moe_wi_0", "moe_wi_1"))
        a = checkpoint_name(constrain(jnp.einsum("ebcm,emh->ebch", x, wi_0), tokens), "mlpwi_0")
        g = checkpoint_name(constrain(jnp.einsum("ebcm,emh->ebch", x, wi_1), tokens), "mlpwi_1")
        wo = kernel(bf16(p["moe_wo"]), (_MLP, None))
        y = checkpoint_name(constrain(jnp.einsum("ebch,ehm->ebcm", jax.nn.silu(a) * g, wo),
                                      tokens), "mlpwo")
        return jnp.einsum("ebcm,bsec->bsm", y, combine.astype(y.dtype))

    return mlp


# base.yml L322-346: every wi_tile_* and wo_tile_* (forward, dlhs, drhs) is 512 rows x 1024 x 1024.
_TILING = (512, 1024, 1024)


@jax.custom_vjp
def _sort_rows(x, order):
    """moe.py _sort_activations with use_custom_sort_vjp (base.yml L275; moe.py L142-200): rows
    taken in `order`; the backward takes the cotangent's rows in the inverse order."""
    return x[order]


def _sort_rows_fwd(x, order):
    return x[order], order


def _sort_rows_bwd(order, g):
    return g[jnp.argsort(order)], None


_sort_rows.defvjp(_sort_rows_fwd, _sort_rows_bwd)


def sparse_moe_mlp(mesh, experts: int, top_k: int, bf16, batch_axes):
    """MaxText's dropless megablox path without expert parallelism, h [B, S, E] -> [B, S, E]:
    the router outside the shard_map (moe.py gate), then per shard (sparse_matmul's shard_map over
    the batch; the experts' weights enter gathered over fsdp, moe.py L2435-2441): top-k of the
    softmax (get_topk, L1297-1298), permute (argsort of the flattened expert ids, L1626; each token
    repeated top_k times and sorted, L1631-1633; group sizes by bincount, L1637), the three grouped
    matmuls wi_0, wi_1 (SiLU gate) and wo, then unpermute (sorted back by the argsort of the
    order, L1735-1739) and the routing-weighted sum in float32 ("BKE,BK -> BE", L1754,
    float32_weight_sum base.yml L227). The grouped matmul is JAX's megablox `gmm` (a Pallas kernel
    with its gmm / tgmm VJP), the kernel MaxText's `megablox` fork descends from; its tiling is
    MaxText's default for every pass.

    With tensor parallelism (get_routed_moe_shardings' default branch, L2434-2441) each shard
    holds its tensor share of the experts' MLP columns ("mlp_no_fsdp" -> tensor, base.yml L745;
    fsdp gathered): the up projections give [rows, H / tensor], the down projection partial sums
    [rows, E], reduce-scattered over tensor on E (psum_scatter, L3218-3223) before "mlpwo" is
    named, and the output leaves sharded on E ("activation_embed", L2474-2480). The tokens enter
    whole on every tensor shard ("activation_norm_length" is not the tensor axis, L706)."""
    from jax.experimental.pallas.ops.tpu.megablox import gmm

    def local(h, logits, wi_0, wi_1, wo):
        b, s, e = h.shape
        probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
        weights, selected = jax.lax.top_k(probs, top_k)
        flat = jnp.ravel(selected)
        order = jnp.argsort(flat)
        rows = _sort_rows(jnp.repeat(h.reshape(b * s, e), top_k, axis=0), order)
        sizes = jnp.bincount(flat, length=experts).astype(jnp.int32)

        def grouped(x, w):
            pad = -x.shape[0] % _TILING[0]
            y = gmm(jnp.pad(x, ((0, pad), (0, 0))), w, sizes, jnp.bfloat16, _TILING)
            return y[:x.shape[0]]

        a = checkpoint_name(grouped(rows, wi_0), "mlpwi_0")
        g = checkpoint_name(grouped(rows, wi_1), "mlpwi_1")
        y = grouped(jax.nn.silu(a) * g, wo)
        if tensor > 1:
            y = jax.lax.psum_scatter(y, "tensor", scatter_dimension=1, tiled=True)
        y = checkpoint_name(y, "mlpwo")
        y = _sort_rows(y, jnp.argsort(order)).reshape(b * s, top_k, e // tensor)
        out = jnp.einsum("bke,bk->be", y.astype(jnp.float32),
                         weights.reshape(b * s, top_k).astype(jnp.float32))
        return out.reshape(b, s, e // tensor).astype(h.dtype)

    tensor = mesh.shape["tensor"]
    tokens = P(batch_axes, None, None)
    up, down = P(None, None, "tensor"), P(None, "tensor", None)
    sharded = jax.shard_map(local, mesh=mesh, in_specs=(tokens, tokens, up, up, down),
                            out_specs=P(batch_axes, None, "tensor"), check_vma=False)

    def mlp(h, p):
        logits = jnp.einsum("bse,ex->bsx", h, bf16(p["gate"]))
        return sharded(h, logits, bf16(p["moe_wi_0"]), bf16(p["moe_wi_1"]), bf16(p["moe_wo"]))

    return mlp
