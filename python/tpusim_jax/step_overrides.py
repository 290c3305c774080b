"""MaxText's command line for the compiled training step (train_step.py): its keys with base.yml's
defaults, the remat policies' checkpoint names, the compile topology and the mesh, and what of it
the compiled step refuses (each refusal an ExportError naming the key)."""
from __future__ import annotations

import math
import re

from tpusim_jax.export import ExportError
from tpusim_jax.gdn_kernel_rule import BUILDS

# MaxText's keys this step understands, with base.yml's defaults where a run may leave them out.
DEFAULTS = {
    "base_emb_dim": None, "base_num_query_heads": None, "base_num_kv_heads": None,
    "head_dim": "128", "base_mlp_dim": None, "base_num_decoder_layers": None,
    "vocab_size": "32000", "mlp_activations": "silu,linear", "logits_via_embedding": "false",
    "per_device_batch_size": "12", "max_target_length": "2048", "remat_policy": "full",
    "ici_data_parallelism": "1", "ici_fsdp_parallelism": "-1", "ici_fsdp_transpose_parallelism": "1",
    "ici_tensor_parallelism": "1", "compile_topology": None, "compile_topology_num_slices": "1",
    "dcn_data_parallelism": "-1", "weight_dtype": "float32", "num_vocab_tiling": "1",
    "ici_expert_parallelism": "1",
    # Context parallelism (base.yml L1348-1349): the all-gather strategy, without the
    # load-balanced reordering (which MaxText rejects with GDN layers, configs/types.py
    # L5375-5383, and which a dense model's compiled step does not build yet).
    "ici_context_parallelism": "1", "context_parallel_load_balance": "true",
    "context_parallel_strategy": "all_gather",
    # Qwen3-Next's hybrid decoder (base.yml L397-399, L1457-1469): a Gated Delta Net layer in
    # each of the first interval - 1 layers of every cycle, full attention in the last.
    # One weight for q, k and v (attentions.py L762-785, checkpoint name qkv_proj) and one for
    # the up projections (linears.py L689-, L800-808, checkpoint name mlpwi); base.yml L562-563.
    "fused_qkv": "false", "fused_mlp": "false",
    "decoder_block": "llama2", "inhomogeneous_layer_cycle_interval": "1",
    "gdn_conv_kernel_dim": "4", "gdn_key_head_dim": "128", "gdn_value_head_dim": "128",
    "gdn_num_key_heads": "16", "gdn_num_value_heads": "32", "gdn_chunk_size": "64",
    "use_qk_norm_in_gdn": "true",
    # Not MaxText's: the GDN build of C1 (main, or PR #4348's Pallas path: scan, heads, ladder;
    # gdn_kernel_rule.py), which MaxText 0.2.5 does not have.
    "gdn_build": "main",
    # Mixture of experts (base.yml L247-251, L271, L380; moe_step.py).
    "num_experts": "1", "num_experts_per_tok": "1", "base_moe_mlp_dim": "-1",
    "shared_experts": "0", "sparse_matmul": "true", "capacity_factor": "-1.0",
    # Dense layers before the experts' (base.yml L379; DeepSeek's decoder scans them apart) and
    # multi-head latent attention (L487, L542-546; mla_step.py).
    "first_num_dense_layers": "0", "attention_type": "global", "q_lora_rank": "0",
    "kv_lora_rank": "512", "qk_nope_head_dim": "128", "qk_rope_head_dim": "64", "v_head_dim": "128",
    # AQT int8 (base.yml L137, L176; int8_step.py).
    "quantization": "", "quantization_local_shard_count": "-1",
}
# remat_policy=custom: each checkpoint name's placement (base.yml L453-470: the layer input on
# device, the rest recomputed unless set).
PLACEMENTS = {"decoder_layer_input": "device", "query_proj": "remat", "key_proj": "remat",
              "value_proj": "remat", "context": "remat", "out_proj": "remat", "mlpwi_0": "remat",
              "mlpwi_1": "remat", "mlpwo": "remat", "qkv_proj": "remat", "mlpwi": "remat"}

_SAVED = ["query_proj", "value_proj", "key_proj", "kv_proj", "qkv_proj"]
_MINIMAL = _SAVED + ["out_proj", "mlpwi_0", "mlpwi_1", "mlpwi", "mlpwo"]
REMAT_SAVED_NAMES = {
    "minimal": _MINIMAL, "minimal_with_context": _MINIMAL + ["context"],
    "save_dot_with_context_except_mlp": _SAVED + ["context", "out_proj"],
    "save_dot_except_mlpwi": _SAVED + ["out_proj", "mlpwo"],
    "save_dot_except_mlp": _SAVED + ["out_proj"], "save_qkv_proj": _SAVED,
    "save_out_proj": ["out_proj"], "full": None,
    # Offloaded to pinned host memory (_OFFLOADED), nothing kept on device.
    "qkv_proj_offloaded": None, "minimal_offloaded": None,
}


def saved_names(config: dict) -> list[str] | None:
    """The checkpoint names the remat policy keeps on device (None: recompute everything)."""
    if config["remat_policy"] != "custom":
        return REMAT_SAVED_NAMES[config["remat_policy"]]
    return [k for k in PLACEMENTS if k != "decoder_layer_input" and config[k] == "device"]


_OFFLOADED = {"qkv_proj_offloaded": ["query_proj", "value_proj", "key_proj", "kv_proj"],
              "minimal_offloaded": _MINIMAL}


def offloaded_names(config: dict) -> list[str]:
    """The checkpoint names the remat policy offloads to pinned host memory."""
    if config["remat_policy"] == "custom":
        return [k for k in PLACEMENTS if config[k] == "offload"]
    return _OFFLOADED.get(config["remat_policy"], [])

# MaxText's compile_topology names count chips (v5e, v6e) or TensorCores (v5p: two per chip);
# the compile-only devices take the chips' physical shape.
_SHAPES_2D = {4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16", 256: "16x16"}
_SHAPES_3D = {4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4", 128: "4x4x8",
              256: "4x8x8", 512: "8x8x8", 1024: "8x8x16", 2048: "8x16x16"}


def parse_overrides(args: list[str]) -> dict[str, str]:
    """MaxText's `key=value` command line over base.yml's defaults; an unknown key is an error."""
    config = dict(DEFAULTS) | PLACEMENTS
    for arg in args:
        key, eq, value = arg.partition("=")
        if not eq or not key:
            raise ExportError(f"{arg!r}: expected key=value, as MaxText's command line takes")
        if key not in config:
            raise ExportError(f"{key}: not a key the compiled step models (known: "
                              f"{', '.join(sorted(config))})")
        if key in PLACEMENTS and value not in ("remat", "device", "offload"):
            raise ExportError(f"{key}={value}: expected remat, device or offload")
        config[key] = value
    config["mlp_activations"] = re.sub(r"[\[\]'\" ]", "", config["mlp_activations"])
    for key in ("fused_qkv", "fused_mlp"):
        if config[key].lower() not in ("true", "false"):
            raise ExportError(f"{key}={config[key]}: expected true or false")
        config[key] = config[key].lower()
    if int(config["num_experts"]) > 1:
        if config["fused_mlp"] == "true":
            raise ExportError("fused_mlp=true: the compiled step's experts have no fused "
                              "up projection")
        sparse = config["sparse_matmul"].lower() == "true"
        if not sparse and float(config["capacity_factor"]) <= 0:
            raise ExportError(f"capacity_factor={config['capacity_factor']}: the compiled step "
                              "drops tokens at a capacity (a factor > 0)")
    if config["attention_type"] not in ("global", "mla"):
        raise ExportError(f"attention_type={config['attention_type']}: the compiled step has "
                          "global and mla attention")
    if config["gdn_build"] not in ("main",) + BUILDS:
        raise ExportError(f"gdn_build={config['gdn_build']}: expected main, "
                          f"{', '.join(BUILDS)}")
    if config["quantization"] not in ("", "int8"):
        raise ExportError(f"quantization={config['quantization']}: the compiled step has int8 "
                          "(AQT) only")
    if config["quantization"] and (int(config["num_experts"]) > 1
                                   or config["decoder_block"] == "qwen3_next"):
        raise ExportError("quantization=int8: the compiled step quantizes dense attention "
                          "layers only (no experts, no GDN layers)")
    if config["ici_context_parallelism"] != "1":
        refuse_context_parallelism(config)
    if config["ici_expert_parallelism"] not in ("1", "-1") and int(config["num_experts"]) <= 1:
        raise ExportError(f"ici_expert_parallelism={config['ici_expert_parallelism']}: "
                          "expert parallelism needs num_experts > 1")
    for key, value in config.items():
        if value is None:
            raise ExportError(f"{key}: missing (no default in MaxText's base.yml)")
    if config["remat_policy"] not in REMAT_SAVED_NAMES and config["remat_policy"] != "custom":
        raise ExportError(f"remat_policy={config['remat_policy']}: not one of "
                          f"{', '.join(REMAT_SAVED_NAMES)}")
    return config


def config_int(config: dict, key: str) -> int:
    """config[key] as an integer, or an ExportError naming the key."""
    try:
        return int(config[key])
    except ValueError:
        raise ExportError(f"{key}={config[key]}: not an integer") from None


def topology_for(compile_topology: str) -> str:
    """v5e-256 -> v5e:16x16, v5p-512 -> v5p:8x8x8 (256 chips... counted as MaxText counts)."""
    m = re.fullmatch(r"(v5e|v6e|v5p)-(\d+)", compile_topology)
    if not m:
        raise ExportError(f"compile_topology={compile_topology}: expected v5e-N, v6e-N or v5p-N")
    generation, n = m.group(1), int(m.group(2))
    chips = n // 2 if generation == "v5p" else n
    shapes = _SHAPES_3D if generation == "v5p" else _SHAPES_2D
    if chips not in shapes:
        raise ExportError(f"compile_topology={compile_topology}: no slice of {chips} chips "
                          f"(known: {', '.join(str(k) for k in shapes)})")
    return f"{generation}:{shapes[chips]}"


def refuse_context_parallelism(config: dict) -> None:
    """What of context parallelism the compiled step does not build: raises ExportError."""
    if config["context_parallel_strategy"] != "all_gather":
        raise ExportError(f"context_parallel_strategy={config['context_parallel_strategy']}: "
                          "the compiled step gathers the keys and values (all_gather)")
    if config["context_parallel_load_balance"].lower() != "false":
        raise ExportError("context_parallel_load_balance=true: the compiled step has no "
                          "load-balanced reordering (set it false)")
    if (int(config["num_experts"]) > 1 or config["attention_type"] != "global"
            or config["gdn_build"] != "main" or config["quantization"]):
        raise ExportError(f"ici_context_parallelism={config['ici_context_parallelism']}: the "
                          "compiled step has it for dense attention and MaxText's GDN layers "
                          "(gdn_build=main) only")


def mesh_shape(config: dict, chips: int) -> dict[str, int]:
    """MaxText's ici axes in its mesh_axes order (base.yml L636), the one left at -1 taking what
    the others leave of the chips."""
    axes = {"data": config_int(config, "ici_data_parallelism"), "fsdp": config_int(config, "ici_fsdp_parallelism"),
            "fsdp_transpose": config_int(config, "ici_fsdp_transpose_parallelism"),
            "context": config_int(config, "ici_context_parallelism"),
            "tensor": config_int(config, "ici_tensor_parallelism"),
            "expert": config_int(config, "ici_expert_parallelism")}
    known = math.prod(v for v in axes.values() if v != -1)
    free = [k for k, v in axes.items() if v == -1]
    if len(free) > 1 or chips % known:
        raise ExportError(f"ici parallelism {axes} does not divide {chips} chips")
    for k in free:
        axes[k] = chips // known
    if math.prod(axes.values()) != chips:
        raise ExportError(f"ici parallelism {axes} covers {math.prod(axes.values())} chips, "
                          f"the topology has {chips}")
    if axes["context"] == 1:  # the mesh of a step without it is left as it was
        del axes["context"]
    return axes
