#!/usr/bin/env bash
# `python -m tpusim_jax compile-step` on what the committed steps of compile_step.sh leave out:
# shared experts (their weights' bytes), multi-head latent attention with a dense first layer
# (the low-rank projections, 192-wide splash operands, the experts' loop after the dense layer),
# the Pallas GDN build (its kernels exported beside the HLO and resolved by the import), megablox
# with tensor parallelism (the down projection reduce-scattered over it), and what it refuses
# (one error line, no file).
# Usage: compile_paths.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
data="$src/tests/data/compiled"
cd "$src/python"
# Shared experts (moe.py RoutedAndSharedMoE) add a dense MLP of shared_experts x moe_mlp_dim to
# each of the 4 layers of the committed megablox step (8 experts, fsdp 4): its three f32
# [1024, 2048] weights and their two AdamW moments, over 4 chips.
args=$("$tpusim" export maxtext "$data/small_moe_sparse.yaml")
# shellcheck disable=SC2086
$py -m tpusim_jax compile-step ${args/shared_experts=0/shared_experts=1} -o "$dir/shared.json" \
  >"$dir/log" 2>"$dir/err"
$py - "$data/small_moe_sparse.json" "$dir/shared.json" <<'PY'
import json, sys
routed, shared = (json.load(open(p))["memory"]["argument_bytes"] for p in sys.argv[1:])
assert shared - routed == 4 * 3 * 1024 * 2048 * 4 * 3 // 4, (routed, shared)
PY
# Multi-head latent attention (mla_step.py) and a dense first layer before the experts' (the
# megablox step above with attention_type=mla first_num_dense_layers=1): the low-rank key-value
# projection and its up-projection are in the step, splash attention takes queries and keys of
# nope + rope = 192 per head, and the experts' layer loop runs the 3 layers after the dense one.
# shellcheck disable=SC2086
$py -m tpusim_jax compile-step $args attention_type=mla first_num_dense_layers=1 \
  -o "$dir/mla.json" --hlo "$dir/mla.hlo.gz" >"$dir/log" 2>"$dir/err"
# (Read into files first: grep -q ends a pipe early, which pipefail reports as a failure.)
zcat "$dir/mla.hlo.gz" >"$dir/mla.hlo"
grep -q 'bse,er->bsr/dot_general' "$dir/mla.hlo"
grep -q 'bsr,rhd->bhsd/dot_general' "$dir/mla.hlo"
grep 'splash_mha_fwd' "$dir/mla.hlo" >"$dir/splash"
grep -q 'bf16\[2,8,1024,192\]' "$dir/splash"
"$tpusim" run --hlo "$dir/mla.hlo.gz" --chip v5e >"$dir/run6"
grep -q '^while .*: 3 trips.*(jit(step)/jvp()/while)$' "$dir/run6"
# The hybrid step on PR #4348's Pallas path (gdn_build=ladder, gdn_kernel_rule.py): its GDN
# kernels are exported beside the HLO and resolve the compiled program's custom calls, run by the
# forward and the recompute (the scan's and the ladder's) and by the backward (the scan's).
args=$("$tpusim" export maxtext "$data/small_gdn.yaml")
# shellcheck disable=SC2086
$py -m tpusim_jax compile-step $args gdn_build=ladder -o "$dir/ladder.json" \
  --hlo "$dir/ladder.hlo.gz" >"$dir/log" 2>"$dir/err"
grep -q '"kernels_program": "ladder.kernels.json"' "$dir/ladder.json"
"$tpusim" run --hlo "$dir/ladder.json" --profile - >"$dir/run5"
for k in gdn_scan_fwd gdn_scan_bwd gdn_invert_unit_lower; do grep -q " $k \[pallas\]" "$dir/run5"; done
# With tensor parallelism 2 (fsdp 2): each shard's grouped matmuls take twice the rows (8192 =
# 4 sequences x 1024 x top-2) and half the experts' MLP columns (1024 of 2048), and the down
# projection's partial sums are reduce-scattered over the tensor axis on the model width (1024 ->
# 512), in the forward and in its recompute (moe.py L3218-3223).
args=$("$tpusim" export maxtext "$data/small_moe_sparse.yaml")
tp_args=${args/ici_fsdp_parallelism=4 ici_tensor_parallelism=1/ici_fsdp_parallelism=2 ici_tensor_parallelism=2}
[ "$tp_args" != "$args" ]
# shellcheck disable=SC2086
$py -m tpusim_jax compile-step $tp_args -o "$dir/moe_tp.json" --hlo "$dir/moe_tp.hlo.gz" \
  >"$dir/log" 2>"$dir/err"
zcat "$dir/moe_tp.hlo.gz" >"$dir/moe_tp.hlo"
[ "$(grep -c '= bf16\[8192,512\][^ ]* reduce-scatter(' "$dir/moe_tp.hlo")" -eq 2 ]
"$tpusim" run --hlo "$dir/moe_tp.hlo.gz" --chip v5e --profile - >"$dir/run7"
[ "$(grep -c '^kernel megablox 8192x1024x1024 ' "$dir/run7")" -eq 12 ]
# What the compiled step does not model: one line, exit 2, nothing written.
expect_refusal() {
  if $py -m tpusim_jax compile-step "$@" -o "$dir/no.json" >"$dir/log" 2>"$dir/err"; then
    echo "accepted: $*"; exit 1
  fi
  [ "$(wc -l <"$dir/err")" -eq 1 ] && [ ! -e "$dir/no.json" ] && grep -q "$msg" "$dir/err"
}
args=$("$tpusim" export maxtext "$data/small.yaml")
# shellcheck disable=SC2086
msg="sparse_matmul=true: the compiled step's megablox path has no expert parallelism" \
  expect_refusal $args num_experts=8 base_moe_mlp_dim=1024 ici_fsdp_parallelism=2 ici_expert_parallelism=2
# shellcheck disable=SC2086
msg="context_parallel_load_balance=true: the compiled step has no load-balanced reordering" \
  expect_refusal $args ici_fsdp_parallelism=1 ici_context_parallelism=4
# shellcheck disable=SC2086
msg="quantization=fp8: the compiled step has int8 (AQT) only" expect_refusal $args quantization=fp8
# shellcheck disable=SC2086
msg="quantization_local_shard_count: set it to the run's local devices" expect_refusal $args quantization=int8
# shellcheck disable=SC2086
msg="flash_block: not a key the compiled step models" expect_refusal $args flash_block=3
# shellcheck disable=SC2086
msg="compile_topology=v5e-3: no slice of 3 chips" expect_refusal $args compile_topology=v5e-3
echo "compile_paths: ok"
