#!/usr/bin/env bash
# `python -m tpusim_jax compile-step` on `tpusim export maxtext`'s command line re-derives the
# committed compiled steps of tests/data/compiled/ (a dense step, one over HBM, a hybrid GDN step,
# a mixture of experts dropping tokens, with and without expert parallelism, one on MaxText's
# dropless megablox path (its grouped matmuls resolved by the import; with tensor parallelism, the
# down projection reduce-scattered over it), a step over 2 slices
# joined over DCN, a tensor-parallel step with MaxText's v5e flags, a step with MaxText's AQT int8
# projections, a hybrid step with context parallelism: the same bytes of XLA's memory
# analysis, the same out-of-memory verdict), and
# refuses what it does not model with one error line and no file. The dense step's result also
# records XLA's largest HBM buffers, which hold the loss working set the memory model counts
# (models/memory/memory_model.cpp): the logits cast to f32 (f32[1,1024,32000]) and two bf16 arrays
# of 1024 x 32000 (the bf16 logits and the gathered output projection) in slots of their own. It
# also records what is live in HBM at the step's peak (the loss's backward: the f32 logits, the
# gathered output projection and its bf16 gradient), which `tpusim run` lists beside the
# compiler's peak.
# Usage: compile_step.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
data="$src/tests/data/compiled"
cd "$src/python"
for s in small small_oom small_gdn small_moe small_moe_ep small_moe_sparse small_2slices small_tp \
  small_int8 small_cp; do
  hlo=()
  case $s in small | small_moe_sparse | small_2slices | small_int8 | small_cp) hlo=(--hlo "$dir/$s.hlo.gz") ;; esac
  # Compiled with the XLA flags the committed result records (small_tp: MaxText's v5e flags;
  # small_int8: the random-bit flag compile-step adds, as MaxText's trainer does, once more).
  flags=$($py -c "import json, sys; print(json.load(open(sys.argv[1])).get('libtpu_init_args', ''))" \
    "$data/$s.json")
  # shellcheck disable=SC2046
  LIBTPU_INIT_ARGS="$flags" $py -m tpusim_jax compile-step \
    $("$tpusim" export maxtext "$data/$s.yaml") -o "$dir/$s.json" "${hlo[@]}" >"$dir/log" 2>"$dir/err"
  $py - "$data/$s.json" "$dir/$s.json" <<'PY'
import json, sys
committed, fresh = (json.load(open(p)) for p in sys.argv[1:])
for key in ("maxtext_args", "topology", "fits", "memory", "message", "slices_compiled",
            "libtpu_init_args"):
    assert committed.get(key) == fresh.get(key), (key, committed.get(key), fresh.get(key))
# The buffer assignment and what is live at the peak, where the committed result records them.
if "buffers" in committed:
    assert committed["buffers"] == fresh["buffers"], (committed["buffers"], fresh["buffers"])
PY
  if [ "$s" = small_oom ]; then grep -q "does not fit: RESOURCE_EXHAUSTED" "$dir/err"; fi
done

# The optimized HLO of the whole step (its layer loop gathers each weight over the 4 chips),
# named in the result and simulated by tpusim.
grep -q '"hlo": "small.hlo.gz"' "$dir/small.json"
"$tpusim" run --hlo "$dir/small.hlo.gz" --chip v5e >"$dir/run"
grep -q "^chip v5e  time" "$dir/run" && grep -q "^while .*: 4 trips" "$dir/run"
# Over 2 slices the DCN reductions are megascale host transfers, imported as collectives.
"$tpusim" run --hlo "$dir/small_2slices.hlo.gz" --chip v5e >"$dir/run2"
grep -q "^while .*: 3 trips, .* 17 asynchronous" "$dir/run2"
# Shared experts (moe.py RoutedAndSharedMoE) add a dense MLP of shared_experts x moe_mlp_dim to
# each of the 4 layers: its three f32 [1024, 2048] weights and their two AdamW moments, over 4 chips.
args=$("$tpusim" export maxtext "$data/small_moe_sparse.yaml")
# shellcheck disable=SC2086
$py -m tpusim_jax compile-step ${args/shared_experts=0/shared_experts=1} -o "$dir/shared.json" \
  >"$dir/log" 2>"$dir/err"
$py - "$dir/small_moe_sparse.json" "$dir/shared.json" <<'PY'
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
# The megablox step's grouped matmuls (gmm and tgmm custom calls) are tpusim's grouped matmuls.
"$tpusim" run --hlo "$dir/small_moe_sparse.hlo.gz" --chip v5e --profile - >"$dir/run4"
[ "$(grep -c '^kernel megablox' "$dir/run4")" -eq 12 ]
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
# Context parallelism (small_cp: one 4096-token sequence over 4 chips): MaxText's GDN rule
# composes the shards' affine state maps by a Hillis-Steele prefix (gdn_cp.py): f32 [1, 8, 128,
# 128] maps sent 1 and 2 ranks on, then the exclusive shift; the attention gathers the keys and
# values whole ([1, 8, 4096, 128] a layer each) and the splash kernel runs each shard's 1024
# queries against them.
zcat "$dir/small_cp.hlo.gz" >"$dir/cp.hlo"
grep 'collective-permute-start(' "$dir/cp.hlo" >"$dir/cp_permutes"
grep -q 'f32\[1,8,128,128\].*source_target_pairs={{0,2},{1,3}}' "$dir/cp_permutes"
grep 'splash_mha_fwd' "$dir/cp.hlo" >"$dir/cp_splash"
grep -q 'bf16\[1,8,1024,128\]' "$dir/cp_splash"
[ "$(grep -cE '= bf16\[1,8,4096,128\][^ ]* all-(reduce|gather)\(' "$dir/cp.hlo")" -ge 2 ]
"$tpusim" run --hlo "$dir/small_cp.hlo.gz" --chip v5e >"$dir/run8"
grep -q "^chip v5e  time" "$dir/run8"
# The int8 step's projections are int8 dots whose gradients round stochastically (rng-bit-generator).
"$tpusim" run --hlo "$dir/small_int8.hlo.gz" --chip v5e >"$dir/run3"
grep -q "^chip v5e  time" "$dir/run3" && zgrep -q "rng-bit-generator" "$dir/small_int8.hlo.gz"

# What the compiled step does not model: one line, exit 2, nothing written.
expect_refusal() {
  if $py -m tpusim_jax compile-step "$@" -o "$dir/no.json" >"$dir/log" 2>"$dir/err"; then
    echo "accepted: $*"; exit 1
  fi
  [ "$(wc -l <"$dir/err")" -eq 1 ] && [ ! -e "$dir/no.json" ] && grep -q "$msg" "$dir/err"
}
cp "$data/small.yaml" "$data/small.model.yaml" "$dir/"
"$tpusim" run "$dir/small.yaml" >"$dir/run" 2>&1
grep -q "live in HBM at its peak (XLA's buffers over their live ranges, at .*): [0-9.]* MiB, of which" \
  "$dir/run"
$py - "$dir/small.json" <<'PY'
import json, sys
buffers = json.load(open(sys.argv[1]))["buffers"]
slots = buffers["largest"]
tokens, vocab = 1024, 32000
f32 = [s for s in slots if s["values"] == f"f32[1,{tokens},{vocab}]"]
bf16 = [s for s in slots if s["values"].startswith(f"bf16[{tokens},{vocab}]")]
assert len(f32) == 1 and f32[0]["bytes"] == 4 * tokens * vocab, slots
assert len(bf16) == 2 and all(s["bytes"] == 2 * tokens * vocab for s in bf16), slots
# The step peaks at the loss's backward: the f32 logits, the gathered output projection
# ([1024, 32000]: the model width is 1024 too) and its bf16 gradient are live there.
live = [(v["shape"], v["opcode"]) for v in buffers["peak_live"]]
assert "transpose(jvp(...e,ev->...v))/dot_general" in buffers["peak_live_at"], buffers
assert (f"f32[1,{tokens},{vocab}]", "fusion") in live, live
assert (f"bf16[{tokens},{vocab}]", "all-gather") in live, live
assert (f"bf16[{tokens},{vocab}]", "fusion") in live, live
PY

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
echo "compile_step: ok"
