#!/usr/bin/env bash
# Builds everything with AddressSanitizer and UndefinedBehaviorSanitizer (CMake preset
# "sanitize", build-sanitize/) and runs the test suite there (the GUI tests included; not the
# slow or jax-labelled ones). Any sanitizer report fails the test that triggered it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ -f build-sanitize/CMakeCache.txt ] || cmake --preset sanitize >/dev/null
echo "sanitize: building build-sanitize (ASan + UBSan; several minutes on 2 cores)" >&2
cmake --build build-sanitize -j "$(nproc)" >/dev/null
asan=abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ASAN_OPTIONS=$asan:detect_leaks=1 \
  ctest --test-dir build-sanitize --output-on-failure -LE "slow|jax|gui" -j "$(nproc)"
# The GUI tests without the leak check: Mesa's GL driver (llvmpipe under Xvfb) leaks 240 bytes
# at exit, after it has been unloaded, so LeakSanitizer can neither name nor suppress it. Memory
# errors and undefined behaviour are still fatal there.
ASAN_OPTIONS=$asan:detect_leaks=0 \
  ctest --test-dir build-sanitize --output-on-failure -L gui -LE "slow|jax" -j "$(nproc)"
