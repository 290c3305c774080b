#!/usr/bin/env bash
# Re-derives the chip files' xla_row_solve_step_scale evidence: libtpu's static cost model
# (`--xla_jf_dump_static_llo_profile_to`) for XLA's InvertDiagBlocksLowerTriangular, the custom call
# jax.scipy.linalg.solve_triangular becomes on TPU, compiled for 32 and 64 [128, 128] f32 blocks on
# each chip: its estimated cycles per block (the difference over 32 blocks) are 15,371 on v5e,
# 18,155 on v6e and 15,387 on v5p.
# Usage: solve_estimate.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

cat >"$dir/solve.py" <<'PY'
import jax
import jax.numpy as jnp


def solve(s):
    eye = jnp.eye(s.shape[-1], dtype=s.dtype)
    return jax.scipy.linalg.solve_triangular(eye + jnp.tril(s, -1), jnp.broadcast_to(eye, s.shape),
                                             lower=True, unit_diagonal=True)
PY
estimate() {  # chip topology, blocks: the custom call's estimated cycles
  LIBTPU_INIT_ARGS="--xla_jf_dump_static_llo_profile_to=$dir/p.$1.$2" \
    $py -m tpusim_jax compile "$dir/solve.py:solve" --topology "$1" --arg "s=$2x128x128:f32" \
    -o "$dir/c" >"$dir/log" 2>&1
  grep -h -A1 'hlo_op_name: "custom-call' "$dir"/p."$1"."$2"/*.textproto |
    sed -n 's/.*estimated_cycles: //p'
}
for pair in v5e:2x2=15371 v6e:2x2=18155 v5p:2x2x1=15387; do
  topology=${pair%%=*}
  per_block=$((($(estimate "$topology" 64) - $(estimate "$topology" 32)) / 32))
  echo "${topology%%:*}: $per_block cycles per block"
  [ "$per_block" -eq "${pair##*=}" ]
done
