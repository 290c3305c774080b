#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds tpusim into build/: every target,
# or only the targets given (scripts/run.sh builds just the CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ -f build/CMakeCache.txt ] || cmake --preset release >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j "$(nproc)" "${targets[@]}"
