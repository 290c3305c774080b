"""A dense decoder's whole training step as MaxText 0.2.5 writes it, compiled for a TPU topology
on this host (as MaxText's train_compile does), so that the compiler's own memory analysis and
out-of-memory verdict stand beside tpusim's memory model.

Taken from MaxText 0.2.5 (maxtext/configs/base.yml and maxtext/layers/, read from the pinned wheel):
- parameters in float32 (`weight_dtype`, base.yml L194), computed in bfloat16 (`dtype`, L128);
  AdamW (`opt_type`, L1100) with both moments in the weights' dtype (`mu_dtype` inherits, L1123);
- layers under `lax.scan` (`scan_layers: true`, L481), each a `jax.checkpoint` with the remat
  policy's saved and offloaded names (layers/nnx_decoders.py get_remat_policy, L1278-1387:
  minimal, minimal_with_context, save_dot_with_context_except_mlp, save_dot_except_mlpwi,
  save_dot_except_mlp, save_qkv_proj, save_out_proj, qkv_proj_offloaded, minimal_offloaded,
  custom with each name's placement, full), offloads to pinned host memory as MaxText asks;
- fused_qkv and fused_mlp as MaxText writes them: one projection weight and checkpoint name
  (qkv_proj, mlpwi) instead of three and two, q, k and v split per shard;
- attention with the splash kernel (`attention: autoselected` on TPU, base.yml L486; block sizes
  512, L1295-1305), vmapped over the batch inside a shard_map over batch and heads, its residuals
  named "context" (layers/attention_op.py L2276-2283);
- sharding by the logical axis rules (base.yml L637-): weights' embed dim over fsdp (and expert),
  heads and MLP columns and the vocabulary over tensor; activations' batch over data, fsdp (and
  expert);
- logits cast to float32 (`cast_logits_to_fp32`, base.yml L221) and, with num_vocab_tiling > 1,
  the loss over token chunks in a scan (utils/vocabulary_tiling.py L57-);
- compile_topology_num_slices > 1: the slices' compile-only devices joined over DCN, the data
  axis over them (MaxText's hybrid mesh with dcn_data_parallelism).
- quantization=int8: the projections through MaxText's AQT configuration (int8_step.py).
- ici_context_parallelism: the sequence over the context axis, attention by MaxText's all-gather
  strategy and the GDN rule by its context-parallel affine composition (gdn_step.py), without the
  load-balanced reordering.
Left out: RoPE and the norms' exact kind (elementwise work of a few MB), dropout, the data
pipeline, int8 with experts or GDN layers, context parallelism with experts, MLA, int8 or the
Pallas GDN builds, and for a mixture of experts the megablox path with expert parallelism (refused
with the key that asks for it);
MaxText's token-dropping einsum path and its dropless megablox path compile (moe_step.py), with
shared experts as MaxText's RoutedAndSharedMoE adds them. Qwen3-Next's hybrid decoder
(decoder_block=qwen3_next) runs its Gated Delta Net layers with MaxText's own XLA path
(gdn_step.py), or with PR #4348's Pallas kernels (gdn_build; gdn_kernel_rule.py).
"""
from __future__ import annotations

import functools
import math

from tpusim_jax.export import ExportError
from tpusim_jax.gdn_kernel_rule import kernel_rule
from tpusim_jax.gdn_step import context_parallel_rule, gdn_mixer, gdn_shapes
from tpusim_jax.int8_step import int8_einsum
from tpusim_jax.mla_step import KEYS as MLA_KEYS, mla_qkv, mla_shapes
from tpusim_jax.moe_step import moe_mlp, moe_shapes, sparse_moe_mlp
from tpusim_jax.step_overrides import config_int, mesh_shape, offloaded_names, saved_names


def pallas_rule(build: str, mesh, batch_axes):
    """The GDN rule of a Pallas build run per shard (a Pallas call is not partitioned by XLA, so
    it runs in a shard_map over the batch and the heads, as the attention's does); None for main."""
    if build == "main":
        return None
    import jax
    from jax.sharding import PartitionSpec as P
    per_shard = kernel_rule(build)
    vectors, scalars = P(batch_axes, None, "tensor", None), P(batch_axes, None, "tensor")

    def rule(q, k, v, g, beta, chunk_size):
        sharded = jax.shard_map(lambda *a: per_shard(*a, chunk_size)[0], mesh=mesh,
                                in_specs=(vectors,) * 3 + (scalars,) * 2, out_specs=vectors,
                                check_vma=False)
        return sharded(q, k, v, g, beta), None

    return rule


def build_step(config: dict, devices, slices: int = 1):
    """(step function, its abstract arguments) for `config` on `devices` (`slices` slices of
    equal size, joined over DCN: MaxText's dcn_data_parallelism makes the data axis span them)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.ad_checkpoint import checkpoint_name
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    E, H, KV = (config_int(config, k) for k in ("base_emb_dim", "base_num_query_heads", "base_num_kv_heads"))
    D, F, L = (config_int(config, k) for k in ("head_dim", "base_mlp_dim", "base_num_decoder_layers"))
    V, S = config_int(config, "vocab_size"), config_int(config, "max_target_length")
    gated = config["mlp_activations"].replace(" ", "") in ("silu,linear", "gelu,linear")
    act_fn = jax.nn.silu if config["mlp_activations"].startswith("silu") else jax.nn.gelu
    axes = mesh_shape(config, len(devices) // slices)
    if (config_int(config, "num_experts") > 1 and config["sparse_matmul"].lower() == "true"
            and axes["expert"] > 1):
        raise ExportError("sparse_matmul=true: the compiled step's megablox path has no "
                          "expert parallelism (sparse_matmul=false with a capacity_factor "
                          "compiles it)")
    # MaxText's hybrid mesh (create_device_mesh): the DCN axes outside the ICI ones, data first.
    devices = sorted(devices, key=lambda d: (getattr(d, "slice_index", 0), d.id))
    axes["data"] *= slices
    mesh = Mesh(np.array(devices).reshape(tuple(axes.values())), tuple(axes))
    # The logical rules' 'embed' and 'activation_batch' both end in the expert axis (base.yml
    # L714, L704): outside the experts, expert parallelism shards like fsdp.
    fsdp, batch_axes = ("fsdp", "fsdp_transpose", "expert"), ("data", "fsdp", "fsdp_transpose", "expert")
    # Context parallelism shards the activations' sequence ('activation_length', base.yml L705)
    # and, like fsdp, the weights' embed dimension ('embed', L714).
    length = "context" if "context" in axes else None
    if length:
        fsdp = ("fsdp", "fsdp_transpose", "context", "expert")
    batch = int(float(config["per_device_batch_size"]) * len(devices))

    def spec(*a):
        return NamedSharding(mesh, P(*a))

    hybrid = config["decoder_block"] == "qwen3_next"
    interval = config_int(config, "inhomogeneous_layer_cycle_interval") if hybrid else 1
    dense_first = config_int(config, "first_num_dense_layers") if config_int(config, "num_experts") > 1 else 0
    if (L - dense_first) % interval:
        raise ExportError(f"base_num_decoder_layers={L} is not a whole number of cycles of "
                          f"inhomogeneous_layer_cycle_interval={interval}")
    cycles = (L - dense_first) // interval
    gdn = {k: config_int(config, "gdn_" + k) for k in ("num_key_heads", "num_value_heads",
                                                  "key_head_dim", "value_head_dim",
                                                  "conv_kernel_dim", "chunk_size")}
    none = (None,)

    experts = config_int(config, "num_experts")
    fused_qkv, fused_mlp = config["fused_qkv"] == "true", config["fused_mlp"] == "true"
    if hybrid and fused_qkv:
        raise ExportError("fused_qkv=true with decoder_block=qwen3_next: the gated query of "
                          "Qwen3-Next's attention is not built into a fused projection here")

    # Shared experts (moe.py RoutedAndSharedMoE, L4793-4796): a dense MLP block of
    # shared_experts x moe_mlp_dim (maxtext_utils.get_shared_expert_mlp_dim, L731-736) beside the
    # routed experts, its output added to theirs.
    shared_width = config_int(config, "shared_experts") * config_int(config, "base_moe_mlp_dim")

    def dense_shapes(prefix, lead, width):
        n = none * len(lead)
        out = {prefix + "wo_mlp": (lead + (width, E), spec(*n, "tensor", fsdp))}
        if fused_mlp:  # kernel_axes ("embed", "num_activations", "mlp")
            out[prefix + "wi"] = (lead + (E, 2 if gated else 1, width),
                                  spec(*n, fsdp, None, "tensor"))
            return out
        out[prefix + "wi_0"] = (lead + (E, width), spec(*n, fsdp, "tensor"))
        if gated:
            out[prefix + "wi_1"] = (lead + (E, width), spec(*n, fsdp, "tensor"))
        return out

    def mlp_shapes(prefix, lead):
        n = none * len(lead)
        norm_2 = {prefix + "norm_2": (lead + (E,), spec(*n, "tensor"))}
        if experts > 1:
            shared = dense_shapes(prefix + "shared_", lead, shared_width) if shared_width else {}
            return {prefix + k: v for k, v in moe_shapes(
                E, experts, config_int(config, "base_moe_mlp_dim"), spec, lead).items()} | shared | norm_2
        return dense_shapes(prefix, lead, F) | norm_2

    # Qwen3-Next's full attention projects a query and a gate per head (MaxText 0.2.5
    # layers/attentions.py L680-681: out features (heads, head_dim * 2) for qwen3_next).
    q_width = 2 * D if hybrid else D
    mla = {k: config_int(config, k) for k in MLA_KEYS} if config["attention_type"] == "mla" else None

    def attention_shapes(lead):
        n = none * len(lead)
        norm_1 = {"norm_1": (lead + (E,), spec(*n, "tensor"))}
        if mla:
            return mla_shapes(E, H, mla, fsdp, spec, lead) | norm_1
        qkv = {"wqkv": (lead + (E, H + 2 * KV, D), spec(*n, fsdp, "tensor", None))} \
            if fused_qkv else {
            "wq": (lead + (E, H, q_width), spec(*n, fsdp, "tensor", None)),
            "wk": (lead + (E, KV, D), spec(*n, fsdp, "tensor", None)),
            "wv": (lead + (E, KV, D), spec(*n, fsdp, "tensor", None))}
        return qkv | {"wo": (lead + (H, D, E), spec(*n, "tensor", None, fsdp))} | norm_1

    shapes = attention_shapes((cycles,)) | {
        "embedding": ((V, E), spec("tensor", fsdp)), "final_norm": ((E,), spec("tensor")),
    } | mlp_shapes("", (cycles,))
    if interval > 1:
        lead = (cycles, interval - 1)
        shapes |= gdn_shapes(E, gdn["num_key_heads"], gdn["num_value_heads"], gdn["key_head_dim"],
                             gdn["value_head_dim"], gdn["conv_kernel_dim"], fsdp, spec, lead)
        shapes |= mlp_shapes("gdn_", lead)
    if dense_first:  # scanned apart, before the layers with experts
        lead = (dense_first,)
        shapes |= {"dense_" + k: v for k, v in (
            attention_shapes(lead) | dense_shapes("", lead, F)
            | {"norm_2": (lead + (E,), spec(None, "tensor"))}).items()}
    if config["logits_via_embedding"] != "true":
        shapes["logits"] = ((E, V), spec(fsdp, "tensor"))
    weight_dtype = jnp.dtype(config["weight_dtype"])
    params = {k: jax.ShapeDtypeStruct(s, weight_dtype, sharding=sh) for k, (s, sh) in shapes.items()}
    tokens = jax.ShapeDtypeStruct((batch, S), jnp.int32, sharding=spec(batch_axes, length))
    activations = NamedSharding(mesh, P(batch_axes, length, "tensor"))

    def bf16(w):
        return w.astype(jnp.bfloat16)

    int8 = config["quantization"] == "int8"
    if int8:
        int8_dot = int8_einsum(config_int(config, "quantization_local_shard_count"))

    def project(eqn, x, p, name, i):
        """A layer's weight matmul: bf16, or MaxText's int8 AQT with a key of the layer's own."""
        if not int8:
            return jnp.einsum(eqn, x, bf16(p[name]))
        return int8_dot(eqn, x, bf16(p[name]), jax.random.fold_in(p["aqt_key"], i))

    def norm(x, scale):
        x32 = x.astype(jnp.float32)
        y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + 1e-5)
        return (y * scale).astype(jnp.bfloat16)

    def splash_kernel(heads, head_shards, q_seq_shards):
        block = min(512, S)
        sizes = splash.BlockSizes(block_q=block, block_kv=block, block_kv_compute=block,
                                  block_q_dkv=block, block_kv_dkv=block,
                                  block_kv_dkv_compute=block, block_q_dq=block, block_kv_dq=block)
        mask = masks.MultiHeadMask([masks.CausalMask((S, S)) for _ in range(heads)])
        return splash.make_splash_mha(mask, block_sizes=sizes, head_shards=head_shards,
                                      q_seq_shards=q_seq_shards, residual_checkpoint_name="context")

    def attention(q, k, v):  # [b, heads, S, D] per shard
        return jax.vmap(splash_kernel(q.shape[1], 1, 1))(q, k, v)

    heads_spec = P(batch_axes, "tensor", None, None)
    if not length:
        sharded_attention = jax.shard_map(attention, mesh=mesh, in_specs=(heads_spec,) * 3,
                                          out_specs=heads_spec, check_vma=False)
    else:
        # The all-gather strategy (attention_op.py L2141, L2263-2293): the queries stay sharded
        # over the context axis, the keys and values enter whole ('activation_kv_length' is
        # unsharded, base.yml L661), and the kernel's mask is the whole sequence's, split into
        # q_seq_shards row blocks that enter the shard_map with the queries.
        kernel = splash_kernel(H, axes["tensor"], axes["context"])
        kernel_spec = kernel.manual_sharding_spec(NamedSharding(mesh, P("tensor", length)))
        q_spec = P(batch_axes, "tensor", length, None)
        gathered = jax.shard_map(lambda kern, q, k, v: jax.vmap(kern)(q, k, v), mesh=mesh,
                                 in_specs=(kernel_spec, q_spec, heads_spec, heads_spec),
                                 out_specs=q_spec, check_vma=False)

        def sharded_attention(q, k, v):
            return gathered(kernel, q, k, v)

    def split_local_heads(qkv):
        # Each shard holds its share of the fused heads: H / tensor query heads, then KV / tensor
        # key and value heads (attentions.py L793-799).
        local = qkv.shape[1]
        nq = local * H // (H + 2 * KV)
        nkv = (local - nq) // 2
        return tuple(jnp.split(qkv, [nq, nq + nkv], axis=1))

    split_qkv = jax.shard_map(split_local_heads, mesh=mesh, in_specs=(heads_spec,),
                              out_specs=(heads_spec,) * 3, check_vma=False)

    if experts > 1 and config["sparse_matmul"].lower() == "true":
        experts_mlp = sparse_moe_mlp(mesh, experts, config_int(config, "num_experts_per_tok"), bf16,
                                     batch_axes)
    elif experts > 1:
        experts_mlp = moe_mlp(experts, config_int(config, "num_experts_per_tok"),
                              float(config["capacity_factor"]), bf16, spec, batch_axes,
                              axes["expert"] > 1)

    def mlp(x, p, prefix="", routed=True):
        h = norm(x, p[prefix + "norm_2"])
        if experts > 1 and routed:
            params = {k[len(prefix):]: v for k, v in p.items() if k.startswith(prefix)}
            m = experts_mlp(h, params if prefix else p)
            if shared_width:
                m = m + dense_mlp(h, p, prefix + "shared_")
            return jax.lax.with_sharding_constraint(x + m, activations)
        return jax.lax.with_sharding_constraint(x + dense_mlp(h, p, prefix), activations)

    def dense_mlp(h, p, prefix):
        if fused_mlp:
            x2 = checkpoint_name(project("bse,enf->bsnf", h, p, prefix + "wi", 4), "mlpwi")
            a = act_fn(x2[:, :, 0]) * x2[:, :, 1] if gated else act_fn(x2[:, :, 0])
        elif gated:
            a = checkpoint_name(project("bse,ef->bsf", h, p, prefix + "wi_0", 4), "mlpwi_0")
            b = project("bse,ef->bsf", h, p, prefix + "wi_1", 5)
            a = act_fn(a) * checkpoint_name(b, "mlpwi_1")
        else:
            a = act_fn(checkpoint_name(project("bse,ef->bsf", h, p, prefix + "wi_0", 4),
                                       "mlpwi_0"))
        return checkpoint_name(project("bsf,fe->bse", a, p, prefix + "wo_mlp", 6), "mlpwo")

    def attention_layer(x, p, routed=True):
        x = checkpoint_name(x, "decoder_layer_input")
        h = norm(x, p["norm_1"])
        if mla:
            q, k, v = (checkpoint_name(t, n) for t, n in zip(
                mla_qkv(h, p, mla, norm, bf16), ("query_proj", "key_proj", "value_proj")))
        elif fused_qkv:
            q, k, v = split_qkv(checkpoint_name(
                project("bse,ehd->bhsd", h, p, "wqkv", 0), "qkv_proj"))
        else:
            q = project("bse,ehd->bhsd", h, p, "wq", 0)
            if hybrid:  # split into query and gate (attentions.py L1266-1271)
                q, gate = jnp.split(q, 2, axis=-1)
            q = checkpoint_name(q, "query_proj")
            k = checkpoint_name(project("bse,ehd->bhsd", h, p, "wk", 1), "key_proj")
            v = checkpoint_name(project("bse,ehd->bhsd", h, p, "wv", 2), "value_proj")
        o = sharded_attention(q / math.sqrt(q.shape[-1]), k, v)
        if hybrid:  # the attention output gated (attentions.py L1363)
            o = o * jax.nn.sigmoid(gate)
        o = checkpoint_name(project("bhsd,hde->bse", o, p, "wo", 3), "out_proj")
        return mlp(jax.lax.with_sharding_constraint(x + o, activations), p, routed=routed)

    if interval > 1:
        mixer = gdn_mixer(gdn["num_key_heads"], gdn["num_value_heads"], gdn["key_head_dim"],
                          gdn["value_head_dim"], gdn["chunk_size"], norm, bf16,
                          context_parallel_rule(mesh, batch_axes) if length
                          else pallas_rule(config["gdn_build"], mesh, batch_axes))

    def gdn_layer(x, p):
        x = checkpoint_name(x, "decoder_layer_input")
        x = jax.lax.with_sharding_constraint(x + mixer(x, p), activations)
        return mlp(x, p, "gdn_")

    names, to_host = saved_names(config), offloaded_names(config)
    if to_host:
        policy = jax.checkpoint_policies.save_and_offload_only_these_names(
            names_which_can_be_saved=names or [], names_which_can_be_offloaded=to_host,
            offload_src="device", offload_dst="pinned_host")
    else:
        policy = jax.checkpoint_policies.save_only_these_names(*names) if names else None
    layer_keys = [k for k in params if k not in ("embedding", "final_norm", "logits")
                  and not k.startswith("dense_")]

    def dense_layer(x, p):
        return remat(functools.partial(attention_layer, routed=False))(x, p), None
    remat = functools.partial(jax.checkpoint, policy=policy, prevent_cse=False)

    def cycle(x, p):
        """One scanned cycle: interval - 1 GDN layers, then full attention (MaxText scans the
        cycle as one block, each layer rematerialised on its own)."""
        for i in range(interval - 1):
            layer_params = {k: v[i] for k, v in p.items() if v.ndim and k in gdn_keys}
            x = remat(gdn_layer)(x, layer_params)
        return remat(attention_layer)(x, p), None

    gdn_keys = {k for k in params if k.startswith(("gdn_", "w_", "conv", "a_log", "dt_bias",
                                                   "gated_norm"))}

    def loss(p, tokens, key=None):
        x = jax.lax.with_sharding_constraint(bf16(p["embedding"])[tokens], activations)
        layers = {k: p[k] for k in layer_keys}
        if int8:  # each scanned layer draws its own stochastic rounding
            layers["aqt_key"] = jax.random.split(key, cycles)
        if dense_first:
            x, _ = jax.lax.scan(dense_layer, x, {k[len("dense_"):]: v for k, v in p.items()
                                                 if k.startswith("dense_")})
        x, _ = jax.lax.scan(cycle, x, layers)
        x = norm(x, p["final_norm"])
        out = bf16(p["embedding"].T if "logits" not in p else p["logits"])
        tiles = config_int(config, "num_vocab_tiling")
        if tiles == 1:
            return token_losses(x, tokens, out).mean()
        # MaxText's vocab tiling (utils/vocabulary_tiling.py L57-): the loss over token chunks
        # in a lax.scan whose backward holds one chunk's logits at a time.
        chunks = (x.reshape(tiles, -1, E), tokens.reshape(tiles, -1))
        def chunk(total, xt):
            return total + jax.checkpoint(token_losses)(xt[0], xt[1], out).sum(), None
        total, _ = jax.lax.scan(chunk, jnp.float32(0), chunks)
        return total / tokens.size

    def token_losses(x, tokens, out):
        # Logits cast to f32 (cast_logits_to_fp32, base.yml L221).
        logits = jnp.einsum("...e,ev->...v", x, out).astype(jnp.float32)
        target = jnp.take_along_axis(logits, tokens[..., None], -1)[..., 0]
        return jax.nn.logsumexp(logits, -1) - target

    def step(p, mu, nu, tokens, *key):
        value, grads = jax.value_and_grad(loss)(p, tokens, *key)
        mu = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, mu, grads)
        nu = jax.tree.map(lambda n, g: 0.95 * n + 0.05 * g * g, nu, grads)
        p = jax.tree.map(lambda w, m, n: w - 1e-4 * (m / (jnp.sqrt(n) + 1e-8) + 0.1 * w), p, mu, nu)
        return p, mu, nu, value

    args = (params, params, params, tokens)
    if int8:  # the step's PRNG key, replicated
        key = jax.eval_shape(lambda: jax.random.key(0))
        args += (jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=spec()),)
    return jax.jit(step, donate_argnums=(0, 1, 2)), args
