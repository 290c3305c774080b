#!/usr/bin/env bash
# Re-derives each chip's hbm_efficiency (models/chips/*.yaml) from the TPU compiler's cost model:
# compile x + 1 over f32[8192, 8192] for the chip's topology and turn the fusion's
# estimated_cycles into bytes per second at the chip file's clock, against its nominal rate.
# Usage: hbm_rate.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

for topology in v5e:2x2 v6e:2x2 v5p:2x2x1; do
  chip=${topology%%:*}
  $py -m tpusim_jax compile "$src/python/tests/kernels_for_tests.py:add_one" --topology "$topology" \
    --arg x=8192x8192:f32 -o "$dir/$chip" 2>"$dir/log"
  "$tpusim" chip "$chip" --json "$dir/$chip.json" >/dev/null 2>&1
  $py - "$dir/$chip/optimized.hlo" "$dir/$chip.json" <<'PY'
import json, re, sys
cycles = [int(c) for c in re.findall(r'"estimated_cycles":"(\d+)"', open(sys.argv[1]).read())]
assert len(cycles) == 1, cycles  # one fusion
spec = json.load(open(sys.argv[2]))
value = lambda key: float(spec["values"][key]["value"])
moved = 2 * 8192 * 8192 * 4  # read and written
derived = moved / (cycles[0] / value("clock_hz")) / value("hbm_bytes_per_s")
recorded = value("hbm_efficiency")
print(f"{spec['chip']}: {cycles[0]} estimated cycles -> hbm_efficiency {derived:.3f} (chip file {recorded})")
assert abs(derived - recorded) < 0.005, (derived, recorded)
PY
done
