#!/usr/bin/env bash
# The README's command table (issue 32: it had left out `kv` and `remote-bench`) names every
# subcommand `flashkv --help` lists, and its `kv` row every `kv` subcommand. The lists come
# from the binary itself, so a new command without a README row fails here.
# Usage: readme_commands_test.sh FLASHKV README
set -euo pipefail
flashkv=$1
readme=$2
# CLI11's help: the names under "Subcommands:", one a line, indented by two spaces.
subcommands() {
  "$@" --help | sed -n '/^Subcommands:/,$p' | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p'
}
table=$(grep -E '^\| `' "$readme")
missing=0
cmds=$(subcommands "$flashkv")
[[ $(wc -l <<<"$cmds") -ge 10 ]] || { echo "too few subcommands parsed: $cmds" >&2; exit 1; }
for c in $cmds; do
  grep -qF "\`$c\`" <<<"$table" || { echo "README command table lacks \`$c\`" >&2; missing=1; }
done
# shellcheck disable=SC2016  # the backquotes are Markdown, matched literally
kv_row=$(grep -E '^\| `kv` \|' "$readme" || true)
for c in $(subcommands "$flashkv" kv); do
  grep -qF "\`$c\`" <<<"$kv_row" || { echo "README's kv row lacks \`$c\`" >&2; missing=1; }
done
((missing == 0)) && echo "README lists every command"
