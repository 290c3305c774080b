#!/usr/bin/env bash
# Re-derives each chip's vpu_cast_ops_per_vreg (models/chips/*.yaml) from Mosaic's lowered
# instructions: the inversion ladder (one grid step of 8 tiles at C 128) compiled for each chip,
# its vpack and vunpack counts against v6e's, which packs one vreg per instruction.
# Usage: cast_cost.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

for topology in v6e:2x2 v5e:2x2 v5p:2x2x1; do
  chip=${topology%%:*}
  $py -m tpusim_jax compile "$src/python/examples/gdn_invert_ladder.py:invert_ladder" \
    --topology "$topology" --arg s=1x8x1x128x128:f32 -o "$dir/$chip" 2>"$dir/log"
  "$tpusim" chip "$chip" --json "$dir/$chip.json" >/dev/null 2>&1
done
$py - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
ops = {c: json.load(open(f"{d}/{c}/compile.json"))["pallas_kernels"][0]["llo_ops"] for c in ("v6e", "v5e", "v5p")}
per_vreg = {c: float(json.load(open(f"{d}/{c}.json"))["values"]["vpu_cast_ops_per_vreg"]["value"]) for c in ops}
for c in ops:
    pack = ops[c]["llo.vpack"] / ops["v6e"]["llo.vpack"]
    unpack = ops[c]["llo.vunpack"] / ops["v6e"]["llo.vunpack"]
    print(f"{c}: {ops[c]['llo.vpack']} vpack, {ops[c]['llo.vunpack']} vunpack: {pack:g} and {unpack:g} per vreg (chip file {per_vreg[c]:g})")
    assert pack == unpack == per_vreg[c] / per_vreg["v6e"], (c, pack, unpack, per_vreg)
PY
