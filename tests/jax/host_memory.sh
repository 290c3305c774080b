#!/usr/bin/env bash
# Re-derives the pinned host memory a chip's program may hold (models/chips/shared.yaml's
# pinned_host_bytes) and what of a layer the remat policy's offload stores there
# (models/memory/memory_model.cpp, docs/step_model.md "Pinned host memory"):
# - a scan whose remat offloads one 1 GiB activation a layer is refused at 140 layers on v5e, v6e
#   and v5p alike, the stack "would exceed memory (size=137438953472)": 128 GiB;
# - with two such activations it compiles at 60 layers (120 GiB) and is refused at 70 (140 GiB,
#   each stack 70): the limit bounds everything offloaded at once, not each buffer;
# - the small compiled step (tests/data/compiled/small.yaml) offloads 8 MiB with out_proj=offload
#   (4 layers x [1024, 1024] bf16) and nothing with mlpwo=offload: a dense MLP's down projection
#   is never a residual.
# Usage: host_memory.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

cat >"$dir/offload.py" <<'PY'
import re
import sys

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from tpusim_jax.compile import topology

name, layers, names = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
mesh = Mesh([topology(name).devices[0]], ("x",))
policy = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[], names_which_can_be_offloaded=names,
    offload_src="device", offload_dst="pinned_host")


def layer(x, w):  # x [65536, 128] bf16; each named activation [65536, 8192] bf16, 1 GiB
    h = checkpoint_name(jnp.tanh(x @ w), "h")
    g = checkpoint_name(jnp.sin(h), "g") if "g" in names else h
    return jnp.tanh((h * g) @ w.T), None


def loss(x, ws):
    return jax.lax.scan(jax.checkpoint(layer, policy=policy), x, ws)[0].sum()


rep = NamedSharding(mesh, P())
x = jax.ShapeDtypeStruct((65536, 128), jnp.bfloat16, sharding=rep)
ws = jax.ShapeDtypeStruct((layers, 128, 8192), jnp.bfloat16, sharding=rep)
try:
    jax.jit(jax.grad(loss, argnums=1)).lower(x, ws).compile()
    print("compiled")
except Exception as e:  # libtpu's out-of-memory errors are XlaRuntimeErrors
    m = re.search(r"would exceed memory \(size=(\d+)\)|Used [0-9.]+G of ([0-9.]+G) host", str(e))
    print(f"refused: {m.group(1) or m.group(2)}" if m else f"error: {str(e)[:300]}")
PY
offload() {  # TOPOLOGY LAYERS NAMES: "compiled", or "refused: " and the limit libtpu names
  (cd "$src/python" && $py "$dir/offload.py" "$@" 2>>"$dir/log" | tail -1)
}

for chip in v5e:2x2 v6e:2x2 v5p:2x2x1; do
  verdict=$(offload "$chip" 140 h)
  pinned=$("$tpusim" chip "${chip%%:*}" | awk '$1 == "pinned_host_bytes" {print $2}')
  echo "$chip, one 140 GiB stack offloaded: $verdict; tpusim's pinned_host_bytes $pinned"
  [ "$verdict" = "refused: $pinned" ]
done
verdict=$(offload v5e:2x2 60 h,g)
echo "v5e:2x2, two 60 GiB stacks offloaded: $verdict"
[ "$verdict" = "compiled" ]
verdict=$(offload v5e:2x2 70 h,g)
echo "v5e:2x2, two 70 GiB stacks offloaded: $verdict"
[ "$verdict" = "refused: 128.00G" ]

small=$("$tpusim" export maxtext "$src/tests/data/compiled/small.yaml" | sed 's/remat_policy=[a-z_]*//')
offloaded() {  # NAME: the MiB the small step offloads with remat_policy=custom NAME=offload
  # shellcheck disable=SC2086
  (cd "$src/python" && $py -m tpusim_jax compile-step $small remat_policy=custom \
    decoder_layer_input=device "$1=offload" -o "$dir/small.json" >>"$dir/log" 2>&1)
  $py -c "import json, sys; print(json.load(open(sys.argv[1]))['memory']['host_temp_bytes'] >> 20)" \
    "$dir/small.json"
}
out_proj=$(offloaded out_proj)
mlpwo=$(offloaded mlpwo)
echo "small step offloads: out_proj $out_proj MiB, mlpwo $mlpwo MiB"
[ "$out_proj" = 8 ] && [ "$mlpwo" = 0 ]
echo "host_memory: ok"
