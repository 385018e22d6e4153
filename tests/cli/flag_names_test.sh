#!/usr/bin/env bash
# One name per concept across commands, the older spellings kept (issue 32): each command's
# --help lists every spelling of the options it shares with the others, so a command that
# drops an alias or names a concept its own way fails here. Usage: flag_names_test.sh FLASHKV
set -euo pipefail
flashkv=$1
missing=0
# The option names of a help text's lines (CLI11: "  -n,--tokens,... INT=4 help").
names() {
  "$flashkv" "$@" --help | sed -n 's/^  \(-[^ ]*\).*/\1/p' | tr ',' '\n'
}
expect() {
  local cmd=$1
  shift
  local have
  # shellcheck disable=SC2086  # "kv gc" is a command and its subcommand: split on purpose
  have=$(names $cmd)
  for flag in "$@"; do
    grep -qx -- "$flag" <<<"$have" || { echo "flashkv $cmd lacks $flag" >&2; missing=1; }
  done
}
generating=(-m --model -n --n-predict --tokens --gen-tokens --prefill-chunk --chunk -t --threads)
for cmd in serve run chat bench; do expect "$cmd" "${generating[@]}"; done
for cmd in serve run chat; do expect "$cmd" -c --ctx --ctx-size --kv-disk-dir --kv-disk-space-mb; done
expect serve --host --port
for sub in ls show verify du rm gc; do expect "kv $sub" --kv-disk-dir --dir; done
expect "kv gc" --kv-disk-space-mb --budget-mb
((missing == 0)) && echo "flag names ok"
