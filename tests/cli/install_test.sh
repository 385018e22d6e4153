#!/usr/bin/env bash
# cmake --install BUILD into a temporary prefix outside the checkout (so nothing above the
# binary but the install can supply the tokenizer), then the installed flashkv, run from an empty directory,
# must report its version, find the tokenizer it installed, and ship the licence, docs and
# the example systemd unit, whose ExecStart this flashkv serves with (the model, port and
# state directory swapped for the test's: a renamed flag would break every copied unit).
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

# The unit's ExecStart, continuation lines joined, with the test's model, a free port and a
# state directory; it must come up and stop cleanly on SIGTERM (systemctl stop).
unit=$prefix/share/doc/flashkv/examples/flashkv.service
exec_start=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$unit" | sed 's/\\$//' | tr '\n' ' ')
exec_start=${exec_start#ExecStart=}
read -r -a argv <<<"$exec_start"
[[ ${argv[0]} == /usr/local/bin/flashkv && ${argv[1]} == serve ]] ||
  { echo "unexpected ExecStart: $exec_start" >&2; exit 1; }
argv[0]=$prefix/bin/flashkv
# shellcheck disable=SC2016  # '${STATE_DIRECTORY}' is the unit's literal text, not ours
for i in "${!argv[@]}"; do
  case ${argv[i]} in
    /srv/models/ds4flash.gguf) argv[i]=$work/tiny.gguf ;;
    8000) argv[i]=0 ;;
    *'${STATE_DIRECTORY}'*) argv[i]=${argv[i]//'${STATE_DIRECTORY}'/$work/state} ;;
  esac
done
"${argv[@]}" >"$work/serve.out" 2>"$work/serve.err" &
pid=$!
for _ in $(seq 600); do
  grep -q "listening on" "$work/serve.out" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
grep -q "listening on" "$work/serve.out" ||
  { kill "$pid" 2>/dev/null; cat "$work/serve.out" "$work/serve.err" >&2; echo "the unit's command did not serve" >&2; exit 1; }
kill -TERM "$pid"
wait "$pid" || { echo "the unit's command exited $? on SIGTERM" >&2; exit 1; }
[[ -d $work/state/kv ]] || { echo "no KV cache in the state directory" >&2; exit 1; }
echo "install ok"
