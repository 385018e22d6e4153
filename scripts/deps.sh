#!/usr/bin/env bash
# Installs the Debian packages flashkv builds and tests with. Idempotent: it only calls
# apt-get when something is missing, so repeated `make` runs cost nothing.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libpcre2-dev libssl-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
