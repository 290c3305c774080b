#!/usr/bin/env bash
# `tpusim import maxtext` on MaxText's own model configs, read from the pinned MaxText wheel
# (.venv/wheels, scripts/setup.sh): Llama2-70B and GPT-3 175B as C5's runs were launched become
# scenarios that load and run, and so do Mixtral-8x7B as B5 #16 was launched (tokens dropped) and
# Llama4 Scout and Maverick (Maverick's dense layers between its MoE layers) and DeepSeek2-16B.
# Usage: maxtext_import.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

$py - "$dir" <<'PY'
import sys, zipfile
from tpusim_jax.maxtext_source import wheel_path
with zipfile.ZipFile(wheel_path()) as z:
    for name in ("llama2-70b", "gpt3-175b", "mixtral-8x7b", "llama4-17b-16e", "llama4-17b-128e",
                 "deepseek2-16b"):
        with open(f"{sys.argv[1]}/{name}.yml", "wb") as f:
            f.write(z.read(f"maxtext/configs/models/{name}.yml"))
PY

# C5 #11's launch: Llama2-70B on v6e-256, batch 2, seq 4096, qkv_proj_offloaded.
"$tpusim" import maxtext "$dir/llama2-70b.yml" per_device_batch_size=2 max_target_length=4096 \
  remat_policy=qkv_proj_offloaded ici_fsdp_parallelism=-1 compile_topology=v6e-256 steps=20 \
  -o "$dir/llama.yaml" >"$dir/log" 2>"$dir/err"
grep -q "not modelled: steps=20 (not modelled)" "$dir/log"
grep -q "^d_model: 8192$" "$dir/llama.model.yaml"
grep -q "^mlp: swiglu$" "$dir/llama.model.yaml"
out=$("$tpusim" run "$dir/llama.yaml")
echo "$out" | head -2
grep -q "on 256 x v6e (mesh data 1 fsdp 256 tensor 1), seq 4096, batch/chip 2" <<<"$out"

# GPT-3 175B (GELU MLP) on v5p-128: 128 TensorCores are 64 chips.
"$tpusim" import maxtext "$dir/gpt3-175b.yml" per_device_batch_size=1 max_target_length=2048 \
  compile_topology=v5p-128 -o "$dir/gpt3.yaml" >"$dir/log" 2>"$dir/err"
grep -q "^mlp: gelu$" "$dir/gpt3.model.yaml"
grep -q "^chips: 64$" "$dir/gpt3.yaml"
"$tpusim" run "$dir/gpt3.yaml" >/dev/null

# A mixture of experts: Mixtral-8x7B on v6e-256 with tokens dropped at capacity factor 1.25.
"$tpusim" import maxtext "$dir/mixtral-8x7b.yml" per_device_batch_size=12 max_target_length=4096 \
  sparse_matmul=False capacity_factor=1.25 compile_topology=v6e-256 -o "$dir/mixtral.yaml" \
  >"$dir/log" 2>"$dir/err"
for kv in "experts: 8" "top_k: 2" "mlp_dim: 14336"; do grep "^moe: {" "$dir/mixtral.model.yaml" | grep -q "$kv"; done
grep -q "^moe: {sparse_matmul: false, capacity_factor: 1.25}$" "$dir/mixtral.yaml"
"$tpusim" run "$dir/mixtral.yaml" >/dev/null
# Llama 4 Scout as B5 #34 was launched (v5p-1024, seq 8192, batch 8, the layer input offloaded):
# its head_dim is base.yml's, its cycle interval is not a GDN cycle, its chunked attention at an
# 8192 window is full causal attention at seq 8192 (listed), the custom remat keys are read.
"$tpusim" import maxtext "$dir/llama4-17b-16e.yml" per_device_batch_size=8 max_target_length=8192 \
  remat_policy=custom decoder_layer_input=offload compile_topology=v5p-1024 -o "$dir/scout.yaml" \
  >"$dir/log" 2>"$dir/err"
grep -q "^default: head_dim=128 (MaxText's base.yml)$" "$dir/log"
grep -q "^not modelled: chunk_attn_window_size=8192 (chunked attention taken as full causal" "$dir/log"
grep -q "^not modelled: inhomogeneous_layer_cycle_interval=4 (not modelled)$" "$dir/log"
! grep -q "gdn\|full_attention_interval" "$dir/scout.model.yaml"
grep -q "^  custom: {decoder_layer_input: offload}$" "$dir/scout.yaml"
for kv in "experts: 16" "top_k: 1" "shared: 1"; do grep "^moe: {" "$dir/scout.model.yaml" | grep -q "$kv"; done
"$tpusim" run "$dir/scout.yaml" >/dev/null
# Maverick puts experts in every other layer (interleave_moe_layer_step 2): 24 of its 48 layers
# keep the dense MLP, as MaxText's get_dense_moe_layers counts them.
"$tpusim" import maxtext "$dir/llama4-17b-128e.yml" compile_topology=v5p-256 \
  per_device_batch_size=4 max_target_length=8192 ici_fsdp_parallelism=32 \
  ici_tensor_parallelism=4 -o "$dir/maverick.yaml" >"$dir/log" 2>"$dir/err"
grep "^moe: {" "$dir/maverick.model.yaml" | grep -q "dense_layers: 24"
grep -q "^mlp_dim: 16384$" "$dir/maverick.model.yaml"
# Over v5p's HBM with the loss's f32 logits (the memory model), so timed with --simulate-anyway.
out=$("$tpusim" run "$dir/maverick.yaml" --simulate-anyway)  # whole: grep -q cannot break the pipe
grep -q "attention layer (dense MLP)  *24 x" <<<"$out"
# DeepSeek2-16B as B5 #38 was launched: multi-head latent attention (q straight from the
# embedding) and its first layer dense; the import equals tpusim's own model of it.
"$tpusim" import maxtext "$dir/deepseek2-16b.yml" compile_topology=v5p-8 per_device_batch_size=24 \
  max_target_length=2048 -o "$dir/ds2.yaml" >"$dir/log" 2>"$dir/err"
grep -q "^mla: {q_lora_rank: 0, kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128}$" "$dir/ds2.model.yaml"
grep "^moe: {" "$dir/ds2.model.yaml" | grep -q "dense_layers: 1"
[ "$("$tpusim" run "$dir/ds2.yaml" | sed -n 2p)" = \
  "$("$tpusim" run "$src/scenarios/blind/b5_38_v5p-8_deepseek2-16b.yaml" | sed -n 2p)" ]
echo "maxtext_import: ok"
