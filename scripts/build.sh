#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds tpusim into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ -f build/CMakeCache.txt ] || cmake --preset release >/dev/null
cmake --build build -j "$(nproc)"
