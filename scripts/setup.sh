#!/usr/bin/env bash
# Installs the Debian packages tpusim builds against (../shared/facts/environment.md) that are
# missing, then the JAX bridge's pinned Python packages into .venv (python/requirements.txt).
# Safe to run repeatedly: it only calls apt-get or pip when something is absent. The C++ core
# needs no Python: without PyPI the bridge is left out and the tests labelled jax are not built.
set -euo pipefail
cd "$(dirname "$0")/.."

python_bridge() {
  local stamp=.venv/installed-requirements.txt
  if [ -f "$stamp" ] && cat python/requirements.txt python/maxtext-source.sha256 | cmp -s "$stamp" -; then
    return 0
  fi
  command -v python3 >/dev/null || { echo "setup: no python3: the JAX bridge is left out" >&2; return 0; }
  echo "setup: installing the JAX bridge's Python packages into .venv (about a minute)" >&2
  python3 -m venv .venv &&
    .venv/bin/pip install -q -r python/requirements.txt &&
    echo "$PWD/python" >"$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/tpusim_jax.pth" &&
    maxtext_source &&
    cat python/requirements.txt python/maxtext-source.sha256 >"$stamp" ||
    echo "setup: could not install python/requirements.txt: the JAX bridge is left out" >&2
}

# MaxText's wheel needs Python >= 3.12 and is not installed: the bridge reads the functions it
# compiles from the downloaded wheel (python/tpusim_jax/maxtext_source.py), checked by its hash.
maxtext_source() {
  local wheel
  wheel=$(awk '{print $2}' python/maxtext-source.sha256)
  local version=${wheel#maxtext-}
  version=${version%%-*}
  .venv/bin/pip download -q --no-deps --python-version 3.12 --only-binary=:all: \
    -d .venv/wheels "maxtext==$version" &&
    (cd .venv/wheels && sha256sum -c --quiet ../../python/maxtext-source.sha256)
}

packages=(
  cmake ninja-build g++ pkg-config
  libsystemc-dev libeigen3-dev libyaml-cpp-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev zlib1g-dev libplplot-dev libexpat1-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libimgui-dev libglfw3-dev libgl-dev libgl1-mesa-dri libstb-dev xvfb xauth
)

# `setup.sh fuzz`: also clang and its runtime (libFuzzer), for scripts/fuzz.sh.
[ "${1:-}" = fuzz ] && packages+=(clang libclang-rt-14-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
python_bridge
