#!/usr/bin/env bash
# The TPU compiler's verdict on every calibration and blind scenario it can compile: each
# scenario's MaxText command line (`tpusim export maxtext`) compiled for its topology by
# `python -m tpusim_jax compile-step` into scenarios/compiled/<scenario file stem>.json (memory
# analysis, or the out-of-memory message). Scenarios the compiled step does not model (the GDN build
# doubling, megablox with expert parallelism, int8 with experts, context parallelism)
# are listed with the reason.
# Each compiled scenario gets `compiled: FILE` if it has none; `tpusim validate` prints the
# compiled peak beside tpusim's memory model. Needs scripts/setup.sh's
# .venv (jax, libtpu); a compile takes 20 s to a few minutes of 2 cores.
# Usage: scripts/compile_scenarios.sh [SCENARIO.yaml ...]   (default: calibration + blind)
set -uo pipefail
cd "$(dirname "$0")/.."
out=scenarios/compiled
mkdir -p "$out"
files=("$@")
[ ${#files[@]} -eq 0 ] && mapfile -t files < <(find scenarios/calibration scenarios/blind -name '*.yaml' | sort)
for f in "${files[@]}"; do
  grep -qE "^(rows|source):" "$f" && continue  # a micro-benchmark or ratio table, not a step
  stem=$(basename "$f" .yaml)
  if grep -q "^compiled: .*compiled/steps/" "$f"; then
    echo "skip $stem: compiled with its run's flags by scripts/compile_steps.sh"
    continue
  fi
  if ! args=$(build/tpusim export maxtext "$f" 2>&1); then
    echo "skip $stem: ${args#tpusim: error: }"
    continue
  fi
  # shellcheck disable=SC2086
  if ! msg=$(cd python && ../.venv/bin/python -m tpusim_jax compile-step $args -o "../$out/$stem.json" 2>&1); then
    echo "skip $stem: $(echo "$msg" | grep -m1 'error' || echo "$msg" | tail -1)"
    continue
  fi
  echo "$stem: $(echo "$msg" | grep -m1 'compiled the step')"
  # The scenario names its compiled step (before its measured block), once.
  if ! grep -q "^compiled:" "$f"; then
    rel=$(realpath --relative-to="$(dirname "$f")" "$out/$stem.json")
    awk -v line="compiled: $rel" '/^measured:/ && !done {print line; done=1} {print}
      END {if (!done) print line}' "$f" >"$f.tmp" && mv "$f.tmp" "$f"
  fi
done
