#!/usr/bin/env bash
# Re-derives how tpusim moves a weight's FSDP gather (models/parallel/collective_plan.cpp, the
# chips' synchronous_weight_gather, app/hlo_collectives.cpp): a scan of two [E, H, D] weights
# sharded over 256 chips (bf16, E 4096 over fsdp 256, as MaxText's attention projections), compiled
# for v5e:16x16 and v6e:16x16 with MaxText's flags for the chip (async collective fusion), read in
# libtpu's final VLIW bundles.
# - The asynchronous gathers (async collective fusions, no emitter named) forward shards inside
#   the fusion that carries them: two receives per step, one from each neighbour round one ring.
# - On v5e the synchronous gather names AllGatherWithNetRouterEmitter, whose program sends each
#   shard in all four link directions (N, W, S, E): over both torus dimensions.
# - On v6e the synchronous gathers name 1-D emitters (1DAllGather...): one ring; its asynchronous
#   ones are carried as on v5e.
# - Every carrying fusion first runs a scalar loop over the gather's 256 devices (it checks the
#   ring's routing table): 27 bundles a trip on v5e, 12 on v6e, from its first bundle through its
#   back branch and the branch's 4 delay bundles (the chips' async_collective_setup_cycles_per_device).
# Usage: weight_gathers.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

cat >"$dir/gathers.py" <<'PY'
import sys

import jax
import jax.numpy as jnp
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from tpusim_jax.compile import topology

mesh = Mesh(mesh_utils.create_device_mesh((256,), devices=topology(sys.argv[2]).devices), ("fsdp",))
E, H, D, F, LAYERS = 4096, 32, 512, 16384, 4


def layer(x, w):
    wq, wo, wi, wd = w
    h = jax.nn.silu(jnp.einsum("bse,ehd->bhsd", x, wq))
    x = x + jnp.einsum("bhsd,hde->bse", h, wo)
    return x + jax.nn.silu(x @ wi) @ wd, None


def step(x, *weights):
    return jax.lax.scan(layer, x, weights)[0]


shard = lambda *spec: NamedSharding(mesh, P(*spec))
f = jax.jit(step, in_shardings=(shard("fsdp"), shard(None, "fsdp"), shard(None, None, None, "fsdp"),
                                shard(None, "fsdp"), shard(None, None, "fsdp")),
            out_shardings=shard("fsdp"))
weight = lambda *shape: jax.ShapeDtypeStruct((LAYERS,) + shape, jnp.bfloat16)
compiled = f.lower(jax.ShapeDtypeStruct((256, 4096, E), jnp.bfloat16), weight(E, H, D),
                   weight(H, D, E), weight(E, F), weight(F, E)).compile()
open(sys.argv[1], "w").write(compiled.as_text())
PY

flags_of() {  # a compiled step's recorded LIBTPU_INIT_ARGS (MaxText's flags for its chip)
  $py -c "import json, sys; print(json.load(open(sys.argv[1]))['libtpu_init_args'])" \
    "$src/scenarios/compiled/steps/$1.json"
}
compile() {  # TOPOLOGY STEM: the scan compiled into $dir/STEM.hlo, its bundles into $dir/STEM.jf
  (cd "$src/python" && LIBTPU_INIT_ARGS="$(flags_of "$2") $(bundles_flags "$dir/$1.jf")" \
    $py "$dir/gathers.py" "$dir/$1.hlo" "$1" >"$dir/log" 2>&1)
}
# The carriers of the asynchronous gathers: fusions with the two ring receives of a shard.
ring_carriers() {  # TOPOLOGY
  local n=0 f
  for f in "$dir/$1.jf"/*fusion*-01-final_bundles.txt; do
    [ "$(grep -c 'shard-recv-wait' "$f")" -eq 2 ] && n=$((n + 1))
  done
  echo "$n"
}
# Each carrier's first loop, as "bundles-per-trip x trips" (one line per distinct form): from its
# LB bundle through its back branch, and the branch's 4 delay bundles.
setup_loops() {  # TOPOLOGY
  $py - "$dir/$1.jf" <<'PY' | sort -u
import glob, re, sys
for path in glob.glob(sys.argv[1] + "/*fusion*-01-final_bundles.txt"):
    text = open(path).read()
    if text.count("shard-recv-wait") != 2:
        continue
    lb = trips = None
    for line in text.splitlines():
        m = re.match(r"^\s*(0x[0-9a-f]+)", line)
        if not m:
            continue
        a = int(m.group(1), 16)
        if lb is None and " LB: " in line:
            lb = a
        exit_test = re.search(r", (\d+) /\* loop exit test", line)
        if lb is not None and trips is None and exit_test:
            trips = int(exit_test.group(1))
        if trips is not None and "sbr.rel" in line:
            print(f"{a - lb + 1 + 4} x {trips}")
            break
PY
}

compile v5e:16x16 c1_main
grep -q 'async-collective-start' "$dir/v5e:16x16.hlo"
routed=$(grep -o '%all-gather\.[0-9]* = [^ ]* all-gather(.*"emitter":"AllGatherWithNetRouterEmitter"' \
  "$dir/v5e:16x16.hlo" | grep -o '^%all-gather\.[0-9]*' | tr -d '%')
[ -n "$routed" ]
directions=$(grep -o 'Transfer is scheduled for direction [NSEW]' \
  "$dir"/v5e:16x16.jf/*-"$routed"-01-final_bundles.txt | awk '{print $NF}' | sort | tr -d '\n')
v5e_carriers=$(ring_carriers v5e:16x16)
echo "v5e: synchronous $routed routed in directions $directions; $v5e_carriers ring-carrying fusions"
[ "$directions" = "ENSW" ] && [ "$v5e_carriers" -ge 1 ]
echo "v5e: carriers' setup loop: $(setup_loops v5e:16x16)"
[ "$(setup_loops v5e:16x16)" = "27 x 256" ]

compile v6e:16x16 c5_11_v6e-256_llama2-70b
grep -q 'async-collective-start' "$dir/v6e:16x16.hlo"
emitters=$(grep -o '"emitter":"[A-Za-z0-9]*AllGather[A-Za-z0-9]*"' "$dir/v6e:16x16.hlo" | sort -u |
  tr '\n' ' ')
echo "v6e: synchronous gathers' emitters: $emitters; $(ring_carriers v6e:16x16) ring-carrying fusions"
[ -n "$emitters" ] && ! grep -q 'NetRouter' <<<"$emitters" && grep -q '1DAllGather' <<<"$emitters"
[ "$(ring_carriers v6e:16x16)" -ge 1 ]
echo "v6e: carriers' setup loop: $(setup_loops v6e:16x16)"
[ "$(setup_loops v6e:16x16)" = "12 x 256" ]
echo "weight_gathers: ok"
