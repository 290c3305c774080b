#!/usr/bin/env bash
# `python -m tpusim_jax compile-step` on `tpusim export maxtext`'s command line re-derives the
# committed compiled steps of tests/data/compiled/ (a dense step, one over HBM, a hybrid GDN step,
# a mixture of experts dropping tokens, with and without expert parallelism, one on MaxText's
# dropless megablox path (its grouped matmuls resolved by the import), a step over 2 slices joined
# over DCN, a tensor-parallel step with MaxText's v5e flags, a step with MaxText's AQT int8
# projections, a hybrid step with context parallelism: the same bytes of XLA's memory analysis,
# the same out-of-memory verdict), and tpusim imports their optimized HLO. The dense step's result
# also records XLA's largest HBM buffers, which hold the loss working set the memory model counts
# (models/memory/memory_model.cpp): the logits cast to f32 (f32[1,1024,32000]) and two bf16 arrays
# of 1024 x 32000 (the bf16 logits and the gathered output projection) in slots of their own. It
# also records what is live in HBM at the step's peak (the loss's backward: the f32 logits, the
# gathered output projection and its bf16 gradient), which `tpusim run` lists beside the
# compiler's peak. compile_paths.sh compiles what these steps leave out, and the refusals.
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
# The megablox step's grouped matmuls (gmm and tgmm custom calls) are tpusim's grouped matmuls.
"$tpusim" run --hlo "$dir/small_moe_sparse.hlo.gz" --chip v5e --profile - >"$dir/run4"
[ "$(grep -c '^kernel megablox' "$dir/run4")" -eq 12 ]
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

echo "compile_step: ok"
