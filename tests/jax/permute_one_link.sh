#!/usr/bin/env bash
# Re-derives why tpusim charges a collective-permute one ICI link (app/hlo_collectives.cpp: one
# hop to a neighbour over one link; the windowed einsums of C5 #44's tensor-parallel step are
# made of such permutes): a synchronous ppermute of bf16[1024, 8192] around the 16-chip tensor
# axis of a v5e:16x16 mesh (fsdp 16 x tensor 16, as #44's), read in libtpu's final VLIW bundles.
# The permute's program has one block per link direction (N, W, S, E), each predicated on the
# routing table read at run time, and every DMA of every block moves the whole array: the array
# goes out over the one direction that leads to its target, not split over several links.
# Usage: permute_one_link.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

cat >"$dir/permute.py" <<'PY'
import sys

import jax
import jax.numpy as jnp
from jax.experimental import mesh_utils
from jax.sharding import Mesh, PartitionSpec as P

from tpusim_jax.compile import topology

devices = mesh_utils.create_device_mesh((16, 16), devices=topology("v5e:16x16").devices)
mesh = Mesh(devices, ("fsdp", "tensor"))
ring = [(i, (i + 1) % 16) for i in range(16)]
step = jax.jit(jax.shard_map(lambda a: jax.lax.ppermute(a, "tensor", ring) * 2, mesh=mesh,
                             in_specs=P("fsdp", "tensor"), out_specs=P("fsdp", "tensor")))
compiled = step.lower(jax.ShapeDtypeStruct((16 * 1024, 16 * 8192), jnp.bfloat16)).compile()
open(sys.argv[1], "w").write(compiled.as_text())
PY
(cd "$src/python" && LIBTPU_INIT_ARGS="$(bundles_flags "$dir/jf")" $py "$dir/permute.py" \
  "$dir/permute.hlo" >"$dir/log" 2>&1)

name=$(grep -o '%[a-z.0-9]* = bf16\[1024,8192\][^ ]* collective-permute(' "$dir/permute.hlo" |
  grep -o '^%[a-z.0-9]*' | tr -d '%')
[ -n "$name" ]
program=$(ls "$dir"/jf/*-"$name"-01-final_bundles.txt)
directions=$(grep -o 'Transfer is scheduled for direction [NSEW]' "$program" | awk '{print $NF}' |
  sort | tr -d '\n')
sizes=$(grep -o 'dma.general .*size_in_granules=\*/[0-9]*' "$program" | grep -o '[0-9]*$' | sort -u)
echo "$name: blocks for directions $directions; DMA sizes (32-byte granules): $sizes"
[ "$directions" = "ENSW" ]
[ "$sizes" = "$((1024 * 8192 * 2 / 32))" ]  # every transfer is the whole array
"$tpusim" run --hlo "$dir/permute.hlo" --chip v5e >"$dir/run"
echo "permute_one_link: ok"
