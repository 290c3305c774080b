#!/usr/bin/env bash
# Re-derives what app/hlo_work.cpp charges a reduction over the lanes: f32[4096,16,128] summed over
# its 128 lanes, compiled for v5e and read in libtpu's final VLIW bundles. The reduction's
# software-pipelined loop loads each vreg once (vld) and issues one cross-lane add (vadd.xlane)
# per loaded vreg, spread over the core's XLUs (xlu0, xlu1, ...), at about 3 bundles per vreg:
# the XLU's throughput, which tpusim charges as one cross-lane reduction per 8 rows.
# Usage: lane_reduction.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

cat >"$dir/sums.py" <<'PY'
import jax.numpy as jnp


def lane_sum(x):
    return jnp.sum(x, axis=-1)
PY
LIBTPU_INIT_ARGS="$(bundles_flags "$dir/jf")" $py -m tpusim_jax compile "$dir/sums.py:lane_sum" \
  --topology v5e:2x2 --arg x=4096x16x128:f32 -o "$dir/out" >"$dir/log" 2>&1

name=$(grep -o '%[a-z_.0-9]* = f32\[4096,16\][^ ]* reduce(' "$dir/out/optimized.hlo" |
  grep -o '^%[a-z_.0-9]*' | tr -d '%')
[ -n "$name" ]
program=$(ls "$dir"/jf/*-"$name"-01-final_bundles.txt)
# The loop body: from its first bundle (LB) to the loop's exit test.
awk '/ LB: /{body = 1} body {print} /loop exit test/ {if (body) exit}' "$program" >"$dir/body"
loads=$(grep -o '= vld ' "$dir/body" | wc -l)
xlane=$(grep -o 'vadd\.xlane' "$dir/body" | wc -l)
xlus=$(grep -o 'xlane\.f32\.xlu[0-9]' "$dir/body" | sort -u | wc -l)
bundles=$(grep -c '^ *0x[0-9a-f]* ' "$dir/body")
echo "$name loop body: $bundles bundles, $loads vregs loaded, $xlane cross-lane adds on $xlus XLUs"
[ "$xlane" -gt 0 ] && [ "$xlane" = "$loads" ] && [ "$xlus" -ge 2 ]
[ "$bundles" -lt $((4 * xlane)) ]  # throughput-bound: under 4 bundles per vreg
"$tpusim" run --hlo "$dir/out" >"$dir/run"
echo "lane_reduction: ok"
