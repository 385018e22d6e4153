#!/usr/bin/env bash
# `flashkv run` (issue 32): the prompt comes the same from -p, a pipe, -p - and --prompt-file
# (the same prompt tokens each time), --system adds a system turn (more prompt tokens), the
# log never lands in the generated text on stdout, and a SIGINT (Ctrl+C) during the reply
# stops it with status 0, "interrupted" and the stats.
# Usage: run_prompt_test.sh FLASHKV MODEL
set -euo pipefail
flashkv=$1
model=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/flashkv-run.XXXXXX")
pid=
cleanup() {
  if [[ -n $pid ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "run prompt test failed: $*" >&2
  exit 1
}
run=("$flashkv" run -m "$model" -n 2 --temp 0)
text="hello there, how are you"

# The prompt tokens a run prefilled, from its stats line on stderr.
prefilled() {
  sed -n 's/^prefill: \([0-9]*\) tokens in .*/\1/p' "$work/err"
}
"${run[@]}" -p "$text" >"$work/out" 2>"$work/err" || fail "-p: $(cat "$work/err")"
base=$(prefilled)
[[ -n $base ]] || fail "no prefill line: $(cat "$work/err")"
grep -q "request done\|\] info\| info " "$work/out" && fail "a log line on stdout: $(cat "$work/out")"

printf '%s' "$text" | "${run[@]}" >"$work/out" 2>"$work/err" || fail "pipe: $(cat "$work/err")"
[[ $(prefilled) == "$base" ]] || fail "a piped prompt prefilled $(prefilled) tokens, -p $base"
printf '%s' "$text" | "${run[@]}" -p - >"$work/out" 2>"$work/err" || fail "-p -: $(cat "$work/err")"
[[ $(prefilled) == "$base" ]] || fail "-p - prefilled $(prefilled) tokens, -p $base"
printf '%s' "$text" >"$work/prompt.txt"
"${run[@]}" --prompt-file "$work/prompt.txt" >"$work/out" 2>"$work/err" ||
  fail "--prompt-file: $(cat "$work/err")"
[[ $(prefilled) == "$base" ]] || fail "--prompt-file prefilled $(prefilled) tokens, -p $base"
"${run[@]}" -p "$text" --system "You answer in one short sentence." >"$work/out" 2>"$work/err" ||
  fail "--system: $(cat "$work/err")"
(($(prefilled) > base)) || fail "--system added no prompt tokens ($(prefilled) vs $base)"

# Ctrl+C while the reply streams: a reply far longer than the wait for its first bytes.
"$flashkv" run -m "$model" -n 4000 --temp 0 -p "Tell me a long story about the sea." \
  >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 1800); do
  [[ -s $work/out ]] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[[ -s $work/out ]] || fail "no reply bytes before the interrupt: $(cat "$work/err")"
kill -INT "$pid"
set +e
wait "$pid"
rc=$?
set -e
pid=
((rc == 0)) || fail "status $rc after Ctrl+C: $(cat "$work/err")"
grep -q '^interrupted$' "$work/err" || fail "no 'interrupted': $(cat "$work/err")"
decoded=$(sed -n 's/^decode: \([0-9]*\) tokens in .*/\1/p' "$work/err")
if [[ -z $decoded ]] || ((decoded >= 4000)); then
  fail "no stats, or the reply ran to its end: $(cat "$work/err")"
fi
echo "run prompt sources ok ($base prompt tokens; interrupted after $decoded)"
