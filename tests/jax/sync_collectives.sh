#!/usr/bin/env bash
# Re-derives why tpusim lets a synchronous collective hold the TensorCore (app/hlo_import.cpp's
# blocking collectives; the step model's synchronous gradient all-reduce on a pure-FSDP mesh):
# the small compiled step (tests/data/compiled/small.yaml) with MaxText's v5e flags, read in
# libtpu's final VLIW bundles. The top-level program calls each synchronous all-reduce as an
# inlined program of its own, which sends around a clockwise and a counter-clockwise ring, waits
# for both rings' receives and adds on the TensorCore's vector unit (vadd.f32): the core does the
# reduction, so nothing else runs beside it. tpusim's import counts the backward loop's
# all-reduce as synchronous.
# Usage: sync_collectives.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

flags=$($py -c "import json, sys; print(json.load(open(sys.argv[1]))['libtpu_init_args'])" \
  "$src/scenarios/compiled/steps/c3_42_v5e_maxtext-32b.json")
# shellcheck disable=SC2046
(cd "$src/python" && LIBTPU_INIT_ARGS="$flags $(bundles_flags "$dir/jf")" $py -m tpusim_jax compile-step \
  $("$tpusim" export maxtext "$src/tests/data/compiled/small.yaml") -o "$dir/small.json" \
  --hlo "$dir/small.hlo.gz" >"$dir/log" 2>&1)

top=$(ls "$dir"/jf/*-TLP-01-final_bundles.txt)
called=$(grep -o 'inlined_call [^/]*/\* %all-reduce\.[0-9]* = all-reduce' "$top" |
  grep -o 'all-reduce\.[0-9]*' | sort -u)
[ -n "$called" ]
for ar in $called; do
  program=$(ls "$dir"/jf/*-"$ar"-01-final_bundles.txt)
  cw=$(grep -c 'shard-cw-recv-wait' "$program")
  ccw=$(grep -c 'shard-ccw-recv-wait' "$program")
  adds=$(grep -o 'vadd\.f32' "$program" | wc -l)
  echo "$ar: an inlined program, ring receives waited: $cw clockwise, $ccw counter-clockwise; vadd.f32: $adds"
  [ "$cw" -gt 0 ] && [ "$ccw" -gt 0 ] && [ "$adds" -gt 0 ]
done

"$tpusim" run --hlo "$dir/small.hlo.gz" --chip v5e >"$dir/run"
grep "^while .*transpose(jvp())/while" "$dir/run" | grep -q ": [0-9]* trips, .* 1 synchronous"
echo "sync_collectives: ok"
