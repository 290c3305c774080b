#!/usr/bin/env bash
# Re-derives the megacore_split rule (models/chips/shared.yaml) from the compiler: the inversion
# ladder's grid (B, H, N / tile_n), every axis parallel, compiled for v5p and read in libtpu's final
# VLIW bundles (`--xla_jf_dump_to`), where each TensorCore's loop carries its own iteration bounds.
# At batch 1 the grid (1, 32, 4) runs (1, 16, 4) on each core: the head axis is split, the first
# axis the core count divides; at batch 2 the grid (2, 32, 4) runs (1, 32, 4): the batch axis is.
# Usage: megacore_split.sh TPUSIM SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

bounds() {  # the ladder's [B, 32 chunks, 32 heads, 128, 128] input: each core's iteration bounds
  compile_ladder_with_bundles v5p:2x2x1 "$1x32x32x128x128" "$dir/c$1"
  grep -ho 'iteration_bounds: ([0-9, ]*)' "$dir"/c"$1".jf/*gdn_invert_unit_lower*-final_bundles.txt | sort -u
}
[ "$(bounds 1)" = "iteration_bounds: (1, 16, 4)" ]
[ "$(bounds 2)" = "iteration_bounds: (1, 32, 4)" ]
# tpusim's rule deals the same axes: the head axis at batch 1, the batch axis at batch 2.
"$tpusim" chip v5p >"$dir/chip"
grep -q "megacore_split.*first_divisible_parallel" "$dir/chip"
echo "megacore_split: ok"
