#!/usr/bin/env bash
# Installs the npm packages of tests/clients — the official `openai` and `@anthropic-ai/sdk`
# clients the end-to-end tests drive `flashkv serve` with — or of the npm project named as
# the argument (scripts/agents-npm-deps.sh: tests/agents), exactly as its package-lock.json
# pins them (`npm ci`). Idempotent: does nothing while node_modules is newer than the
# lockfile. npm is found on PATH or, where only Node is installed (Node's own packages
# ship npm without linking it), beside the node binary.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROJECT=${1:-tests/clients}
DIR="$ROOT/$PROJECT"
STAMP="$DIR/node_modules/.package-lock.json"  # written by npm ci

if [[ -f $STAMP && $STAMP -nt $DIR/package-lock.json ]]; then
  exit 0
fi

find_npm() {
  if command -v npm >/dev/null 2>&1; then
    echo npm
    return
  fi
  local node
  if ! node=$(command -v node); then
    echo "npm-deps: node is not installed (scripts/deps.sh installs it)" >&2
    return 1
  fi
  local prefix
  prefix=$(dirname "$(dirname "$(readlink -f "$node")")")
  local cli
  for cli in "$prefix/lib/node_modules/npm/bin/npm-cli.js" \
             /usr/lib/node_modules/npm/bin/npm-cli.js \
             /usr/share/nodejs/npm/bin/npm-cli.js; do
    if [[ -f $cli ]]; then
      echo "$node $cli"
      return
    fi
  done
  echo "npm-deps: npm not found (looked on PATH and beside $node)" >&2
  return 1
}

NPM=$(find_npm)
echo "npm-deps: installing $PROJECT packages with $NPM ci"
cd "$DIR"
$NPM ci --no-audit --no-fund --loglevel=error
