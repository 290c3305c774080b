#!/usr/bin/env bash
# End to end through the JAX bridge: export a user's Pallas kernel, a matmul, masks, the GDN
# ladder and scan (forward and backward) with JAX's outputs on random inputs, import them into
# tpusim, simulate them and check the interpreter against JAX; export MaxText's GDN main path
# (work outside kernels) and compare its work with the compiled program's. Usage: export_import.sh TPUSIM
# SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

$py -m tpusim_jax export "$src/python/examples/layer_norm.py:layer_norm" \
  --arg x=512x256:bf16 --arg g=1x256:bf16 -o "$dir/ln.json" --check "$dir/ln.check.json"
out=$("$tpusim" kernel import "$dir/ln.json" --check "$dir/ln.check.json" --json "$dir/ln.out.json")
echo "$out"
grep -q "functional check layer_norm_kernel.out0: .*: ok" <<<"$out"
grep -q '"program": "layer_norm"' "$dir/ln.out.json"

# An f32 matmul at DEFAULT precision: tpusim rounds the operands to bf16 as the TPU does, JAX on
# the CPU does not; the check's tolerance allows for it.
$py -m tpusim_jax export "$src/python/tests/kernels_for_tests.py:matmul" \
  --arg x=128x256:f32 --arg y=256x256:f32 -o "$dir/mm.json" --check "$dir/mm.check.json"
out=$("$tpusim" kernel import "$dir/mm.json" --check "$dir/mm.check.json")
echo "$out"
grep -q "functional check _matmul_kernel.out0: .*: ok" <<<"$out"
grep -q "^work 16.78 MFLOP " <<<"$out"  # 2 x 128 x 256 x 256 = 16777216

# A fori_loop in the body, unrolled: each trip reads one slab of the block.
$py -m tpusim_jax export "$src/python/tests/kernels_for_tests.py:fori_sum" \
  --arg x=8x8x128:f32 -o "$dir/fori.json" --check "$dir/fori.check.json"
out=$("$tpusim" kernel import "$dir/fori.json" --check "$dir/fori.check.json")
grep -q "functional check _sum_rows_kernel.out0: .*: ok" <<<"$out"

# Masks as JAX builds them (iotas, floor division, comparisons, where) against JAX, exactly.
for f in causal_mask sibling_mask; do
  $py -m tpusim_jax export "$src/python/tests/kernels_for_tests.py:$f" \
    --arg s=128x128:f32 -o "$dir/$f.json" --check "$dir/$f.check.json"
  # Whole output first: grep -q leaving early would break tpusim's pipe (pipefail).
  out=$("$tpusim" kernel import "$dir/$f.json" --check "$dir/$f.check.json")
  grep -q "max |error| 0 of" <<<"$out"
done

# The GDN inversion ladder written in Pallas (python/examples/gdn_invert_ladder.py) on strictly
# lower inputs: tpusim's interpreter (bf16x3 products) agrees with JAX to f32 accuracy.
$py -m tpusim_jax export "$src/python/examples/gdn_invert_ladder.py:invert_ladder" \
  --arg S=1x8x2x64x64:f32 -o "$dir/ladder.json" --check "$dir/ladder.check.json" \
  --inputs "$src/python/examples/gdn_invert_ladder.py:strictly_lower"
out=$("$tpusim" kernel import "$dir/ladder.json" --check "$dir/ladder.check.json")
echo "$out" | head -1
awk '/functional check/ { found = 1; e = $6 + 0 } END { exit !(found && e < 1e-5) }' <<<"$out"

# The GDN inter-chunk scan forward and backward (python/examples/gdn_scan.py) on inputs a
# training step meets: state handed over in VMEM scratch across the chunk axis, pl.when at the
# first and last chunk; tpusim's interpreter (bf16 products as the TPU runs them) within the
# check's tolerance of JAX's.
chunk=1x3x8x64x128
$py -m tpusim_jax export "$src/python/examples/gdn_scan.py:scan_fwd" \
  --arg w=$chunk:bf16 --arg u=$chunk:bf16 --arg q=$chunk:bf16 --arg k=$chunk:bf16 \
  --arg g=1x3x8x64x1:f32 --arg h0=1x8x128x128:f32 -o "$dir/scan.json" \
  --check "$dir/scan.check.json" --inputs "$src/python/examples/gdn_scan.py:scan_inputs"
out=$("$tpusim" kernel import "$dir/scan.json" --check "$dir/scan.check.json")
echo "$out" | grep "functional check"
[ "$(grep -c 'functional check gdn_scan_fwd.out[012]: .*: ok' <<<"$out")" -eq 3 ]
$py -m tpusim_jax export "$src/python/examples/gdn_scan.py:scan_bwd" \
  --arg w=$chunk:bf16 --arg u=$chunk:bf16 --arg q=$chunk:bf16 --arg k=$chunk:bf16 \
  --arg g=1x3x8x64x1:f32 --arg h_saved=1x3x8x128x128:f32 --arg do=$chunk:bf16 \
  --arg dh_final=1x8x128x128:f32 -o "$dir/scan_bwd.json" --check "$dir/scan_bwd.check.json" \
  --inputs "$src/python/examples/gdn_scan.py:scan_bwd_inputs"
out=$("$tpusim" kernel import "$dir/scan_bwd.json" --check "$dir/scan_bwd.check.json")
echo "$out" | grep "functional check"
[ "$(grep -c 'functional check gdn_scan_bwd.out[0-5]: .*: ok' <<<"$out")" -eq 6 ]

# MaxText's GDN main path (work outside kernels: fusions, the lax.scan over chunks, the solve)
# exported from its jaxpr does the same work as the compiled program of the same function and
# shape imported from its HLO (tests/data/hlo/gdn_main_path): 150.99 MFLOP both ways.
$py -m tpusim_jax export "$src/python/examples/maxtext_gdn.py:main_path" \
  --arg q=1x256x2x128:bf16 --arg k=1x256x2x128:bf16 --arg v=1x256x2x128:bf16 \
  --arg g=1x256x2:f32 --arg beta=1x256x2:bf16 -o "$dir/main.json"
out=$("$tpusim" kernel import "$dir/main.json")
echo "$out" | head -2
compiled=$("$tpusim" run --hlo "$src/tests/data/hlo/gdn_main_path" | grep "^work ")
[ "$(grep "^work " <<<"$out" | cut -d' ' -f1-3)" = "$(cut -d' ' -f1-3 <<<"$compiled")" ]
grep -q "InvertDiagBlocksLowerTriangular" <<<"$out"

# A refused export writes nothing and names the primitive; a bad program file is one error line.
if $py -m tpusim_jax export "$src/python/tests/test_xla_export.py:sort_outside" \
  --arg x=8x128:f32 -o "$dir/bad.json" 2>"$dir/err"; then exit 1; fi
grep -q "primitive 'sort' outside a Pallas kernel" "$dir/err"
[ ! -e "$dir/bad.json" ]
echo '{"format": "tpusim-program", "version": 1}' >"$dir/bad.json"
if "$tpusim" kernel import "$dir/bad.json" 2>"$dir/err"; then exit 1; fi
[ "$(wc -l <"$dir/err")" -eq 1 ]
grep -q "bad.json:1:1: key 'name': missing" "$dir/err"
echo "export_import: ok"
