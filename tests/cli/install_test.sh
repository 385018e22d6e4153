#!/usr/bin/env bash
# cmake --install BUILD into a temporary prefix outside the checkout (so nothing above the
# binary but the install can supply the tokenizer), then the installed flashkv, run from an empty directory,
# must report its version, find the tokenizer it installed, and ship the licence, docs and
# the example systemd unit.
set -euo pipefail
build=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/flashkv-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/flashkv share/flashkv/models/tokenizer/tokenizer.json share/doc/flashkv/LICENSE \
         share/doc/flashkv/README.md share/doc/flashkv/docs/SERVER.md \
         share/doc/flashkv/examples/flashkv.service; do
  [[ -e $prefix/$f ]] || { echo "missing after install: $f" >&2; exit 1; }
done
mkdir "$work/run"
cd "$work/run"
"$prefix/bin/flashkv" --version
"$prefix/bin/flashkv" make-tiny "$work/tiny.gguf" >/dev/null
[[ -s $work/tiny.gguf ]] || { echo "make-tiny from the install wrote nothing" >&2; exit 1; }
echo "install ok"
