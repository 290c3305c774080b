#!/usr/bin/env bash
# Re-derives the memory model's loss working set (models/memory/memory_model.cpp) from XLA's buffer
# assignment: the small dense step of tests/data/compiled/ (1024 tokens per chip, vocabulary 32000,
# width 1024) compiled with XLA_FLAGS=--xla_dump_to holds, in HBM slots of their own, the logits
# cast to f32 (f32[1,1024,32000]) and two bf16 arrays of 1024 x 32000 (the bf16 logits and the
# gathered output projection), and tpusim's peak item counts exactly those bytes.
# Usage: loss_buffers.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
data="$src/tests/data/compiled"
# shellcheck disable=SC2046
(cd "$src/python" && XLA_FLAGS="--xla_dump_to=$dir/dump" $py -m tpusim_jax compile-step \
  $("$tpusim" export maxtext "$data/small.yaml") -o "$dir/small.json" >"$dir/log" 2>&1)
"$tpusim" run "$data/small.yaml" --json "$dir/run.json" >"$dir/log" 2>&1
$py - "$dir"/dump/*jit_step*memory-usage-report.txt "$dir/run.json" <<'PY'
import json, math, re, sys
report, run = sys.argv[1:3]
tokens, vocab = 1024, 32000
slots = []  # (bytes, [(dtype, elements), ...]) of the default (HBM) memory space
for line in open(report):
    if line.startswith("Memory Space:") and slots:
        break
    m = re.match(r"\s*[0-9.]+[KMG]?i?B\(\s*\d+%\);\s*([0-9.]+)([KMG]i)?B;.*; (.*)$", line)
    if not m:
        continue
    shapes = []
    for count, dtype, dims in re.findall(r"(?:(\d+)×)?(\w+)\[([0-9,]*)\]", m.group(3)):
        shapes += [(dtype, math.prod(int(d) for d in dims.split(",") if d))] * int(count or 1)
    scale = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}.get(m.group(2), 1)
    slots.append((round(float(m.group(1)) * scale), shapes))
f32 = [s for s in slots if ("f32", tokens * vocab) in s[1]]
bf16 = [s for s in slots if ("bf16", tokens * vocab) in s[1]]
print(f"f32 logits in {len(f32)} slot(s), bf16 [1024 x 32000] arrays in {len(bf16)} slot(s)")
assert f32 and f32[0][0] == 4 * tokens * vocab, f32
assert len(bf16) >= 2 and all(s[0] == 2 * tokens * vocab for s in bf16[:2]), bf16
peak = json.load(open(run))["memory"][-1]
print(f"tpusim: {peak['what']}: {peak['bytes']} bytes")
assert peak["what"].startswith("peak: logits"), peak
assert peak["bytes"] == f32[0][0] + bf16[0][0] + bf16[1][0], peak
PY
echo "loss_buffers: ok"
