#!/usr/bin/env bash
# `flashkv serve` binds its port before it loads the model: a first server reports the port
# it bound before "listening on"; a second one on the same port fails with the bind error at
# once, before it even looks for its (here missing) model; /health answers 200 once the
# first is listening. The first one is started with llama.cpp's spellings (-m, -c, --host,
# --port), which serve accepts where they mean the same (issue 32); /health reports its -c.
set -euo pipefail
flashkv=$1
model=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/flashkv-startup.XXXXXX")
pid=
cleanup() {
  if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$flashkv" serve -m "$model" -c 640 --host 127.0.0.1 --port 0 --kv-ram-space-mb 0 >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 600); do
  grep -q "listening on" "$work/out" && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/out" "$work/err"; echo "server exited" >&2; exit 1; }
  sleep 0.1
done
grep -q "listening on" "$work/out" || { echo "server never listened" >&2; exit 1; }
# The bound line comes first and names the port.
bound=$(head -n 1 "$work/out")
[[ $bound =~ bound\ http://127\.0\.0\.1:([0-9]+)\;\ loading ]] || {
  echo "first line is not the bound line: $bound" >&2
  exit 1
}
port=${BASH_REMATCH[1]}

set +e
"$flashkv" serve --model "$work/no-such-model.gguf" --port "$port" >"$work/out2" 2>&1
rc=$?
set -e
[[ $rc -ne 0 ]] || { echo "second server on a taken port exited 0" >&2; exit 1; }
grep -q "cannot bind 127.0.0.1:$port" "$work/out2" || {
  echo "expected the bind error first, got:" >&2
  cat "$work/out2" >&2
  exit 1
}

exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
reply=$(cat <&3)
exec 3>&-
[[ $reply == "HTTP/1.1 200"* ]] || { echo "health after load: $reply" >&2; exit 1; }
[[ $reply == *'"status":"ok"'* ]] || { echo "health body: $reply" >&2; exit 1; }
[[ $reply == *'"ctx":640'* ]] || { echo "health does not report -c 640: $reply" >&2; exit 1; }
echo "startup ok (port $port)"
