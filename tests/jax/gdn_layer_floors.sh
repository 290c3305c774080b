#!/usr/bin/env bash
# Re-derives docs/kernels/gdn.md, "The layer against its compiled program": one GDN decoder layer
# of C1's heads build (python/examples/gdn_layer_train.py) compiled for v5e with --vliw-floors
# simulates at 81.9 ms with its ops' VLIW floors, 5.2 ms of it the floors as bundles.py counts them
# (the projections' and the MLP's dot fusions; an upper figure, their output-tile epilogues counted
# on every trip), beside the step model's "gdn layer" compute for C1 heads, which it prints.
# Usage: gdn_layer_floors.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

example="$src/python/examples/gdn_layer_train.py"
# shellcheck disable=SC2046
$py -m tpusim_jax compile "$example:heads" --topology v5e:2x2 --vliw-floors -o "$dir/heads" \
  $($py "$example") >"$dir/log" 2>&1
"$tpusim" run --hlo "$dir/heads" --vliw-floors --json "$dir/run.json" >"$dir/run"
grep "the compiled VLIW schedule as a floor" "$dir/run"
"$tpusim" run "$src/scenarios/calibration/c1/c1_heads.yaml" | grep "gdn layer  " | head -1
$py - "$dir/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
device_ms = (r["time_s"] - r["stall_s"]["dispatch"]) * 1e3
floors_ms = r["stall_s"]["vliw_schedule"] * 1e3
print(f"compiled heads layer: {device_ms:.1f} ms on the device, {floors_ms:.1f} ms of it floors")
assert abs(device_ms - 81.8) < 0.4 and abs(floors_ms - 5.2) < 0.2
PY
echo "gdn_layer_floors: ok"
