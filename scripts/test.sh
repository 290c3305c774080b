#!/usr/bin/env bash
# Build if needed, then run the test suite (tests labelled "slow" are skipped; run them with
# `ctest --test-dir build -L slow`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -LE slow -j "$(nproc)"
