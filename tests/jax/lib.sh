# Sourced by the jax-labelled test scripts (source "$(dirname "$0")/lib.sh" "$@"): their two
# arguments, TPUSIM and SOURCE_DIR, the bridge's Python, and a scratch folder $dir removed on exit
# whose log files are printed when a step fails.
set -euo pipefail
tpusim=$1
src=$2
py="$src/.venv/bin/python"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
trap 'cat "$dir"/log "$dir"/err 2>/dev/null' ERR

# libtpu's flags that dump the final VLIW bundles of every compiled program into DIR.
bundles_flags() {  # DIR
  $py -c "import sys; from tpusim_jax.bundles import dump_flags; print(dump_flags(sys.argv[1]))" "$1"
}

# The inversion ladder (python/examples/gdn_invert_ladder.py) compiled for TOPOLOGY on the f32 input
# SHAPE into OUT, with libtpu's final VLIW bundles of every program dumped into OUT.jf.
compile_ladder_with_bundles() {  # TOPOLOGY SHAPE OUT
  LIBTPU_INIT_ARGS="$(bundles_flags "$3.jf")" \
    $py -m tpusim_jax compile "$src/python/examples/gdn_invert_ladder.py:invert_ladder" \
    --topology "$1" --arg "s=$2:f32" -o "$3" >"$dir/log" 2>&1
}
