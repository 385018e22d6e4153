#!/usr/bin/env bash
# Installs the Debian packages flashkv builds and tests with. Idempotent: it only calls
# apt-get when something is missing, so repeated `make` runs cost nothing.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libpcre2-dev libssl-dev libcpp-httplib-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libhiredis-dev redis-server redis-tools
)
# `make fuzz`: clang and its libFuzzer runtime.
if [[ ${FLASHKV_DEPS_FUZZ:-0} == 1 ]]; then
  PKGS+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Node runs the end-to-end tests with the official OpenAI/Anthropic clients. Any Node >= 18
# will do; Debian's own only when none is installed (another Node brings its own npm, and
# Debian's npm package would conflict with it).
if ! command -v node >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The client libraries for those tests, pinned by tests/clients/package-lock.json. A failure
# (offline) does not stop a build; the end-to-end tests install them again and fail clearly.
bash "$(dirname "${BASH_SOURCE[0]}")/npm-deps.sh" || echo "deps: npm packages for tests/clients not installed" >&2
# The coding agents the agent tests run (tests/agents/package-lock.json; about 1.4 GB).
bash "$(dirname "${BASH_SOURCE[0]}")/agents-npm-deps.sh" || echo "deps: npm packages for tests/agents not installed" >&2
