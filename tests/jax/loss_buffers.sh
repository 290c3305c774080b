#!/usr/bin/env bash
# Re-derives the memory model's loss working set (models/memory/memory_model.cpp) from XLA's buffer
# assignment, as `python -m tpusim_jax compile-step` records it (`buffers`: the largest HBM slots):
# the small dense step of tests/data/compiled/ (1024 tokens per chip, vocabulary 32000, width 1024)
# holds, in slots of their own, the logits cast to f32 (f32[1,1024,32000]) and two bf16 arrays of
# 1024 x 32000 (the bf16 logits and the gathered output projection), and tpusim's peak item counts
# exactly those bytes; `tpusim run` lists the slots beside the compiler's peak.
# Usage: loss_buffers.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
data="$src/tests/data/compiled"
cp "$data/small.yaml" "$data/small.model.yaml" "$dir/"
# shellcheck disable=SC2046
(cd "$src/python" && $py -m tpusim_jax compile-step $("$tpusim" export maxtext "$data/small.yaml") \
  -o "$dir/small.json" >"$dir/log" 2>&1)
"$tpusim" run "$dir/small.yaml" --json "$dir/run.json" >"$dir/run" 2>&1
grep -q "its largest HBM buffers (XLA's buffer assignment; .*): 125.00 MiB f32\[1,1024,32000\]" \
  "$dir/run"
$py - "$dir/small.json" "$dir/run.json" <<'PY'
import json, sys
slots = json.load(open(sys.argv[1]))["buffers"]["largest"]
tokens, vocab = 1024, 32000
f32 = [s for s in slots if s["values"] == f"f32[1,{tokens},{vocab}]"]
bf16 = [s for s in slots if s["values"].startswith(f"bf16[{tokens},{vocab}]")]
print(f"f32 logits in {len(f32)} slot(s), bf16 [1024 x 32000] arrays in {len(bf16)} slot(s)")
assert len(f32) == 1 and f32[0]["bytes"] == 4 * tokens * vocab, slots
assert len(bf16) == 2 and all(s["bytes"] == 2 * tokens * vocab for s in bf16), slots
peak = json.load(open(sys.argv[2]))["memory"][-1]
print(f"tpusim: {peak['what']}: {peak['bytes']} bytes")
assert peak["what"].startswith("peak: logits"), peak
assert peak["bytes"] == f32[0]["bytes"] + bf16[0]["bytes"] + bf16[1]["bytes"], peak
PY
echo "loss_buffers: ok"
