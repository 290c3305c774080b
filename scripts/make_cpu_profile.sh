#!/usr/bin/env bash
# Writes tests/data/profile/cpu_gdn_main_path.json.gz: a real jax.profiler trace captured on this
# machine's CPU over MaxText's GDN main path (python/examples/maxtext_gdn.py:main_path, 2 heads,
# T 256: two chunks of 128), three steps. Needs scripts/setup.sh's .venv.
set -euo pipefail
cd "$(dirname "$0")/../python"
shape=1x256x2x128
JAX_PLATFORMS=cpu ../.venv/bin/python -m tpusim_jax profile examples/maxtext_gdn.py:main_path \
  --arg q=$shape:bf16 --arg k=$shape:bf16 --arg v=$shape:bf16 --arg g=1x256x2:f32 \
  --arg beta=1x256x2:bf16 --steps 3 -o ../tests/data/profile/cpu_gdn_main_path.json.gz
