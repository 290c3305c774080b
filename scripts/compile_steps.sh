#!/usr/bin/env bash
# Whole training steps as the TPU compiler builds them with the XLA flags of the runs they
# compare with: each calibration scenario below compiled by `python -m tpusim_jax compile-step`
# with LIBTPU_INIT_ARGS read from the MaxText script of that run (the pinned MaxText wheel's
# maxtext/configs/tpu/...), written to scenarios/compiled/steps/<stem>.json (its flags recorded)
# and <stem>.hlo.gz (the optimized HLO, named in the JSON). A scenario whose `compiled:` is that
# JSON gets the compiled program simulated beside its step model (`tpusim run`, `validate`;
# docs/compiler_import.md, "Whole compiled steps").
# Needs scripts/setup.sh's .venv; about 35 minutes of 2 cores.
# Usage: scripts/compile_steps.sh [STEM ...]   (default: all of them)
set -euo pipefail
cd "$(dirname "$0")/.."
out=scenarios/compiled/steps
mkdir -p "$out"
wheel=$(ls .venv/wheels/maxtext-*.whl)

# The LIBTPU_INIT_ARGS a MaxText script of the wheel exports.
flags_of() {
  .venv/bin/python - "$wheel" "$1" <<'EOF'
import re, sys, zipfile
text = zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]).decode()
print(re.search(r'LIBTPU_INIT_ARGS="([^"]*)"', text).group(1))
EOF
}

# With arguments, only the scenarios whose file stems are named (c1_main c3_41_v5e_maxtext-16b ...).
only=("$@")
compile() {  # scenario, the MaxText script of its run
  local stem args flags
  stem=$(basename "$1" .yaml)
  if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " =~ \ $stem\  ]]; then return; fi
  args=$(build/tpusim export maxtext "$1")
  flags=$(flags_of "$2")
  # shellcheck disable=SC2086
  (cd python && LIBTPU_INIT_ARGS="$flags" JAX_PLATFORMS=cpu ../.venv/bin/python -m \
    tpusim_jax compile-step $args -o "../$out/$stem.json" --hlo "../$out/$stem.hlo.gz" --vliw-floors)
  # The scenario names its compiled step, once (as scripts/compile_scenarios.sh does).
  if ! grep -q "^compiled:" "$1"; then
    awk -v line="compiled: ../../compiled/steps/$stem.json" \
      '/^measured:/ && !done {print line; done=1} {print}' "$1" >"$1.tmp"
    mv "$1.tmp" "$1"
  fi
}

compile scenarios/calibration/c3/c3_41_v5e_maxtext-16b.yaml maxtext/configs/tpu/v5e/16b.sh
# C1's main build (MaxText PR #4348 on v5e-256): its run's flags are not public; MaxText's own
# v5e flags (those of every v5e script of the wheel) are assumed.
compile scenarios/calibration/c1/c1_main.yaml maxtext/configs/tpu/v5e/16b.sh
# Its Pallas builds, with this project's kernels (python/tpusim_jax/gdn_kernel_rule.py).
compile scenarios/calibration/c1/c1_scan.yaml maxtext/configs/tpu/v5e/16b.sh
compile scenarios/calibration/c1/c1_heads.yaml maxtext/configs/tpu/v5e/16b.sh
compile scenarios/calibration/c1/c1_ladder.yaml maxtext/configs/tpu/v5e/16b.sh
compile scenarios/calibration/c3/c3_42_v5e_maxtext-32b.yaml maxtext/configs/tpu/v5e/32b.sh
# C3 #41 over 2 and 32 slices (C5): 16b.sh is the script of every slice count.
compile scenarios/calibration/c5/c5_41_v5e-256x2_maxtext-16b.yaml maxtext/configs/tpu/v5e/16b.sh
compile scenarios/calibration/c5/c5_41_v5e-256x32_maxtext-16b.yaml maxtext/configs/tpu/v5e/16b.sh
compile scenarios/calibration/c5/c5_24_v5p-128_maxtext-128b.yaml maxtext/configs/tpu/v5p/128b.sh
compile scenarios/calibration/c5/c5_44_v5e-256_maxtext-128b.yaml maxtext/configs/tpu/v5e/128b.sh
# MaxText's own script for GPT-3 175B on v6e-256 (batch 3, remat full, fsdp over all chips): the
# tpu-recipes run of C5 #14 has the same shape; its own flags are not among the facts.
compile scenarios/calibration/c5/c5_14_v6e-256_gpt3-175b.yaml maxtext/configs/tpu/v6e/gpt3_175b.sh
# C5 #11 (Llama2-70B on v6e-256, tpu-recipes): its run's flags are not among the facts (it offloads
# the all-reduce to the SparseCore); MaxText's own Llama2 script for v6e is assumed.
compile scenarios/calibration/c5/c5_11_v6e-256_llama2-70b.yaml maxtext/configs/tpu/v6e/llama2_7b_4096.sh
