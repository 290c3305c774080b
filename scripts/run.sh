#!/usr/bin/env bash
# The main job: build if needed, then run the calibration batch and print predicted against
# measured (and the blind predictions).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
exec build/tpusim calibrate
