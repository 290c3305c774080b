#!/usr/bin/env bash
# The main job: build if needed, then run the calibration batches and the blind batch and print
# predicted against measured: the calibrated constants with their data (v5e matmul table and
# blind B4, v5e AllGather, C1 head batching, C4 forward ratio, C3 #1), every training-step
# scenario and the C4 ratios (blind predictions at the end). Nothing in the repository is
# written: `validate --write` and `calibrate --write` update docs/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x build/tpusim ]; then
  echo "run: updating build/tpusim" >&2
else
  echo "run: building build/tpusim (the first build takes a few minutes on 2 cores)" >&2
fi
bash scripts/build.sh tpusim >/dev/null
build/tpusim calibrate
echo
build/tpusim validate scenarios/calibration scenarios/blind
