#!/usr/bin/env bash
# Installs the Debian packages tpusim builds against (../shared/facts/environment.md) that are missing.
# Safe to run repeatedly: it only calls apt-get when something is absent.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  libsystemc-dev libeigen3-dev libyaml-cpp-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libimgui-dev libglfw3-dev libgl-dev libgl1-mesa-dri libstb-dev xvfb xauth
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
