#!/usr/bin/env bash
# Re-derives the VLIW floors of tests/data/hlo/qk_repeat (app/vliw_floors.h): the GDN layer's q/k
# head repeat and L2 norm (python/examples/gdn_qk_repeat.py) compiled for v5e with --vliw-floors
# records the same floor for every op as the checked-in compile, and the repeat's broadcast's floor
# is its final bundles' loop body times the loop's trip count plus the bundles outside the loop,
# counted here by awk apart from bundles.py. tpusim's import then says how much the floors add.
# Usage: vliw_floors.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

shapes=(--arg q=1x4096x16x128:bf16 --arg g=1x4096x32x128:bf16)
$py -m tpusim_jax compile "$src/python/examples/gdn_qk_repeat.py:repeat_l2norm_train" \
  --topology v5e:2x2 "${shapes[@]}" --vliw-floors -o "$dir/out" >"$dir/log" 2>&1
floors() { $py -c "import json, sys; print(json.load(open(sys.argv[1]))['vliw_floors']['cycles'])" "$1"; }
[ "$(floors "$dir/out/compile.json")" = "$(floors "$src/tests/data/hlo/qk_repeat/compile.json")" ]

# The same compile with the bundles kept: broadcast.12's program, by awk.
LIBTPU_INIT_ARGS="$(bundles_flags "$dir/jf")" $py -m tpusim_jax compile \
  "$src/python/examples/gdn_qk_repeat.py:repeat_l2norm_train" --topology v5e:2x2 "${shapes[@]}" \
  -o "$dir/kept" >"$dir/log" 2>&1
program=$(ls "$dir"/jf/*-broadcast.12-01-final_bundles.txt)
by_awk=$(awk '/^ *(0x[0-9a-f]+|0) +(LB:)? *[:>]/ {
    if ($0 ~ / LB:/) inside = 1
    if (inside) body++; else outside++
    if ($0 ~ /loop exit test/) { match($0, /, [0-9]+ \/\*/); trips = substr($0, RSTART + 2, RLENGTH - 5); inside = 0 }
  } END { print outside + body * trips }' "$program")
recorded=$($py -c "import json, sys; print(json.load(open(sys.argv[1]))['vliw_floors']['cycles']['broadcast.12'])" "$dir/out/compile.json")
echo "broadcast.12: $recorded cycles recorded, $by_awk by awk"
[ "$recorded" = "$by_awk" ]
"$tpusim" run --hlo "$dir/out" --vliw-floors | grep "the compiled VLIW schedule as a floor" | tee "$dir/run"
grep -q "14 kernels" "$dir/run"
echo "vliw_floors: ok"
