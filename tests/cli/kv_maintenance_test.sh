#!/usr/bin/env bash
# `flashkv kv` on a real cache and on a directory that is not one (issue 32, "docs that are no
# longer true"): `kv verify` refuses a directory holding nothing a cache writes (it used to
# report "0 bad" and exit 0), passes on the cache `flashkv run` wrote, and `kv gc` reports its
# before and after sizes the way `kv ls` counts them (they used to disagree).
# Usage: kv_maintenance_test.sh FLASHKV MODEL
set -euo pipefail
flashkv=$1
model=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/flashkv-kvcli.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "kv maintenance test failed: $*" >&2
  exit 1
}

# Not a cache: an empty directory, and one with unrelated files in it.
mkdir "$work/empty" "$work/other"
echo x >"$work/other/notes.txt"
for d in "$work/empty" "$work/other"; do
  set +e
  out=$("$flashkv" kv verify --dir "$d" 2>&1)
  rc=$?
  set -e
  [[ $rc -ne 0 ]] || fail "kv verify --dir $d exited 0: $out"
  [[ $out == *"is not a flashkv cache directory"* ]] || fail "kv verify --dir $d said: $out"
done

# A real cache: one prompt long enough for a snapshot at --kv-cache-min-tokens 16.
kv=$work/kv
prompt="You are on a small boat far from the coast, the wind is rising, the sky turns grey and
the old captain starts to speak about the storms he has seen and the ships he has lost."
"$flashkv" run -m "$model" -n 2 --temp 0 --kv-disk-dir "$kv" --kv-cache-min-tokens 16 \
  -p "$prompt" >/dev/null 2>"$work/run.err" || {
  cat "$work/run.err" >&2
  fail "flashkv run with a disk cache"
}
verify=$("$flashkv" kv verify --dir "$kv") || fail "kv verify on the cache: $verify"
[[ $verify =~ ([0-9]+)\ verified,\ 0\ bad ]] || fail "kv verify said: $verify"
((BASH_REMATCH[1] >= 1)) || fail "no entry verified: $verify"

# The directory's size as `kv ls` reports it.
ls_mib() {
  "$flashkv" kv ls --dir "$kv" | sed -n 's/.*; \([0-9.]*\) MiB in the directory$/\1/p'
}
before=$(ls_mib)
[[ -n $before ]] || fail "kv ls printed no total"
# serve's names here (--kv-disk-dir, --kv-disk-space-mb), kv's older --dir above.
gc=$("$flashkv" kv gc --kv-disk-dir "$kv" --kv-disk-space-mb 0)
[[ $gc =~ evicted\ ([0-9]+)\ file\(s\):\ ([0-9.]+)\ MiB\ -\>\ ([0-9.]+)\ MiB ]] ||
  fail "kv gc said: $gc"
((BASH_REMATCH[1] >= 1)) || fail "kv gc with a budget of 0 evicted nothing: $gc"
[[ ${BASH_REMATCH[2]} == "$before" ]] || fail "kv gc's before size $gc, kv ls said $before MiB"
after=$(ls_mib)
[[ ${BASH_REMATCH[3]} == "$after" ]] || fail "kv gc's after size $gc, kv ls says $after MiB"
echo "kv maintenance ok (before $before MiB, after $after MiB)"
