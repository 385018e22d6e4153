#!/usr/bin/env bash
# Installs the Debian packages flashkv needs. Idempotent: it only calls apt-get when
# something is missing, so repeated `make` runs cost nothing.
#
#   scripts/deps.sh serve   what building and running `flashkv serve` needs (`make run`)
#   scripts/deps.sh test    that plus the test rig (`make test`): GoogleTest, Google
#                           Benchmark, redis-server, the aarch64 cross compiler, Node and
#                           the npm clients and coding agents the end-to-end tests drive
#                           (about 1.5 GB)
#   scripts/deps.sh         the same as `test`, as before the split
# FLASHKV_DEPS_FUZZ=1 adds clang and its libFuzzer runtime (`make fuzz`); FLASHKV_DEPS_LIST=1
# prints what the mode would install (Node and the npm trees included) and installs nothing.
set -euo pipefail

MODE=${1:-test}
case $MODE in
  serve | test) ;;
  *)
    echo "usage: scripts/deps.sh [serve|test]" >&2
    exit 2
    ;;
esac

# Building the server: compiler, CMake, the libraries it links (hiredis: the shared KV tier's
# client, linked whether or not --kv-remote is used), git for the commit --version reports.
PKGS=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libpcre2-dev libssl-dev libcpp-httplib-dev zlib1g-dev libhiredis-dev
)
if [[ $MODE == test ]]; then
  # The remote tier's tests start a real redis-server. The cross compiler: the host code's
  # aarch64 compile check (scripts/aarch64-check.py, CTest aarch64_host_compiles).
  PKGS+=(libgtest-dev libgmock-dev libbenchmark-dev redis-server redis-tools g++-aarch64-linux-gnu)
fi
if [[ ${FLASHKV_DEPS_FUZZ:-0} == 1 ]]; then
  PKGS+=(clang libclang-rt-14-dev)
fi

# FLASHKV_DEPS_LIST=1: print the mode's packages, one a line, and install nothing.
if [[ ${FLASHKV_DEPS_LIST:-0} == 1 ]]; then
  printf '%s\n' "${PKGS[@]}"
  [[ $MODE == test ]] && printf '%s\n' nodejs npm tests/clients tests/agents
  exit 0
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Node runs the end-to-end tests with the official OpenAI/Anthropic clients. Any Node >= 18
# will do; Debian's own only when none is installed (another Node brings its own npm, and
# Debian's npm package would conflict with it).
if [[ $MODE == test ]] && ! command -v node >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [[ $MODE == test ]]; then
  # The client libraries for those tests, pinned by tests/clients/package-lock.json. A failure
  # (offline) does not stop a build; the end-to-end tests install them again and fail clearly.
  bash "$(dirname "${BASH_SOURCE[0]}")/npm-deps.sh" || echo "deps: npm packages for tests/clients not installed" >&2
  # The coding agents the agent tests run (tests/agents/package-lock.json; about 1.4 GB).
  bash "$(dirname "${BASH_SOURCE[0]}")/agents-npm-deps.sh" || echo "deps: npm packages for tests/agents not installed" >&2
fi
