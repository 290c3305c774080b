#!/usr/bin/env bash
# `python -m tpusim_jax profile` captures a jax.profiler trace on this machine's CPU over
# MaxText's GDN main path, and `tpusim import profile` reads it as it reads the committed one
# (tests/data/profile/cpu_gdn_main_path.json.gz): the CPU device, one step and one module per
# call, the scan's while loop holding its iterations' ops; and XProf's .xplane.pb of the same
# run through `python -m tpusim_jax xplane-to-trace` gives the same op table.
# Usage: profile_capture.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
cd "$src/python"
shape=1x256x2x128
$py -m tpusim_jax profile examples/maxtext_gdn.py:main_path --arg q=$shape:bf16 \
  --arg k=$shape:bf16 --arg v=$shape:bf16 --arg g=1x256x2:f32 --arg beta=1x256x2:bf16 \
  --steps 2 -o "$dir/trace.json.gz" --xplane "$dir/run.xplane.pb" >"$dir/log" 2>"$dir/err"
"$tpusim" import profile "$dir/trace.json.gz" --json "$dir/summary.json" >"$dir/log" 2>"$dir/err"
grep -q "^/device:CPU:0: 2 steps, 2 modules, " "$dir/log"
$py - "$dir/summary.json" <<'PY'
import json, sys
ops = {o["name"]: o for o in json.load(open(sys.argv[1]))["devices"][0]["ops"]}
assert ops["while.1"]["holds_ops"] and ops["while.1"]["total_us"] == 0, ops["while.1"]
assert ops["triangular_solve.0"]["count"] == 2, ops["triangular_solve.0"]
PY
# XProf's own file of the same run, converted by the bridge, gives the same op table; the C++ core
# refuses the .xplane.pb itself with the command that converts it.
$py -m tpusim_jax xplane-to-trace "$dir/run.xplane.pb" -o "$dir/xplane.json.gz" 2>"$dir/err"
"$tpusim" import profile "$dir/xplane.json.gz" --json "$dir/xplane.json" >"$dir/log" 2>"$dir/err"
$py - "$dir/summary.json" "$dir/xplane.json" <<'PY'
import json, sys
perfetto, xplane = (json.load(open(p))["devices"] for p in sys.argv[1:])
for key in ("name", "steps", "modules"):
    assert [d[key] for d in perfetto] == [d[key] for d in xplane], key
totals = [{o["name"]: round(o["total_us"], 3) for o in d["ops"]} for d in (perfetto[0], xplane[0])]
assert totals[0] == totals[1], totals
PY
if "$tpusim" import profile "$dir/run.xplane.pb" >"$dir/log" 2>"$dir/err"; then exit 1; fi
grep -q "python -m tpusim_jax xplane-to-trace" "$dir/err"
if $py -m tpusim_jax xplane-to-trace "$src/README.md" -o "$dir/no.json.gz" 2>"$dir/err"; then exit 1; fi
[ "$(wc -l <"$dir/err")" -eq 1 ] && [ ! -e "$dir/no.json.gz" ] && grep -q "not an XProf profile" "$dir/err"
echo "profile_capture: ok"
