#!/usr/bin/env bash
# CUDA check in two halves, because the GPU machine has the CUDA toolkit but not flashkv's
# Debian dependencies, and its time is scarce:
#   scripts/cuda-check.sh stage    (here) build the CUDA test and benchmark binaries (and,
#                                  with STAGE_FLASHKV=1, the flashkv binary) in
#                                  build-cuda/ and stage them and the shared libraries
#                                  they need in .devcarry/ (the fixtures travel with the
#                                  working tree: tests/data/fixtures)
#   scripts/cuda-check.sh device [tests|bench|cli|flashbench|all] [extra args...]
#                                  (on the GPU machine, from the repo root, with
#                                  .devcarry carried) run the GPU tests and/or the Flash
#                                  benchmark, logs and JSON under $OUT (default ./out-cuda).
#                                  flashbench (needs STAGE_FLASHKV=1 at stage time):
#                                  `flashkv bench --backend cuda --model random:flash`, a
#                                  context sweep of the real Model on Flash-shaped random
#                                  weights; extra args are appended to its flags (later
#                                  ones win, e.g. --ctx-max 4096 or --model random:flash:12).
# The binaries carry absolute paths of this checkout (/work/main, whose tests/data/fixtures
# the tests read); the device half recreates it as a link.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=${1:-}
shift || true

stage() {
  local B=build-cuda
  if [[ ! -f $B/build.ninja ]]; then
    cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHKV_CUDA=ON -DFLASHKV_NATIVE=OFF \
      -DCMAKE_CXX_FLAGS=-march=x86-64-v3 -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc
  fi
  ninja -C $B -j2 backend_cuda_test flashkv_bench_cuda ${STAGE_FLASHKV:+flashkv}
  grep -qx '/.devcarry/' .git/info/exclude 2>/dev/null || echo '/.devcarry/' >> .git/info/exclude
  rm -rf .devcarry
  mkdir -p .devcarry/build-cuda/tests/backend/cuda .devcarry/build-cuda/bench .devcarry/lib
  cp $B/tests/backend/cuda/backend_cuda_test .devcarry/build-cuda/tests/backend/cuda/
  cp $B/bench/flashkv_bench_cuda .devcarry/build-cuda/bench/
  [[ -z ${STAGE_FLASHKV:-} ]] || cp $B/flashkv .devcarry/build-cuda/
  strip .devcarry/build-cuda/bench/flashkv_bench_cuda \
    .devcarry/build-cuda/tests/backend/cuda/backend_cuda_test
  # Non-system libraries the binaries link (the CUDA runtime is static).
  for bin in .devcarry/build-cuda/bench/flashkv_bench_cuda \
    .devcarry/build-cuda/tests/backend/cuda/backend_cuda_test ${STAGE_FLASHKV:+.devcarry/build-cuda/flashkv}; do
    ldd "$bin" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libgcc_s|libstdc\+\+|libpthread|libdl|librt)\.so' \
      | xargs -r -I{} cp -L {} .devcarry/lib/
  done
  chmod -R u+w .devcarry
  du -sh .devcarry
}

device() {
  local what=${1:-all}
  shift || true
  OUT=${OUT:-$ROOT/out-cuda}
  mkdir -p "$OUT"
  # Recreate the build-time paths.
  mkdir -p /work
  [[ -e /work/main ]] || ln -s "$ROOT" /work/main
  [[ -e $ROOT/build-cuda ]] || ln -s "$ROOT/.devcarry/build-cuda" "$ROOT/build-cuda"
  export LD_LIBRARY_PATH=$ROOT/.devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,power.limit \
    --format=csv > "$OUT/gpu.txt" 2>&1 || true
  cat "$OUT/gpu.txt"
  local rc=0
  if [[ $what == tests || $what == all ]]; then
    /work/main/build-cuda/tests/backend/cuda/backend_cuda_test --gtest_color=no \
      --gtest_output=json:"$OUT/gpu-tests.json" > "$OUT/gpu-tests.log" 2>&1 || rc=1
    grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) |max\|d\||argmax|snapshot|Failure|Expected|Which is|actual|error' \
      "$OUT/gpu-tests.log" | head -150 || true
  fi
  if [[ $what == cli ]]; then
    local F=$ROOT/tests/data/fixtures/hf-tiny-a T=$OUT/cli
    mkdir -p "$T"
    python3 -c "import json;print(','.join(map(str,json.load(open('$F/reference.json'))['prompt_tokens'])))" \
      > "$T/prompt.txt"
    /work/main/build-cuda/flashkv convert $F "$T/hf.gguf" --type f32 \
      --tokenizer "$ROOT/models/tokenizer/tokenizer.json" > "$T/convert.log" 2>&1 || rc=1
    for chunk in 1 7 80; do
      /work/main/build-cuda/flashkv logits --model "$T/hf.gguf" --tokens-file "$T/prompt.txt" \
        --decode 16 --chunk $chunk --numerics hf --act-quant off --backend cuda \
        --out "$T/logits$chunk.f32" > "$T/greedy$chunk.txt" 2>"$T/logits$chunk.log" || rc=1
      python3 - "$F" "$T/logits$chunk.f32" "$T/greedy$chunk.txt" $chunk <<'PY' || rc=1
import json, sys, numpy as np
f, out, greedy, chunk = sys.argv[1:5]
ref = json.load(open(f + "/reference.json"))
want = np.concatenate([np.fromfile(f + "/prefill_logits.f32", np.float32),
                       np.fromfile(f + "/decode_logits.f32", np.float32)])
got = np.fromfile(out, np.float32)
d = float(np.abs(got - want).max()) if got.size == want.size else float("inf")
g = [int(x) for x in open(greedy).read().replace(",", " ").split()]
ok = d <= 1e-4 and g == ref["greedy_tokens"]
print(f"flashkv logits --backend cuda, hf-tiny-a chunk {chunk}: max|d| {d:.3g} vs transformers, "
      f"greedy {'equal' if g == ref['greedy_tokens'] else 'DIFFERENT'}: {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
    done
  fi
  if [[ $what == flashbench ]]; then
    # ~8k tokens of prefill (about 28 s at the measured ~290 tok/s) plus 81 GB of weights
    # generated on the GPU: well under three minutes. The prompt is the repository's bench
    # text, tokenized with models/tokenizer/tokenizer.json (random models have no
    # vocabulary of their own).
    /work/main/build-cuda/flashkv bench --backend cuda --model random:flash \
      --ctx-start 2048 --ctx-max 8192 --step-mul 2 --gen-tokens 16 \
      --csv "$OUT/flash-sweep.csv" --plot "$OUT/flash-sweep.svg" "$@" 2>&1 \
      | tee "$OUT/flash-sweep.log" || rc=1
    if [[ -f $OUT/flash-sweep.csv ]]; then cat "$OUT/flash-sweep.csv"; fi
  fi
  if [[ $what == bench || $what == all ]]; then
    /work/main/build-cuda/bench/flashkv_bench_cuda --json "$OUT/bench.json" "$@" 2>&1 \
      | tee "$OUT/bench.log" || rc=1
  fi
  return $rc
}

case $MODE in
  stage) stage ;;
  device) device "$@" ;;
  *)
    echo "usage: $0 stage | device [tests|bench|cli|flashbench|all] [extra args...]" >&2
    exit 2
    ;;
esac
