#!/usr/bin/env bash
# Fuzzes the scenario, chip, model and sweep loaders (tests/fuzz/loaders_fuzz.cpp) with libFuzzer
# for SECONDS (default 60), built with clang and ASan + UBSan into build-fuzz/. The seeds are every
# YAML file of the repository (scenarios, models, the bad-input corpus), each under every loader.
# A crash, timeout or sanitizer report fails the run; its input is left in build-fuzz/ as
# crash-*/timeout-* (add it to tests/data/bad/ once fixed). Needs clang and libclang-rt-14-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
bash scripts/setup.sh fuzz
command -v clang++ >/dev/null || { echo "fuzz: needs clang++ (apt-get install clang)" >&2; exit 2; }
if [ ! -f build-fuzz/CMakeCache.txt ]; then
  CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTPUSIM_BUILD_GUI=OFF -DTPUSIM_BUILD_TESTS=OFF -DTPUSIM_BUILD_FUZZ=ON \
    -DCMAKE_CXX_FLAGS="-O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
    >/dev/null
fi
echo "fuzz: building build-fuzz/loaders_fuzz" >&2
if ! cmake --build build-fuzz --target loaders_fuzz -j "$(nproc)" >build-fuzz/build.log 2>&1; then
  grep -E "error|FAILED" build-fuzz/build.log | head -20 >&2
  echo "fuzz: the build failed (build-fuzz/build.log)" >&2
  exit 1
fi
seeds=build-fuzz/seeds
rm -rf "$seeds" && mkdir -p "$seeds"
i=0
while IFS= read -r f; do
  for loader in 0 1 2 3; do
    { printf "\\x$(printf %02x $loader)"; cat "$f"; } >"$seeds/seed_$((i++))"
  done
done < <(find scenarios models tests/data/bad -type f -name '*.yaml' | sort)
corpus=build-fuzz/corpus
mkdir -p "$corpus"
cd build-fuzz
echo "fuzz: $seconds s over $i seeds" >&2
./loaders_fuzz -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
  -print_final_stats=1 corpus seeds >fuzz.log 2>&1 || true
grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units|ERROR|SUMMARY|Test unit written" fuzz.log || true
rm -f fuzz_input_*.yaml
found=$(find . -maxdepth 1 \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \) | tr '\n' ' ')
if [ -n "$found" ]; then
  # The report and the input itself go to the log: a CI machine's build-fuzz/ is not kept.
  grep -E "uncaught|runtime error|^ +#[0-9]+ .* in " fuzz.log | head -30 >&2 || true
  for f in $found; do
    echo "fuzz: $f, base64 (decode with base64 -d; its first byte picks the loader):" >&2
    head -c 16384 "$f" | base64 >&2
  done
  echo "fuzz: found inputs that crash or hang (in build-fuzz/): $found" >&2
  exit 1
fi
echo "fuzz: no crash, hang or sanitizer report" >&2
