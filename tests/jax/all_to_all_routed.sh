#!/usr/bin/env bash
# Re-derives why tpusim costs an all-to-all over every torus dimension its group spans
# (app/hlo_collectives.cpp), not as a ring: the embedding's all-to-all of the compiled steps
# (bf16[256,2,4096,32] over the 256 chips of a 16 x 16 mesh, C5 #11's) compiled for v6e:16x16,
# read in libtpu's final VLIW bundles. Its AllToAllEmitter program builds a table of transfers
# with scalar stores and issues them from one remote DMA (hbm-to-hbm) in a loop: each destination
# gets its share directly, and the ICI routers carry it hop by hop over the links of both
# dimensions, where a ring would pass every share through its neighbours. tpusim's import then
# takes it about 15 times faster than a 256-chip ring would (the dimension-ordered mean path).
# Usage: all_to_all_routed.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

cat >"$dir/a2a.py" <<'PY'
import sys

import jax
import jax.numpy as jnp
from jax.experimental import mesh_utils
from jax.sharding import Mesh, PartitionSpec as P

from tpusim_jax.compile import topology

devices = mesh_utils.create_device_mesh((256, 1, 1), devices=topology("v6e:16x16").devices)
mesh = Mesh(devices, ("fsdp", "a", "b"))
step = jax.jit(jax.shard_map(lambda a: jax.lax.all_to_all(a, "fsdp", 0, 0, tiled=True) * 2,
                             mesh=mesh, in_specs=P("fsdp"), out_specs=P("fsdp")))
compiled = step.lower(jax.ShapeDtypeStruct((256 * 256, 2, 4096, 32), jnp.bfloat16)).compile()
open(sys.argv[1], "w").write(compiled.as_text())
PY
(cd "$src/python" && LIBTPU_INIT_ARGS="$(bundles_flags "$dir/jf")" $py "$dir/a2a.py" \
  "$dir/a2a.hlo" >"$dir/log" 2>&1)

grep -q 'all-to-all(.*"emitter":"AllToAllEmitter"' "$dir/a2a.hlo"
program=$(ls "$dir"/jf/*-all_to_all*-01-final_bundles.txt)
remote=$(grep -c 'dma.general .*hbm-to-hbm' "$program")
in_loop=$(grep -c '>> .*dma.general .*hbm-to-hbm' "$program")
echo "all-to-all: $remote remote DMA instruction(s), $in_loop of them in a loop"
[ "$remote" -ge 1 ] && [ "$in_loop" -eq "$remote" ]
"$tpusim" run --hlo "$dir/a2a.hlo" --chip v6e >"$dir/run"
# 128 MiB per chip: over both dimensions (mean path 256 / 60 links per dimension, both
# directions of 2 x 2 links) about 4 ms on v6e; as a 256-chip ring it would be about 64 ms.
ms=$(grep -o '^chip v6e  time [0-9.]* ms' "$dir/run" | awk '{print $4}')
echo "tpusim: $ms ms"
awk -v t="$ms" 'BEGIN { exit !(t > 1 && t < 16) }'
echo "all_to_all_routed: ok"
