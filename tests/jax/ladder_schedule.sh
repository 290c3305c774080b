#!/usr/bin/env bash
# What the TPU compiler's own schedule says one grid step of the inversion ladder costs (8 tiles at
# C 128, python/examples/gdn_invert_ladder.py), beside tpusim's simulation of the same step
# (docs/kernels/gdn.md, "The ladder in the compiler's schedule"). Re-derives the documented facts:
# the final bundle count of the kernel (libtpu's LLO dump, `--xla_jf_dump_to`), and that on v5e and
# v5p it is within 1% of half the kernel's vector ALU instructions (the schedule is bound by two ALU
# slots per cycle; the MXU pushes and pops hide under them); prints tpusim's cycles for the step.
# Usage: ladder_schedule.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

for topology in v5e:2x2 v5p:2x2x1 v6e:2x2; do
  chip=${topology%%:*}
  compile_ladder_with_bundles "$topology" 1x8x1x128x128 "$dir/$chip"
  "$tpusim" kernel gdn-invert --chip "$chip" --seq 1024 --heads 1 --tile-n 8 --json "$dir/$chip.sim.json" >/dev/null
done
$py - "$dir" <<'PY'
import glob, json, re, sys
d = sys.argv[1]
ALU = ("vpack", "vunpack", "vadd", "vsub", "vselect", "vcmp", "vmand", "vdiv", "vrem")
for chip in ("v5e", "v5p", "v6e"):
    text = open(glob.glob(f"{d}/{chip}.jf/*gdn_invert_unit_lower*schedule-analysis_final_bundles.txt")[0]).read()
    bundles = int(re.search(r"total scheduled bundles:\s*(\d+)", text).group(1))
    ops = json.load(open(f"{d}/{chip}/compile.json"))["pallas_kernels"][0]["llo_ops"]
    alu = sum(ops.get(f"llo.{k}", 0) for k in ALU)
    sim = json.load(open(f"{d}/{chip}.sim.json"))
    hz = sim["clock_hz"]
    device = (sim["time_s"] - sim["stall_s"]["dispatch"]) * hz
    busy, vpu = sim["core_busy_s"] * hz, sim["busy_s"]["tc0.vpu"] * hz
    print(f"{chip}: {bundles} bundles, {alu} vector ALU instructions ({alu / 2:.0f} at two a cycle), "
          f"{ops.get('llo.vmatmul', 0)} vmatmul; tpusim: {device:.0f} cycles on the device, "
          f"{busy:.0f} busy ({busy / bundles:.2f}x the bundles), {vpu:.0f} of vector unit")
    if chip != "v6e":
        assert abs(bundles - alu / 2) <= 0.01 * bundles, (chip, bundles, alu)
PY
