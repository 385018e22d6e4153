#!/usr/bin/env bash
# End-to-end check of the disk KV tier through the flashkv binary:
#  1. the second identical `flashkv run` restores the prompt from disk, says so, and prints
#     exactly the text of the first (cold) run;
#  2. `kv ls`, `kv show`, `kv verify`, `kv du` see the entry;
#  3. a damaged entry is reported, quarantined, and the run falls back to prefill with the
#     same output; `kv verify` then finds nothing bad left in place;
#  4. an unusable directory disables the tier and the run still succeeds;
#  5. `kv gc` to a zero-ish budget empties the directory, `kv rm` removes by key prefix.
# Usage: run_kv_cli_test.sh FLASHKV MODEL WORKDIR
set -euo pipefail
FLASHKV=$1 MODEL=$2 WORK=$3
rm -rf "$WORK" && mkdir -p "$WORK"
DIR=$WORK/cache
PROMPT="The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog."
run() {  # run NAME [extra flags]
  local name=$1
  shift
  "$FLASHKV" run --model "$MODEL" -n 8 --kv-cache-min-tokens 16 -p "$PROMPT" "$@" \
    >"$WORK/$name.out" 2>"$WORK/$name.err"
}
fail() { echo "FAIL: $*"; for f in "$WORK"/*.err; do echo "== $f"; cat "$f"; done; exit 1; }

run cold --kv-disk-dir "$DIR"
grep -q 'kv: prefix from prefill' "$WORK/cold.err" || fail "first run should prefill"
grep -q 'kv: saving cold snapshot' "$WORK/cold.err" || fail "first run should save a cold snapshot"
run warm --kv-disk-dir "$DIR"
grep -E 'kv: prefix from disk: [0-9]+ of [0-9]+ tokens reused \(matched by tokens\), load [0-9.]+ ms' \
  "$WORK/warm.err" || fail "second run should restore from disk"
cmp "$WORK/cold.out" "$WORK/warm.out" || fail "restored run printed different text"

"$FLASHKV" kv ls --dir "$DIR" | tee "$WORK/ls.txt"
grep -E '^[0-9a-f]{12} +[0-9]+ .* cold +1 ' "$WORK/ls.txt" || fail "kv ls should show one cold entry with 1 hit"
KEY=$(ls "$DIR" | grep -E '^[0-9a-f]{40}\.kv$' | head -1 | cut -c1-8)
"$FLASHKV" kv show --dir "$DIR" "$KEY" | tee "$WORK/show.txt"
grep -q 'reason: *cold' "$WORK/show.txt" || fail "kv show: reason"
grep -q 'The quick brown fox' "$WORK/show.txt" || fail "kv show: rendered text"
"$FLASHKV" kv verify --dir "$DIR" || fail "kv verify on a good directory"
"$FLASHKV" kv du --dir "$DIR" | tee "$WORK/du.txt"
grep -Eq '^logical: +[0-9.]+ MiB' "$WORK/du.txt" || fail "kv du: logical bytes"
grep -Eq '^physical: +[0-9.]+ MiB' "$WORK/du.txt" || fail "kv du: physical bytes"

# Damage one payload byte of every entry.
for f in "$DIR"/*.kv; do
  printf 'X' | dd of="$f" bs=1 seek=5000 conv=notrunc 2>/dev/null
done
if "$FLASHKV" kv verify --dir "$DIR" >"$WORK/verify-bad.txt"; then fail "kv verify missed damage"; fi
grep -q 'checksum mismatch' "$WORK/verify-bad.txt" || fail "kv verify should name the checksum"
run damaged --kv-disk-dir "$DIR"
grep -q 'quarantined' "$WORK/damaged.err" || fail "damaged entry should be quarantined"
grep -q 'kv: prefix from prefill' "$WORK/damaged.err" || fail "damaged entry should fall back to prefill"
cmp "$WORK/cold.out" "$WORK/damaged.out" || fail "fallback run printed different text"
ls "$DIR/quarantine" | grep -q '\.kv\.' || fail "quarantine/ should hold the damaged file"
"$FLASHKV" kv verify --dir "$DIR" || fail "after quarantine the directory verifies"

run nodir --kv-disk-dir /proc/flashkv-no-such-dir
grep -q 'kv: disk cache disabled' "$WORK/nodir.err" || fail "an unusable dir should disable the tier"
cmp "$WORK/cold.out" "$WORK/nodir.out" || fail "run without the tier printed different text"

"$FLASHKV" kv gc --dir "$DIR" --budget-mb 0 | tee "$WORK/gc.txt"
grep -q 'evicted' "$WORK/gc.txt" || fail "kv gc output"
[ -z "$(ls "$DIR" | grep -E '\.kv$' || true)" ] || fail "kv gc --budget-mb 0 should evict every entry"
run again --kv-disk-dir "$DIR"
KEY=$(ls "$DIR" | grep -E '^[0-9a-f]{40}\.kv$' | head -1 | cut -c1-8)
"$FLASHKV" kv rm --dir "$DIR" "$KEY" || fail "kv rm"
[ -z "$(ls "$DIR" | grep -E '\.kv$' || true)" ] || fail "kv rm should remove the entry"
# Issue 34: a FIFO or a link under a chunk's or an entry's name is listed as damage (never
# opened: a FIFO would block), kv verify fails on it and on a directory that is no cache.
mkdir -p "$DIR/chunks"
mkfifo "$DIR/chunks/0123456789abcdef0123456789abcdef01234567.kvc"
ln -s /etc/hostname "$DIR/0123456789abcdef0123456789abcdef01234568.kv"
timeout 20 "$FLASHKV" kv ls --dir "$DIR" | tee "$WORK/ls-odd.txt"
grep -q ', 2 damaged,' "$WORK/ls-odd.txt" || fail "kv ls should count the FIFO and the link as damaged"
if timeout 20 "$FLASHKV" kv verify --dir "$DIR"; then fail "kv verify passed a FIFO chunk"; fi
rm -f "$DIR/chunks/0123456789abcdef0123456789abcdef01234567.kvc" \
  "$DIR/0123456789abcdef0123456789abcdef01234568.kv"
mkdir -p "$WORK/not-a-cache"
if "$FLASHKV" kv verify --dir "$WORK/not-a-cache"; then fail "kv verify passed a non-cache dir"; fi
echo "1 passed, 0 failed"
