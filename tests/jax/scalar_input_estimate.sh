#!/usr/bin/env bash
# Re-derives what docs/kernels/gdn.md says of libtpu's static cost model
# (`--xla_jf_dump_static_llo_profile_to`) on ops inside a while loop, against the final VLIW bundles
# of the same ops:
#  - an op whose data is all in VMEM and that has no scalar operand is estimated at its bundle
#    count (here a relayout copy of f32 [32, 128, 128]: 2,312 bundles);
#  - each scalar operand (the loop index in memory space 6, `scalar_inputs` in the profile) adds a
#    fixed charge: 1,133 cycles on v5e, 546 on v6e, 704-744 on v5p.
# Usage: scalar_input_estimate.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

cat >"$dir/loops.py" <<'PY'
import jax.numpy as jnp
from jax import lax


def one_index(a, b):  # x <- 1.5 x + xs[i]: one fusion reading the loop index
    xs = a[:64].reshape(8, 8, 128)
    return lax.fori_loop(0, 8, lambda i, x: x * 1.5 + xs[i], b)


def two_indices(a, b):  # x <- 1.5 x + xs[i] ys[7 - i]: one fusion reading two indices
    xs, ys = a[:64].reshape(8, 8, 128), a[64:].reshape(8, 8, 128)
    return lax.fori_loop(0, 8, lambda i, x: x * 1.5 + xs[i] * ys[7 - i], b)


def relayout(a, b):  # carry [32, 128, 128] seen as [128, 32, 128] and swapped back: a VMEM copy
    del a
    return lax.fori_loop(0, 8, lambda i, x: jnp.swapaxes(x.reshape(128, 32, 128), 0, 1) * 1.5, b)
PY

# Every profiled op of FUNCTION compiled for TOPOLOGY: "name estimated_cycles scalar_inputs bundles".
profile() {  # TOPOLOGY FUNCTION B_SHAPE
  local out="$dir/$1.$2"
  LIBTPU_INIT_ARGS="--xla_jf_dump_static_llo_profile_to=$out.p $(bundles_flags "$out.jf")" \
    $py -m tpusim_jax compile "$dir/loops.py:$2" --topology "$1" --arg a=128x128:f32 \
    --arg "b=$3:f32" -o "$out" >"$dir/log" 2>&1
  for p in "$out".p/*.textproto; do
    read -r name cycles scalars < <(awk '/hlo_op_name/ {gsub(/"/, "", $2); n = $2}
      /estimated_cycles/ {c = $2} /scalar_inputs/ {s = $2} END {print n, c, s}' "$p")
    bundles=$(ls "$out".jf/*-"$name"-01-final_bundles.txt 2>/dev/null | head -1)
    [ -n "$bundles" ] || continue
    echo "$name $cycles $scalars $(grep -c '^ *\(0x[0-9a-f]\+\|0\) \+\([A-Z][A-Z]\)\?: ' "$bundles")"
  done
}

# The charge per scalar operand: (estimate - bundles) / scalars of the op that reads the index.
per_scalar() {  # TOPOLOGY FUNCTION
  profile "$1" "$2" 8x128 | awk '$3 > 0 {print int(($2 - $4) / $3)}'
}

for expected in v5e:2x2=1133,1133 v6e:2x2=546,546 v5p:2x2x1=744,704; do
  topology=${expected%%=*}
  got="$(per_scalar "$topology" one_index),$(per_scalar "$topology" two_indices)"
  echo "${topology%%:*}: $got cycles per scalar operand (one index, two indices)"
  [ "$got" = "${expected##*=}" ]
done

# The relayout copy in the loop body (VMEM to VMEM, no scalar operand): estimate and bundle count
# agree within a cycle.
ops=$(profile v5e:2x2 relayout 32x128x128)
body_copy=$(sed -n 's/^ *%\(copy[.0-9]*\) = .*op_name="[^"]*while\/body.*/\1/p' \
  "$dir/v5e:2x2.relayout/optimized.hlo")
read -r name cycles scalars bundles < <(grep "^$body_copy " <<<"$ops")
echo "v5e: $name, a VMEM relayout of f32 [32, 128, 128] in the loop: estimate $cycles, $bundles bundles"
[ "$scalars" -eq 0 ] && [ "$bundles" -eq 2312 ] && [ $((cycles - bundles)) -le 1 ] &&
  [ $((bundles - cycles)) -le 1 ]
