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
