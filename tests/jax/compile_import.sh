#!/usr/bin/env bash
# End to end through the compiler: compile a JAX function and a Pallas kernel for a v5e topology
# with libtpu on this TPU-less host, import the optimized HLO into tpusim and simulate it.
# Usage: compile_import.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

$py -m tpusim_jax compile "$src/python/tests/kernels_for_tests.py:dot_tanh" --topology v5e:2x2 \
  --arg x=256x512:bf16 --arg y=512x256:bf16 -o "$dir/dot" 2>"$dir/log"
grep -q "compiled .*dot_tanh for v5e:2x2 (TPU v5 lite)" "$dir/log"
out=$("$tpusim" run --hlo "$dir/dot")
echo "$out" | head -2
grep -q "^work 67.11 MFLOP " <<<"$out"
grep -q "^compiler (TPU v5 lite for v5e:2x2, libtpu " <<<"$out"

# A Pallas kernel: Mosaic's scoped VMEM and lowered instruction mix land in compile.json, and the
# custom call runs as the exported kernel.
chunk=1x2x2x128x128
$py -m tpusim_jax compile "$src/python/examples/gdn_scan.py:scan_fwd" --topology v5e:2x2 \
  --arg w=$chunk:bf16 --arg u=$chunk:bf16 --arg q=$chunk:bf16 --arg k=$chunk:bf16 \
  --arg g=1x2x2x128x1:f32 --arg h0=1x2x128x128:f32 -o "$dir/scan" 2>"$dir/log"
$py - "$dir/scan/compile.json" <<'PY'
import json, sys
kernels = json.load(open(sys.argv[1]))["pallas_kernels"]
assert [k["name"] for k in kernels] == ["gdn_scan_fwd"], kernels
assert kernels[0]["scoped_vmem_bytes"] > 0 and kernels[0]["llo_ops"].get("llo.vmatmul", 0) > 0
PY
"$tpusim" run --hlo "$dir/scan" --json "$dir/scan.json" >/dev/null
grep -q '"name": "gdn_scan_fwd"' "$dir/scan.json"

# Errors are one line: a topology libtpu does not know, and HLO text that does not parse.
if $py -m tpusim_jax compile "$src/python/tests/kernels_for_tests.py:dot_tanh" \
  --topology v9z:1x1 --arg x=8x128:f32 --arg y=128x128:f32 -o "$dir/bad" 2>"$dir/err"; then
  exit 1
fi
[ "$(wc -l <"$dir/err")" -eq 1 ]
grep -q "^tpusim_jax: error: --topology v9z:1x1: libtpu refused it" "$dir/err"
[ ! -e "$dir/bad" ]
printf 'ENTRY %%m () -> f32[] {\n  %%x = f32[2 add()\n}\n' >"$dir/bad.hlo"
if "$tpusim" run --hlo "$dir/bad.hlo" 2>"$dir/err"; then exit 1; fi
[ "$(wc -l <"$dir/err")" -eq 1 ]
grep -q "bad.hlo:2:" "$dir/err"
echo "compile_import: ok"
