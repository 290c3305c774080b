#!/usr/bin/env bash
# Regenerates the compiled programs the HLO import tests read (tests/data/hlo/), with the pinned
# JAX and libtpu of scripts/setup.sh: small shapes, real compiler output for a v5e topology.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
out=tests/data/hlo
mkdir -p "$out"
# The MaxText GDN main path's forward (solve_triangular + lax.scan), T 256 = 2 chunks, 2 heads.
$py -m tpusim_jax compile python/examples/maxtext_gdn.py:main_path --topology v5e:2x2 \
  --arg q=1x256x2x128:bf16 --arg k=1x256x2x128:bf16 --arg v=1x256x2x128:bf16 \
  --arg g=1x256x2:f32 --arg beta=1x256x2:bf16 -o "$out/gdn_main_path"
# The Pallas scan forward: one tpu_custom_call resolved to the exported kernel.
$py -m tpusim_jax compile python/examples/gdn_scan.py:scan_fwd --topology v5e:2x2 \
  --arg w=1x2x2x128x128:bf16 --arg u=1x2x2x128x128:bf16 --arg q=1x2x2x128x128:bf16 \
  --arg k=1x2x2x128x128:bf16 --arg g=1x2x2x128x1:f32 --arg h0=1x2x128x128:f32 \
  -o "$out/gdn_scan_fwd"
# A dot and an elementwise tail in one fusion.
$py -m tpusim_jax compile python/tests/kernels_for_tests.py:dot_tanh --topology v5e:2x2 \
  --arg x=256x512:bf16 --arg y=512x256:bf16 -o "$out/dot_tanh"
# The GDN layer's q/k head repeat and L2 norm at C1's shape, forward and backward, with each op's
# VLIW schedule length recorded as its floor.
$py -m tpusim_jax compile python/examples/gdn_qk_repeat.py:repeat_l2norm_train --topology v5e:2x2 \
  --arg q=1x4096x16x128:bf16 --arg g=1x4096x32x128:bf16 --vliw-floors -o "$out/qk_repeat"
# The Mosaic dumps are large and not read by the tests.
rm -rf "$out"/*/mosaic
