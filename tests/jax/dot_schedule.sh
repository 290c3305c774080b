#!/usr/bin/env bash
# Re-derives what docs/compiler_import.md says of XLA's large dots in libtpu's final VLIW bundles:
# the dot fusion's loop issues each trip's vmatmul pushes in no more bundles than the four
# 128 x 128 MXUs of a v5e TensorCore need to run them, so the trip is MXU-bound, and tpusim's
# import of the same fusion runs it within 5% of the MXUs' time for all trips.
# Usage: dot_schedule.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

m=4096 k=8192 n=8192
LIBTPU_INIT_ARGS="$(bundles_flags "$dir/jf")" \
  $py -m tpusim_jax compile "$src/python/tests/kernels_for_tests.py:dot_tanh" --topology v5e:2x2 \
  --arg x=${m}x${k}:bf16 --arg y=${k}x${n}:bf16 -o "$dir/dot" >"$dir/log" 2>&1
"$tpusim" run --hlo "$dir/dot" --profile "$dir/profile.csv" >"$dir/run" 2>&1
"$tpusim" chip v5e --json "$dir/v5e.json" >/dev/null 2>&1

$py - "$dir/jf" "$dir/profile.csv" "$dir/v5e.json" $m $k $n <<'PY'
import csv, glob, json, re, sys
jf, profile, chip_json = sys.argv[1:4]
m, k, n = map(int, sys.argv[4:7])
programs = [f for f in glob.glob(jf + "/*-01-final_bundles.txt") if "vmatmul" in open(f).read()]
assert len(programs) == 1, programs  # the one dot fusion
name = re.match(r"\d+-(.*)-01-final_bundles\.txt", programs[0].split("/")[-1]).group(1)
rows = []  # (address, marker, text) of every bundle
for line in open(programs[0]):
    b = re.match(r"^\s*(0x[0-9a-f]+)\s*(LB|LH|LE|PB|PF)?\s*:", line)
    if b:
        rows.append((int(b.group(1), 16), b.group(2), line))
exits = [(a, int(re.search(r", (\d+) /\* loop exit test", t).group(1)))
         for a, _, t in rows if "loop exit test" in t]
assert len(exits) == 1, exits  # one loop over the tiles
end, trips = exits[0]
# The loop body in stretches between branches; the stretch holding the vmatmuls is the trip's
# hot path (the others issue DMAs and wait on flags, some only on some trips).
stretches, current = [], None
for a, marker, t in rows:
    if a > end:
        break
    if current is None or marker == "PF":
        current = {"bundles": 0, "vmatmul": 0}
        stretches.append(current)
    current["bundles"] += 1
    current["vmatmul"] += len(re.findall(r"= vmatmul", t))
    if "sbr.rel" in t:
        current = None
hot = max(stretches, key=lambda s: s["vmatmul"])
spec = json.load(open(chip_json))["values"]
value = lambda key: float(spec[key]["value"])
per_cycle = 2 * value("mxus_per_core") * value("mxu_dim") ** 2
mxu_cycles = 2 * m * k * n / (trips - 2) / per_cycle  # two trips fill and drain the pipeline
print(f"{name}: {trips} trips; a trip issues {hot['vmatmul']} vmatmuls in {hot['bundles']} "
      f"bundles; the MXUs need {mxu_cycles:.0f} cycles for them")
assert hot["bundles"] <= mxu_cycles, "the trip is not MXU-bound"
ops = {r["op"].split(" ")[0]: r for r in csv.DictReader(open(profile))}
tpusim_s = float(ops[name]["time_s"])
mxu_s = 2 * m * k * n / per_cycle / value("clock_hz")
print(f"tpusim runs it in {tpusim_s * 1e3:.3f} ms, the MXUs' time for all trips {mxu_s * 1e3:.3f} ms")
assert abs(tpusim_s / mxu_s - 1) < 0.05, (tpusim_s, mxu_s)
PY
echo "dot_schedule: ok"
