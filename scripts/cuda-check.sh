#!/usr/bin/env bash
# CUDA check in two halves, because the GPU machine has the CUDA toolkit but not flashkv's
# Debian dependencies, and its time is scarce:
#   scripts/cuda-check.sh stage    (here) build the CUDA test and benchmark binaries (and,
#                                  with STAGE_FLASHKV=1, the flashkv binary) in
#                                  build-cuda/ and stage them and the shared libraries
#                                  they need in .devcarry/ (the fixtures travel with the
#                                  working tree: tests/data/fixtures)
#   scripts/cuda-check.sh device [tests|bench|cli|prefill-solo|flashbench|flashbench-imma|imma|tiled|tiled-sanitize|indexer|prefill-explore|prefill-tiles|prefill-final|prefill-ncu|decode|decode-tests|decode-bench|decode-run|decode-final|verify|batch|batch-new|fast|fast-final|formats|sanitize|serve|all] [extra args...]
#                                  (on the GPU machine, from the repo root, with
#                                  .devcarry carried) run the GPU tests and/or the Flash
#                                  benchmark, logs and JSON under $OUT (default ./out-cuda).
#                                  flashbench (needs STAGE_FLASHKV=1 at stage time):
#                                  `flashkv bench --backend cuda --model random:flash`, a
#                                  context sweep of the real Model on Flash-shaped random
#                                  weights; extra args are appended to its flags (later
#                                  ones win, e.g. --ctx-max 4096 or --model random:flash:12).
#                                  imma: the int8 tensor-core MatMul kernel — its tests, the
#                                  SASS check (IMMA instructions), the kernel microbenchmark
#                                  and the Flash prefill with dp4a vs tensor-core kernels in
#                                  one process (extra args go to that last run).
#                                  tiled: the tiled prefill kernels (attention, compressor,
#                                  F16 products) — the GPU tests, the Flash prefill with them
#                                  off and on in one process (--tiled-compare 0,1, logits
#                                  compared bit for bit, kernel profile of each; extra args go
#                                  there); tiled-sanitize: their small-shape tests under
#                                  compute-sanitizer (memcheck, racecheck).
#                                  decode: the fused decode kernels (FLASHKV_CUDA_FUSED) —
#                                  every GPU test (CudaFusedTest: each fused op against the
#                                  unfused kernels and the CPU, the model with fusion on), the
#                                  whole-model tests again with FLASHKV_CUDA_FUSED=1, the
#                                  fused ops' small-shape tests under compute-sanitizer
#                                  (memcheck, racecheck, synccheck), then the decode
#                                  microbenchmark (flashkv_bench_cuda --decode-micro at
#                                  DECODE_FRONTIERS, default 2048,8192,32768: unfused vs fused
#                                  in one process, bits compared, kernels per token and per
#                                  layer, per-kernel GB/s next to a device copy; extra args go
#                                  there). decode-tests / decode-bench: the two halves alone.
#                                  indexer: the tiled indexer scores — their tests, the
#                                  other tiled, int8 and whole-model GPU tests, memcheck and
#                                  racecheck on the small shapes, then the Flash prefill with
#                                  the tiled kernels but the indexer's one-token kernel (2)
#                                  and with all of them (1) in one process (profiled chunks
#                                  at INDEXER_PROFILE_AT, default 0,30720; extra args go
#                                  there).
#                                  prefill-explore: the Q8_0 microbenchmark (every tile
#                                  variant) and the Flash prefill in chunks of 2,048 / 4,096 /
#                                  8,192 (profiled first and last chunks).
#                                  prefill-tiles: the expert tiles of 64 pairs vs 32 (imma
#                                  1 vs 4): GPU tests, SASS, sanitizers on the small MoE
#                                  shapes, chunks of 2,048 and 8,192 profiled. prefill-final
#                                  (STAGE_FLASHKV=1): `flashkv bench` 2k -> 32k and the 25k
#                                  cold prompt through `flashkv serve` (serve_tiers.py).
#                                  prefill-ncu: the SASS of the int8 and indexer kernels
#                                  (sass.txt.gz) and, where ncu exists, their issue rates and
#                                  stall reasons (ncu-*.log).
#                                  verify: speculative decoding's verify step (--verify-rows) and
#                                  a 1-layer step, the MTP drafter's stand-in.
#                                  fast: issue #31's fast float path (--numerics fast) — the
#                                  GPU tests, the Flash prefill exact vs fast in one process,
#                                  the strided activation quantizer, sanitizers (fast.tgz).
#                                  fast-final (STAGE_FLASHKV=1): `flashkv bench` exact and fast
#                                  2k … 32k, the 25k cold prompt through `flashkv serve` both
#                                  ways, the fast indexer off/on (fast-final.tgz).
#                                  batch-new: issue #30's latest step against the build
#                                  before it (.devcarry/base/): tests, batch runs, prefill,
#                                  sanitizers, ncu of the narrow expert kernels (batch-new.tgz).
#                                  decode-run: decode-tests and decode-bench in one call, with a
#                                  baseline build's microbenchmark when staged beside it.
#                                  decode-final: the final decode figures (random:flash and a
#                                  Flash-width GGUF of FINAL_LAYERS layers, this build and the
#                                  baseline staged in .devcarry/base/; STAGE_FLASHKV=1).
#                                  formats: every GPU test (the GGUF block-type kernels'
#                                  CPU twins among them), memcheck on CudaKQuantTest (or
#                                  FORMATS_MEMCHECK, a gtest filter), then the block-type
#                                  matvec microbenchmark (flashkv_bench_cuda --formats).
#                                  sanitize: its small-shape test under compute-sanitizer
#                                  (memcheck, racecheck). flashbench-imma: the flashbench
#                                  sweep with FLASHKV_CUDA_IMMA=0, then with the default.
# The binaries carry absolute paths of the checkout they were built in (whose
# tests/data/fixtures the tests read); stage records that root in .devcarry/build-root and
# copies this script to .devcarry/, and the device half recreates those paths as links, so a
# build staged in any worktree runs from any checkout that carries .devcarry
# (`bash .devcarry/cuda-check.sh device ...`).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=${1:-}
shift || true

stage() {
  # STAGE_BUILD: another build directory's binaries (staged under the same names).
  local B=${STAGE_BUILD:-build-cuda}
  if [[ ! -f $B/build.ninja ]]; then
    cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHKV_CUDA=ON -DFLASHKV_NATIVE=OFF \
      -DCMAKE_CXX_FLAGS=-march=x86-64-v3 -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc
  fi
  ninja -C $B -j2 backend_cuda_test flashkv_bench_cuda flashkv_host_link_probe ${STAGE_FLASHKV:+flashkv}
  rm -rf .devcarry
  mkdir -p .devcarry/build-cuda/tests/backend/cuda .devcarry/build-cuda/bench .devcarry/lib
  cp $B/tests/backend/cuda/backend_cuda_test .devcarry/build-cuda/tests/backend/cuda/
  cp $B/bench/flashkv_bench_cuda $B/bench/flashkv_host_link_probe .devcarry/build-cuda/bench/
  [[ -z ${STAGE_FLASHKV:-} ]] || cp $B/flashkv .devcarry/build-cuda/
  strip .devcarry/build-cuda/bench/flashkv_bench_cuda .devcarry/build-cuda/bench/flashkv_host_link_probe \
    .devcarry/build-cuda/tests/backend/cuda/backend_cuda_test ${STAGE_FLASHKV:+.devcarry/build-cuda/flashkv}
  # Non-system libraries the binaries link (the CUDA runtime is static).
  for bin in .devcarry/build-cuda/bench/flashkv_bench_cuda \
    .devcarry/build-cuda/tests/backend/cuda/backend_cuda_test ${STAGE_FLASHKV:+.devcarry/build-cuda/flashkv}; do
    ldd "$bin" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libgcc_s|libstdc\+\+|libpthread|libdl|librt)\.so' \
      | xargs -r -I{} cp -L {} .devcarry/lib/
  done
  echo "$ROOT" > .devcarry/build-root
  cp scripts/cuda-check.sh .devcarry/
  # Node and the official client packages for `device serve` (the GPU machine has no npm).
  if [[ -n ${STAGE_NODE:-} ]]; then
    cp "$(readlink -f "$(command -v node)")" .devcarry/node
    cp -r tests/clients/node_modules .devcarry/node_modules
  fi
  chmod -R u+w .devcarry
  du -sh .devcarry
}

device() {
  local what=${1:-all}
  shift || true
  OUT=${OUT:-$ROOT/out-cuda}
  mkdir -p "$OUT"
  # Recreate the build-time paths (links left by an earlier call are kept).
  link() { [[ -e $2 || -L $2 ]] || { mkdir -p "$(dirname "$2")" && ln -s "$1" "$2"; }; }
  local BR
  BR=$(cat "$ROOT/.devcarry/build-root" 2>/dev/null || echo /work/main)
  link "$ROOT" /work/main
  link "$ROOT" "$BR"
  link "$ROOT/.devcarry/build-cuda" "$ROOT/build-cuda"
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
  if [[ $what == flashbench-imma ]]; then
    # The same sweep twice in one call: dp4a kernels (FLASHKV_CUDA_IMMA=0), then the int8
    # tensor-core prefill kernels (the default).
    for imma in 0 1; do
      FLASHKV_CUDA_IMMA=$imma /work/main/build-cuda/flashkv bench --backend cuda \
        --model random:flash --ctx-start 2048 --ctx-max 8192 --step-mul 2 --gen-tokens 16 \
        --csv "$OUT/flash-sweep-imma$imma.csv" "$@" 2>&1 | tee "$OUT/flash-sweep-imma$imma.log" \
        || rc=1
      if [[ -f $OUT/flash-sweep-imma$imma.csv ]]; then cat "$OUT/flash-sweep-imma$imma.csv"; fi
    done
  fi
  if [[ $what == prefill-solo ]]; then
    # Issue #31: `flashkv bench` with prompts in chunks of 2,048 (--prefill-chunk-solo 1: off)
    # and with the default solo chunk (8,192 on CUDA, the engine's rule while nothing decodes),
    # one process each on the same model (SOLO_MODEL, default random:flash; random:flash:16
    # fits an H100), frontiers 2,048 … SOLO_CTX_MAX (default 16384) doubling. Extra args go to
    # both runs.
    local tag
    for tag in off auto; do
      local solo=()
      [[ $tag == off ]] && solo=(--prefill-chunk-solo 1)
      timeout "${SOLO_TIMEOUT_S:-240}" /work/main/build-cuda/flashkv bench --backend cuda \
        --model "${SOLO_MODEL:-random:flash}" --ctx-start 2048 --ctx-max "${SOLO_CTX_MAX:-16384}" \
        --step-mul 2 --gen-tokens 0 "${solo[@]}" --csv "$OUT/solo-$tag.csv" "$@" \
        > "$OUT/solo-$tag.log" 2>&1 || rc=1
      echo "== solo chunk $tag"; grep -E '^bench:' "$OUT/solo-$tag.log" | cut -c1-220
      cat "$OUT/solo-$tag.csv" 2>/dev/null || tail -5 "$OUT/solo-$tag.log"
    done
  fi
  if [[ $what == flashbench ]]; then
    # ~8k tokens of prefill (about 28 s at the measured ~290 tok/s) plus 81 GB of weights
    # generated on the GPU: well under three minutes. The prompt is the repository's bench
    # text, tokenized with models/tokenizer/tokenizer.json (random models have no
    # vocabulary of their own).
    /work/main/build-cuda/flashkv bench --backend cuda --model random:flash \
      --ctx-start 2048 --ctx-max "${FLASHBENCH_CTX_MAX:-8192}" --step-mul 2 --gen-tokens 16 \
      --csv "$OUT/flash-sweep.csv" --plot "$OUT/flash-sweep.svg" "$@" 2>&1 \
      | tee "$OUT/flash-sweep.log" || rc=1
    if [[ -f $OUT/flash-sweep.csv ]]; then cat "$OUT/flash-sweep.csv"; fi
  fi
  if [[ $what == imma ]]; then
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda
    "$TB" --gtest_color=no --gtest_filter='CudaImmaTest.*' > "$OUT/imma-tests.log" 2>&1 || rc=1
    grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|max\|d\|' "$OUT/imma-tests.log" \
      | head -60 || true
    local OD
    OD=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1 || true)
    if [[ -n $OD ]]; then
      # IMMA instructions per tensor-core kernel, and local-memory (spill) traffic in them.
      "$OD" --dump-sass "$TB" 2>/dev/null | awk '/Function :/ {f = $3} /IMMA/ {n[f]++}
        /LDL|STL/ {l[f]++} END {for (k in n) if (k ~ /Imma/) print "SASS:", n[k], "IMMA,",
        l[k] + 0, "LDL/STL in", k}' || true
    fi
    "$BB" --matmul --skip-model --json "$OUT/matmul.json" 2>&1 | tee "$OUT/matmul.log" || rc=1
    "$BB" --imma-compare 0,1 --frontiers 2048,8192 --decode-steps 32 --warmup-steps 8 --ttft 0 \
      --json "$OUT/imma-compare.json" "$@" 2>&1 | tee "$OUT/imma-compare.log" || rc=1
  fi
  if [[ $what == tiled ]]; then
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda
    "$TB" --gtest_color=no --gtest_output=json:"$OUT/gpu-tests.json" > "$OUT/gpu-tests.log" 2>&1 || rc=1
    grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|max\|d\||mismatch|differ' \
      "$OUT/gpu-tests.log" | head -80 || true
    "$BB" --tiled-compare 0,1 --profile --frontiers "${TILED_FRONTIERS:-2048,8192}" --decode-steps 16 --warmup-steps 4 \
      --ttft 0 --json "$OUT/tiled-compare.json" "$@" 2>&1 | tee "$OUT/tiled-compare.log" | grep -v '^ ' || rc=1
    # The largest kernels of each setup's first chunk, names shortened.
    grep -A14 ', chunk at' "$OUT/tiled-compare.log" | sed -E 's/_ZN7flashkv4cuda[0-9]*(_GLOBAL__N__[0-9a-f_]+_[a-z_]+_cu_[0-9a-f]+)?[0-9]*//; s/(.{100}).*/\1/' || true
  fi
  if [[ $what == indexer ]]; then
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda
    "$TB" --gtest_color=no --gtest_filter='CudaTiledTest.*:CudaOpsTest.Indexer*:CudaModelTest.*:CudaImmaTest.*' \
      --gtest_output=json:"$OUT/gpu-tests.json" > "$OUT/gpu-tests.log" 2>&1 || rc=1
    grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|max\|d\||mismatch|differ' \
      "$OUT/gpu-tests.log" | head -80 || true
    local CS
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
    if [[ -n $CS ]]; then
      for tool in memcheck racecheck; do
        timeout 60 "$CS" --tool $tool --error-exitcode 9 "$TB" --gtest_color=no \
          --gtest_filter='CudaTiledTest.Indexer*Small' > "$OUT/sanitizer-$tool.log" 2>&1 || rc=1
        tail -3 "$OUT/sanitizer-$tool.log"
      done
    fi
    "$BB" --tiled-compare 2,1 --profile --frontiers "${TILED_FRONTIERS:-2048,8192,32768}" \
      --decode-steps 16 --warmup-steps 4 --ttft 0 --profile-at "${INDEXER_PROFILE_AT:-0,30720}" \
      --json "$OUT/indexer-compare.json" "$@" 2>&1 | tee "$OUT/indexer-compare.log" | grep -v '^ ' || rc=1
    grep -A16 ', chunk at' "$OUT/indexer-compare.log" | sed -E 's/_ZN7flashkv4cuda[0-9]*(_GLOBAL__N__[0-9a-f_]+_[a-z_]+_cu_[0-9a-f]+)?[0-9]*//; s/(.{100}).*/\1/' || true
  fi
  if [[ $what == prefill-explore ]]; then
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda
    local short='s/_ZN7flashkv4cuda[0-9]*(_GLOBAL__N__[0-9a-f_]+_[a-z_]+_cu_[0-9a-f]+)?[0-9]*//; s/(.{100}).*/\1/'
    timeout 60 "$BB" --matmul --skip-model --json "$OUT/matmul.json" > "$OUT/matmul.log" 2>&1 || rc=1
    grep -E '^(shape|attn|ffn|per )' "$OUT/matmul.log" | cut -c1-200 || true
    for chunk in 2048 4096 8192; do
      local last=$((32768 - chunk))
      timeout 60 "$BB" --tiled-compare 1 --chunk $chunk --profile --frontiers 8192,32768 \
        --decode-steps 8 --warmup-steps 2 --ttft 0 --profile-at 0,$last \
        --json "$OUT/chunk$chunk.json" > "$OUT/chunk$chunk.log" 2>&1 || rc=1
      grep -E 'prefill 0|decode' "$OUT/chunk$chunk.log" || true
      grep -A8 ', chunk at' "$OUT/chunk$chunk.log" | sed -E "$short" || true
    done
  fi
  if [[ $what == prefill-tiles ]]; then
    # Issue #13's expert tiles of 64 pairs (imma 1) against the 32 of before (imma 4): every
    # GPU test, the SASS of the tensor-core kernels, memcheck + racecheck on the small MoE
    # shapes, then the Flash prefill in chunks of 2,048 and 8,192 with both in one process
    # (logits compared bit for bit; first and last chunks profiled).
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda
    local short='s/_ZN7flashkv4cuda[0-9]*(_GLOBAL__N__[0-9a-f_]+_[a-z_]+_cu_[0-9a-f]+)?[0-9]*//; s/(.{110}).*/\1/'
    timeout 90 "$TB" --gtest_color=no --gtest_output=json:"$OUT/gpu-tests.json" > "$OUT/gpu-tests.log" 2>&1 || rc=1
    grep -E '^\[ +(FAILED|PASSED|SKIPPED) |^\[==|Failure|Expected|Which is|max\|d\||mismatch' \
      "$OUT/gpu-tests.log" | head -60 || true
    local OD CS
    OD=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1 || true)
    if [[ -n $OD ]]; then
      "$OD" --dump-sass "$TB" 2>/dev/null | awk '/Function :/ {f = $3} /IMMA/ {n[f]++}
        /^ +\/\*[0-9a-f]+\*\// {c[f]++} /LDL|STL/ {l[f]++} END {for (k in n) if (k ~ /Imma/)
        print "SASS:", c[k], "instructions,", n[k], "IMMA,", l[k] + 0, "LDL/STL in", k}' \
        | sed -E "$short" || true
    fi
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
    if [[ -n $CS ]]; then
      for tool in memcheck racecheck; do
        timeout 60 "$CS" --tool $tool --error-exitcode 9 "$TB" --gtest_color=no \
          --gtest_filter='CudaImmaTest.SmallMoe*' > "$OUT/sanitizer-$tool.log" 2>&1 || rc=1
        tail -3 "$OUT/sanitizer-$tool.log"
      done
    fi
    for chunk in 2048 8192; do
      timeout 80 "$BB" --imma-compare 4,1 --chunk $chunk --profile --frontiers 8192,32768 \
        --decode-steps 8 --warmup-steps 2 --ttft 0 --profile-at 0,$((32768 - chunk)) \
        --json "$OUT/chunk$chunk.json" > "$OUT/chunk$chunk.log" 2>&1 || rc=1
      grep -E '^imma|prefill 0|decode|identical|differ|device memory' "$OUT/chunk$chunk.log" | cut -c1-200 || true
      grep -A12 ', chunk at' "$OUT/chunk$chunk.log" | sed -E "$short" || true
    done
  fi
  if [[ $what == prefill-final ]]; then
    # Issue #13's closing figures: the int8 and whole-model GPU tests, the profiled Flash
    # prefill (32- vs 64-pair expert tiles, chunks of 2,048), `flashkv bench` 2k -> 32k as
    # users run it, then the 25,000-token cold prompt's time to first token through
    # `flashkv serve` (and its cache tiers; extra args go to serve_tiers.py).
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda
    local short='s/_ZN7flashkv4cuda[0-9]*(_GLOBAL__N__[0-9a-f_]+_[a-z_]+_cu_[0-9a-f]+)?[0-9]*//; s/(.{110}).*/\1/'
    timeout 60 "$TB" --gtest_color=no --gtest_filter='CudaImmaTest.*:CudaModelTest.*' \
      > "$OUT/gpu-tests.log" 2>&1 || rc=1
    grep -E '^\[ +(FAILED|PASSED) |^\[==|Failure|Expected|Which is' "$OUT/gpu-tests.log" | head -30 || true
    timeout 60 "$BB" --imma-compare 4,1 --profile --frontiers 8192,32768 --decode-steps 8 \
      --warmup-steps 2 --ttft 0 --profile-at 0,30720 --json "$OUT/chunk2048.json" \
      > "$OUT/chunk2048.log" 2>&1 || rc=1
    grep -E '^imma|device memory' "$OUT/chunk2048.log" | cut -c1-200 || true
    grep -A8 ', chunk at' "$OUT/chunk2048.log" | sed -E "$short" || true
    /work/main/build-cuda/flashkv bench --backend cuda --model random:flash \
      --ctx-start 2048 --ctx-max 32768 --step-mul 2 --gen-tokens 16 \
      --csv "$OUT/flash-sweep.csv" > "$OUT/flash-sweep.log" 2>&1 || rc=1
    if [[ -f $OUT/flash-sweep.csv ]]; then cat "$OUT/flash-sweep.csv"; fi
    timeout 120 python3 "$ROOT/bench/serve/serve_tiers.py" --flashkv /work/main/build-cuda/flashkv \
      --backend cuda --model random:flash --out "$OUT/tiers" "$@" > "$OUT/tiers.log" 2>&1 || rc=1
    tail -25 "$OUT/tiers.log" | cut -c1-220
  fi
  if [[ $what == prefill-ncu ]]; then
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda
    local OD
    OD=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1 || true)
    if [[ -n $OD ]]; then
      "$OD" --dump-sass "$TB" 2>/dev/null | awk '/Function :/ {keep = ($3 ~ /MatMulImmaQ8_0|GateUpImma|DownImma|IndexScore/)}
        keep' | gzip > "$OUT/sass.txt.gz" || true
      ls -la "$OUT/sass.txt.gz"
    fi
    local NCU
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute*/ncu 2>/dev/null | head -1 || true)
    echo "ncu: ${NCU:-not found}"
    if [[ -n $NCU ]]; then
      local sections=(--section SpeedOfLight --section WarpStateStats --section SchedulerStats
        --section Occupancy --section ComputeWorkloadAnalysis --section InstructionStats)
      timeout 60 "$NCU" --kernel-name regex:'MatMulImmaQ8_0|GateUpImma|DownImma' --launch-count 3 \
        "${sections[@]}" "$BB" --matmul --skip-model --matmul-reps 1 > "$OUT/ncu-int8.log" 2>&1 || true
      timeout 40 "$NCU" --kernel-name regex:'IndexScoreTiled' --launch-count 1 --launch-skip 2 \
        "${sections[@]}" "$TB" --gtest_filter='CudaTiledTest.IndexerScoresAreBitIdenticalToDecodeAtFlashShapes' \
        > "$OUT/ncu-indexer.log" 2>&1 || true
      grep -hE '^  [a-z].*\(|Issued Warp|Eligible Warps|Cycles Per Issued|Compute \(SM\)|Stall|stall' \
        "$OUT"/ncu-*.log | cut -c1-160 | head -60 || true
    fi
  fi
  if [[ $what == tiled-sanitize ]]; then
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    local CS
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
    if [[ -n $CS ]]; then
      for tool in memcheck racecheck; do
        timeout 45 "$CS" --tool $tool --error-exitcode 9 "$TB" --gtest_color=no \
          --gtest_filter='CudaTiledTest.*Small' > "$OUT/sanitizer-$tool.log" 2>&1 || rc=1
        tail -3 "$OUT/sanitizer-$tool.log"
      done
    fi
  fi
  if [[ $what == decode || $what == decode-tests ]]; then
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    "$TB" --gtest_color=no --gtest_output=json:"$OUT/gpu-tests.json" > "$OUT/gpu-tests.log" 2>&1 || rc=1
    grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which is' "$OUT/gpu-tests.log" \
      | head -120 || true
    # The fused tests' comparisons (vs the CPU, and the model runs' bit counts).
    grep -E 'vs CPU|differ' "$OUT/gpu-tests.log" | head -80 || true
    # Every whole-model test again with the fused kernels as the backend's default.
    FLASHKV_CUDA_FUSED=1 "$TB" --gtest_color=no --gtest_filter='CudaModelTest.*' \
      > "$OUT/gpu-model-tests-fused.log" 2>&1 || rc=1
    grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) |Failure|max\|d\||argmax' \
      "$OUT/gpu-model-tests-fused.log" | head -40 || true
    local CS
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
    if [[ -n $CS ]]; then
      for tool in memcheck racecheck synccheck; do
        timeout 120 "$CS" --tool $tool --error-exitcode 9 "$TB" --gtest_color=no \
          --gtest_filter='CudaFusedTest.*Small' > "$OUT/sanitizer-decode-$tool.log" 2>&1 || rc=1
        tail -3 "$OUT/sanitizer-decode-$tool.log"
      done
    else
      echo "compute-sanitizer: not found"
    fi
  fi
  if [[ $what == decode || $what == decode-bench ]]; then
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda
    "$BB" --decode-micro --frontiers "${DECODE_FRONTIERS:-2048,8192,32768}" --decode-steps 32 \
      --warmup-steps 8 --profile-steps 4 --ttft 0 --json "$OUT/decode-micro.json" "$@" 2>&1 \
      | tee "$OUT/decode-micro.log" || rc=1
  fi
  if [[ $what == verify ]]; then
    # Speculative decoding's verify step (issue #29): at VERIFY_FRONTIERS (default 8192) the
    # decode microbenchmark with --verify-rows VERIFY_ROWS (default 1,2,3,4: a KvCheckpoint
    # capture, one forward of r rows with every row's logits, the restore; the rows' logits
    # compared with the one-token steps'), then a 1-layer model's step (the MTP drafter's
    # stand-in: one block and the shared head). Extra args go to the first (e.g. --layers 16).
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda
    local VF=${VERIFY_FRONTIERS:-8192}
    "$BB" --decode-micro --frontiers "$VF" --decode-steps 16 --warmup-steps 4 --profile-steps 2 \
      --ttft 0 --verify-rows "${VERIFY_ROWS:-1,2,3,4}" --json "$OUT/verify.json" "$@" \
      > "$OUT/verify.log" 2>&1 || rc=1
    grep -E '^frontier [0-9]+, fused:|verify step' "$OUT/verify.log" | cut -c1-160 || true
    "$BB" --decode-micro --frontiers "${VF%%,*}" --decode-steps 32 --warmup-steps 8 \
      --profile-steps 4 --ttft 0 --layers 1 > "$OUT/verify-drafter.log" 2>&1 || rc=1
    grep -E '^frontier [0-9]+, fused:' "$OUT/verify-drafter.log" | cut -c1-160 || true
  fi
  # memcheck and racecheck of the GPU tests matching gtest filter $1, logs sanitizer-<tool>$2.log.
  sanitize_filter() {
    local CS tool
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
    for tool in memcheck racecheck; do
      timeout 120 "$CS" --tool $tool --error-exitcode 9 /work/main/build-cuda/tests/backend/cuda/backend_cuda_test \
        --gtest_color=no --gtest_filter="$1" > "$OUT/sanitizer-$tool$2.log" 2>&1 || rc=1
      grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/sanitizer-$tool$2.log" || true
    done
  }
  if [[ $what == fast ]]; then
    # Issue #31's fast float path (--numerics fast): every GPU test (CudaFastTest: the per-op
    # NMSE and the ds4-tiny spread), the Flash prefill exact vs fast (two and one TF32 terms)
    # in one process with the logits' distance and a profiled chunk of each (FAST_LAYERS,
    # default: 43 where the GPU has > 100 GB, else 16), the spread at Flash width
    # (--fast-spread: CUDA exact, fast and the CPU backend over one prompt), and the
    # sanitizers on the fast kernel's small shapes. Extra args go to the two benchmark runs
    # (e.g. --fast-indexer 0). fast.tgz is re-packed after every stage.
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda
    pack() { tar czf "$OUT/fast.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null || true; }
    local mem L
    mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1 || echo 0)
    L=${FAST_LAYERS:-$([[ ${mem:-0} -gt 100000 ]] && echo 43 || echo 16)}
    echo "layers $L (GPU memory ${mem} MiB)"
    timeout 240 /work/main/build-cuda/tests/backend/cuda/backend_cuda_test --gtest_color=no \
      --gtest_output=json:"$OUT/gpu-tests.json" > "$OUT/gpu-tests.log" 2>&1 || rc=1
    grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|NMSE|top-1' "$OUT/gpu-tests.log" | head -40 || true
    pack
    timeout 200 "$BB" --fast-compare 0,2,1 --frontiers "${FAST_FRONTIERS:-2048,8192}" --decode-steps 8 \
      --warmup-steps 2 --ttft 0 --layers "$L" --profile --profile-at "${FAST_PROFILE_AT:-0,6144}" \
      --json "$OUT/fast-compare.json" "$@" > "$OUT/fast-compare.log" 2>&1 || rc=1
    grep -E 'prefill 0|decode|NMSE|greedy' "$OUT/fast-compare.log" || true
    grep -E 'MatMulFast|FastReduce|MatVecTiled|Attn(Scores|Values)|chunk at' "$OUT/fast-compare.log" | cut -c1-150 | head -60 || true
    pack
    # The spread: the same prompt on CUDA exact / fast and on the CPU (FAST_SPREAD tokens).
    timeout 300 "$BB" --fast-spread "${FAST_SPREAD:-512}" --layers "$L" --ttft 0 \
      --json "$OUT/fast-spread.json" "$@" > "$OUT/fast-spread.log" 2>&1 || rc=1
    grep -E 'spread|top-1' "$OUT/fast-spread.log" || true
    pack
    sanitize_filter 'CudaFastTest.ProductsWithinTheToleranceSmall:CudaFastTest.ShapesOutside*:CudaFastTest.AttentionWithinTheToleranceSmall:CudaFastTest.IndexerScores*' ""
    pack
  fi
  if [[ $what == fast-final ]]; then
    # Issue #31's figures through the CLI (STAGE_FLASHKV=1): `flashkv bench` exact and with
    # --numerics fast on FINAL_MODEL (default random:flash where the GPU has > 100 GB, else
    # random:flash:16), frontiers 2,048 … 32,768 doubling, and the 25,000-token cold prompt's
    # time to first token through `flashkv serve` both ways (bench/serve/serve_tiers.py, the
    # tiers part only). fast-final.tgz is re-packed after every stage.
    pack() { tar czf "$OUT/fast-final.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null || true; }
    local mem model tag
    mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1 || echo 0)
    model=${FINAL_MODEL:-$([[ ${mem:-0} -gt 100000 ]] && echo random:flash || echo random:flash:16)}
    echo "model $model (GPU memory ${mem} MiB)"
    # FINAL_TESTS=1: every GPU test first.
    if [[ ${FINAL_TESTS:-0} == 1 ]]; then
      timeout 240 /work/main/build-cuda/tests/backend/cuda/backend_cuda_test --gtest_color=no \
        --gtest_output=json:"$OUT/gpu-tests.json" > "$OUT/gpu-tests.log" 2>&1 || rc=1
      grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|top-1' "$OUT/gpu-tests.log" | head -20 || true
      pack
    fi
    for tag in exact fast; do
      local num=()
      [[ $tag == fast ]] && num=(--numerics fast)
      timeout 240 /work/main/build-cuda/flashkv bench --backend cuda --model "$model" \
        --ctx-start 2048 --ctx-max "${FINAL_CTX_MAX:-32768}" --step-mul 2 --gen-tokens 16 \
        "${num[@]}" --csv "$OUT/bench-$tag.csv" > "$OUT/bench-$tag.log" 2>&1 || rc=1
      echo "== flashkv bench $tag"; cat "$OUT/bench-$tag.csv" 2>/dev/null || tail -5 "$OUT/bench-$tag.log"
      pack
    done
    for tag in exact fast; do
      local flags=()
      [[ $tag == fast ]] && flags=(--serve-flag=--numerics=fast)
      mkdir -p "$OUT/serve-$tag"
      timeout 240 python3 "$ROOT/bench/serve/serve_tiers.py" --flashkv /work/main/build-cuda/flashkv \
        --backend cuda --model "$model" --skip identity,stall,exchange --out "$OUT/serve-$tag" \
        "${flags[@]}" > "$OUT/serve-$tag.log" 2>&1 || rc=1
      echo "== serve $tag"; grep -iE 'cold|live|ram|disk|ttft' "$OUT/serve-$tag.log" | head -12 || tail -5 "$OUT/serve-$tag.log"
      pack
    done
    # The fast path with the indexer scores on the exact kernel and on the tensor cores
    # (--fast-indexer 0 / 1), exact beside each, at FINAL_INDEXER_AT (default 8,192 and 32,768).
    local L=43 ix
    [[ $model == random:flash:* ]] && L=${model##*:}
    for ix in 0 1; do
      timeout 200 /work/main/build-cuda/bench/flashkv_bench_cuda --fast-compare 0,2 --fast-indexer $ix \
        --frontiers "${FINAL_INDEXER_AT:-8192,32768}" --decode-steps 4 --warmup-steps 1 --ttft 0 \
        --layers "$L" --json "$OUT/indexer-$ix.json" > "$OUT/indexer-$ix.log" 2>&1 || rc=1
      echo "== fast indexer $ix"; grep -E 'prefill 0' "$OUT/indexer-$ix.log" || tail -5 "$OUT/indexer-$ix.log"
      pack
    done
  fi
  if [[ $what == batch-new ]]; then
    # Issue #30's latest step against the build before it (.devcarry/base/flashkv_bench_cuda,
    # when staged): every GPU test, then --batch-micro at BATCH_SIZES (default 1,4,16,64;
    # BATCH_LAYERS layers, default 16, so the H100 holds them) — this build, the base build
    # with its defaults and with BASE_ENV (default: the narrow tiles and FinishRowsKernel on),
    # this build without the grouped tiles (the tensor cores from 2 rows) and with pageable
    # logits (--batch-pinned 0) — the Flash prefill
    # in chunks of 2,048 to 8,192 tokens with both builds (the prefill tiles share the expert
    # kernels), memcheck and racecheck on the small shapes, and where ncu exists the narrow
    # expert kernels' stall samples in a 64-row step (scripts/sass-stalls.py). The logs are
    # re-tarred into batch-new.tgz after every stage: a cut-off call still returns what ran.
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda
    local BASE_BB=$ROOT/.devcarry/base/flashkv_bench_cuda
    pack() { tar czf "$OUT/batch-new.tgz" -C "$OUT" --exclude='*.tgz' --exclude='*.ncu-rep' . 2>/dev/null || true; }
    timeout 150 "$TB" --gtest_color=no --gtest_output=json:"$OUT/gpu-tests.json" \
      > "$OUT/gpu-tests.log" 2>&1 || rc=1
    grep -E '^\[  (PASSED|FAILED)|^\[  FAILED' "$OUT/gpu-tests.log" || true
    pack
    local L=${BATCH_LAYERS:-16}
    local NB=(--batch-micro "${BATCH_SIZES:-1,4,16,64}" --frontiers 256 --decode-steps 8
      --warmup-steps 3 --profile-steps 2 --ttft 0 --layers "$L")
    local runs=("new||$BB" "group0|FLASHKV_CUDA_MOE_GROUP_MAX=0|$BB" "pageable||$BB|--batch-pinned 0"
      "rows|FLASHKV_CUDA_QUANT_ROWS=1|$BB")
    if [[ -x $BASE_BB ]]; then
      runs+=("base||$BASE_BB"
        "base-env|${BASE_ENV:-FLASHKV_CUDA_MOE_NARROW=4 FLASHKV_CUDA_FINISH_BATCH=1}|$BASE_BB")
    fi
    local r tag envs bin extra
    for r in "${runs[@]}"; do
      IFS='|' read -r tag envs bin extra <<< "$r"
      # BATCH_RUNS="new base …": only those (e.g. at 43 layers on an H200, where each run
      # generates 81 GB of weights).
      [[ -z ${BATCH_RUNS:-} || " $BATCH_RUNS " == *" $tag "* ]] || continue
      # shellcheck disable=SC2086
      timeout 90 env $envs "$bin" "${NB[@]}" $extra > "$OUT/batch-$tag.log" 2>&1 || rc=1
      echo "== $tag $envs"; grep -E '^batch [0-9]' "$OUT/batch-$tag.log" | cut -c1-120 || true
      pack
    done
    local PF=(--frontiers "2048,8192" --decode-steps 4 --warmup-steps 1 --ttft 0 --layers "$L"
      --profile)
    timeout 90 "$BB" "${PF[@]}" > "$OUT/prefill-new.log" 2>&1 || rc=1
    [[ ! -x $BASE_BB ]] || timeout 90 "$BASE_BB" "${PF[@]}" > "$OUT/prefill-base.log" 2>&1 || rc=1
    # PREFILL_ENV="NAME=VALUE …": this build's prefill once more with it (prefill-env.log).
    # shellcheck disable=SC2086
    [[ -z ${PREFILL_ENV:-} ]] || timeout 90 env $PREFILL_ENV "$BB" "${PF[@]}" \
      > "$OUT/prefill-env.log" 2>&1 || rc=1
    for tag in new base env; do
      [[ -f $OUT/prefill-$tag.log ]] || continue
      echo "== prefill $tag"; grep -E '^frontier' "$OUT/prefill-$tag.log" | cut -c1-120 || true
      grep -E 'ImmaIq2|ImmaQ2K' "$OUT/prefill-$tag.log" | head -4 || true
    done
    pack
    local CS
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
    for tool in memcheck racecheck; do
      timeout 90 "$CS" --tool $tool --error-exitcode 9 "$TB" --gtest_color=no \
        --gtest_filter='CudaImmaTest.SmallMoeExperts*:CudaImmaTest.SmallShapes*:CudaImmaTest.BothActivationQuantizers*:CudaBatchGlueTest.SmallShapes:CudaFusedTest.*NormRope*' \
        > "$OUT/sanitizer-$tool.log" 2>&1 || rc=1
      grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/sanitizer-$tool.log" || true
      pack
    done
    local NCU
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
    # BATCH_NCU=0: no ncu stage (its stall samples are in an earlier call's logs).
    if [[ -n $NCU && ${BATCH_NCU:-1} != 0 ]]; then
      local one=(--batch-micro 64 --frontiers 256 --decode-steps 1 --warmup-steps 0 --profile-steps 1
        --ttft 0 --layers "$L")
      timeout 120 "$NCU" --kernel-name-base mangled -k 'regex:(GateUpImmaIq2|DownImmaQ2K)KernelILi8E' \
        -c 2 --set full --import-source yes -f -o "$OUT/ncu-narrow" "$BB" "${one[@]}" \
        > "$OUT/ncu-narrow.log" 2>&1 || true
      if [[ -f $OUT/ncu-narrow.ncu-rep ]]; then
        "$NCU" --import "$OUT/ncu-narrow.ncu-rep" --page source --csv --print-source sass 2> /dev/null \
          | gzip -9 > "$OUT/ncu-narrow-sass.csv.gz" || true
        "$NCU" --import "$OUT/ncu-narrow.ncu-rep" --page details --csv 2> /dev/null \
          | gzip -9 > "$OUT/ncu-narrow-details.csv.gz" || true
        python3 "$ROOT/scripts/sass-stalls.py" "$OUT/ncu-narrow-sass.csv.gz" | head -30 || true
      fi
      pack
    fi
  fi
  if [[ $what == decode-run ]]; then
    # One device call of the decode work (its 240 s budget): every GPU test, the small-shape
    # fused and tile tests under memcheck and racecheck, then the decode microbenchmark at
    # DECODE_FRONTIERS (default 2048,8192) with this build and, when staged beside it
    # (.devcarry/base/flashkv_bench_cuda, the build before the change), with that one — the
    # before/after in one call. DECODE_SWEEP="NAME=VALUE …": each setting once more at the
    # first frontier (e.g. FLASHKV_CUDA_TILE_BYTES=8192), after the tile, fused and model tests
    # with it. Extra args go to the microbenchmarks.
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda
    local F=${DECODE_FRONTIERS:-2048,8192}
    "$TB" --gtest_color=no --gtest_output=json:"$OUT/gpu-tests.json" > "$OUT/gpu-tests.log" 2>&1 || rc=1
    grep -E '^\[ +(FAILED|PASSED|SKIPPED) |tests ran|Failure|Expected|Which is|mismatch' \
      "$OUT/gpu-tests.log" | head -60 || true
    local CS
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
    if [[ -n $CS ]]; then
      for tool in memcheck racecheck; do
        timeout 60 "$CS" --tool $tool --error-exitcode 9 "$TB" --gtest_color=no \
          --gtest_filter='CudaFusedTest.*Small:CudaOpsTest.MatMulQ8OneTokenTiles*' \
          > "$OUT/sanitizer-decode-$tool.log" 2>&1 || rc=1
        tail -2 "$OUT/sanitizer-decode-$tool.log"
      done
    fi
    "$BB" --decode-micro --frontiers "$F" --decode-steps 32 --warmup-steps 8 --profile-steps 4 \
      --ttft 0 --json "$OUT/decode-micro.json" "$@" > "$OUT/decode-micro.log" 2>&1 || rc=1
    grep -vE '^ +[0-9.]+ +[0-9.]+ +[0-9.]+% +[0-9]* +[0-9]*%? +(Copy|Fill|Embed|Argmax)' \
      "$OUT/decode-micro.log" | head -150 || true
    if [[ -x $ROOT/.devcarry/base/flashkv_bench_cuda ]]; then
      "$ROOT/.devcarry/base/flashkv_bench_cuda" --decode-micro --frontiers "$F" --decode-steps 32 \
        --warmup-steps 8 --profile-steps 4 --ttft 0 --json "$OUT/decode-micro-base.json" "$@" \
        > "$OUT/decode-micro-base.log" 2>&1 || rc=1
      grep -E '^frontier|weight products|copy' "$OUT/decode-micro-base.log" || true
    fi
    for kv in ${DECODE_SWEEP:-}; do
      local tag=${kv//=/-}
      env "$kv" "$TB" --gtest_color=no \
        --gtest_filter='CudaOpsTest.MatMulQ8*:CudaOpsTest.Moe*:CudaFusedTest.*:CudaModelTest.*' \
        > "$OUT/gpu-tests-$tag.log" 2>&1 || rc=1
      echo "$kv: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/gpu-tests-$tag.log" | tr '\n' ' ')"
      env "$kv" "$BB" --decode-micro --frontiers "${F%%,*}" --decode-steps 16 --warmup-steps 4 \
        --profile-steps 2 --ttft 0 "$@" > "$OUT/decode-micro-$tag.log" 2>&1 || rc=1
      grep -E '^frontier|weight products|Tile|ProjectSet|MoeGateUp|MoeDown|SublayerInput' \
        "$OUT/decode-micro-$tag.log" || true
    done
    tail -n 2 "$OUT"/sanitizer-decode-*.log 2>/dev/null || true
    # DECODE_NCU="KernelName …": Nsight Compute on two launches of each named kernel (speed
    # of light, warp stalls, occupancy), where the machine has ncu and allows it.
    # DECODE_NCU_SOURCE=1: the full set with the stall samples of every SASS instruction
    # (ncu-$k-sass.csv.gz, in the tar below; scripts/sass-stalls.py sums them by region) —
    # where a latency-bound kernel's time goes, which the sections above do not say.
    local NCU
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
    if [[ -n ${DECODE_NCU:-} && -n $NCU ]]; then
      for k in $DECODE_NCU; do
        # The first launch of MatVecTileKernel is the output head (the prompt's last token).
        local ncu_sets=(--section SpeedOfLight --section MemoryWorkloadAnalysis
          --section WarpStateStats --section SchedulerStats --section Occupancy
          --section LaunchStats)
        [[ ${DECODE_NCU_SOURCE:-0} != 1 ]] || ncu_sets=(--set full --import-source yes)
        timeout "${DECODE_NCU_TIMEOUT:-40}" "$NCU" -k "regex:$k" -c "${DECODE_NCU_COUNT:-2}" \
          "${ncu_sets[@]}" -f -o "$OUT/ncu-$k" \
          "$BB" --decode-micro --frontiers "${F%%,*}" \
          --decode-steps 1 --warmup-steps 0 --profile-steps 1 --ttft 0 "$@" > "$OUT/ncu-$k.log" 2>&1 || true
        [[ ! -f $OUT/ncu-$k.ncu-rep ]] || "$NCU" --import "$OUT/ncu-$k.ncu-rep" --page details \
          >> "$OUT/ncu-$k.log" 2>&1 || true
        if [[ ${DECODE_NCU_SOURCE:-0} == 1 && -f $OUT/ncu-$k.ncu-rep ]]; then
          "$NCU" --import "$OUT/ncu-$k.ncu-rep" --page source --csv --print-source sass \
            2> /dev/null | gzip -9 > "$OUT/ncu-$k-sass.csv.gz" || true
          python3 "$ROOT/scripts/sass-stalls.py" "$OUT/ncu-$k-sass.csv.gz" | head -40 || true
        fi
        grep -E 'Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers|Shared Memory Config|Block Limit|Stall|cycles being stalled|One or More|ERR|==PROF==|==ERROR==' \
          "$OUT/ncu-$k.log" | head -40 || true
      done
    elif [[ -n ${DECODE_NCU:-} ]]; then
      echo "ncu: not found"
    fi
    # The device tool returns few files: every log, JSON and ncu report in one tar.
    tar czf "$OUT/decode-run-logs.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null || true
  fi
  if [[ $what == decode-final ]]; then
    # The final decode figures of issue #14 in one call: the microbenchmark (unfused vs fused,
    # bits compared, kernels per token and per layer, per-kernel GB/s against a device copy)
    # at DECODE_FRONTIERS (default 2048,8192,32768) for random:flash with this build and with
    # .devcarry/base/ (the build before), the same at FINAL_LAYERS (default 8) layers, then a
    # Flash-width ds4-layout GGUF of FINAL_LAYERS layers (`flashkv make-tiny --preset
    # flash:N` under /dev/shm) through `flashkv bench` with both builds, beside
    # random:flash:N. Needs STAGE_FLASHKV=1 (and the base flashkv in .devcarry/base/).
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda FK=/work/main/build-cuda/flashkv
    local BASE=$ROOT/.devcarry/base
    local F=${DECODE_FRONTIERS:-2048,8192,32768} L=${FINAL_LAYERS:-8}
    local MICRO=(--decode-micro --decode-steps 32 --warmup-steps 8 --profile-steps 4 --ttft 0)
    "$BB" "${MICRO[@]}" --frontiers "$F" --json "$OUT/final-micro.json" > "$OUT/final-micro.log" 2>&1 || rc=1
    grep -E '^frontier|weight products|copy|bit-identical|DIFFER|kernels' "$OUT/final-micro.log" | head -40 || true
    if [[ -x $BASE/flashkv_bench_cuda ]]; then
      "$BASE/flashkv_bench_cuda" "${MICRO[@]}" --frontiers "$F" --json "$OUT/final-micro-base.json" \
        > "$OUT/final-micro-base.log" 2>&1 || rc=1
      grep -E '^frontier|weight products|copy' "$OUT/final-micro-base.log" | head -20 || true
    fi
    "$BB" "${MICRO[@]}" --layers "$L" --frontiers "$F" --json "$OUT/final-micro-l$L.json" \
      > "$OUT/final-micro-l$L.log" 2>&1 || rc=1
    grep -E '^frontier|weight products|copy' "$OUT/final-micro-l$L.log" | head -20 || true
    local G=/dev/shm/flash-$L.gguf
    local SWEEP=(bench --backend cuda --ctx-start 2048 --ctx-max 32768 --step-mul 4 --gen-tokens 64)
    df -h /dev/shm | tail -1
    { time "$FK" make-tiny --preset "flash:$L" "$G"; } > "$OUT/final-make-tiny.log" 2>&1 || rc=1
    tail -4 "$OUT/final-make-tiny.log"
    if [[ -f $G ]]; then
      "$FK" "${SWEEP[@]}" --model "$G" --csv "$OUT/final-gguf.csv" > "$OUT/final-gguf.log" 2>&1 || rc=1
      cat "$OUT/final-gguf.csv" 2>/dev/null || tail -5 "$OUT/final-gguf.log"
      if [[ -x $BASE/flashkv ]]; then
        "$BASE/flashkv" "${SWEEP[@]}" --model "$G" --csv "$OUT/final-gguf-base.csv" \
          > "$OUT/final-gguf-base.log" 2>&1 || rc=1
        cat "$OUT/final-gguf-base.csv" 2>/dev/null || tail -5 "$OUT/final-gguf-base.log"
      fi
      rm -f "$G"
    fi
    "$FK" "${SWEEP[@]}" --model "random:flash:$L" --csv "$OUT/final-random-l$L.csv" \
      > "$OUT/final-random-l$L.log" 2>&1 || rc=1
    cat "$OUT/final-random-l$L.csv" 2>/dev/null || tail -5 "$OUT/final-random-l$L.log"
    tar czf "$OUT/decode-final-logs.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null || true
  fi
  if [[ $what == batch ]]; then
    # The batched decode step (issue #18), each part time-bounded so one device call holds
    # it: every GPU test; the batched kernels' small shapes under compute-sanitizer
    # (memcheck, racecheck); flashkv_bench_cuda --batch-micro at BATCH_SIZES (default
    # 1,4,16,64: aggregate tok/s, kernels per step, per-kernel profile); then, with
    # STAGE_FLASHKV=1 STAGE_NODE=1 at stage time, the serve load generator
    # (bench/serve/serve_load.mjs: BATCH_CLIENTS, default 1,4,16,64, ctx 8192; and 16 clients
    # with a BATCH_LONG-token cold prompt mid-run, default 25000, ctx 32768; BATCH_MODEL, default
    # random:flash — random:flash:16 fits an H100; node alone carried as .devcarry/node will
    # do; BATCH_GGUF=L adds a make-tiny GGUF of L layers, see below). BATCH_SKIP_TESTS=1 skips
    # the GPU tests, BATCH_SERVE_ONLY=1 all but the serve loads. BATCH_SWEEP=
    # "NAME=VALUE …": the microbenchmark once more each at BATCH_SWEEP_SIZES (default 16).
    # With a baseline's flashkv_bench_cuda in .devcarry/base/, its microbenchmark too (the
    # same sizes, batch-micro-base.*). Extra args go to the microbenchmarks.
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    local BB=/work/main/build-cuda/bench/flashkv_bench_cuda
    local short='s/_ZN7flashkv4cuda[0-9]*(_GLOBAL__N__[0-9a-f_]+_[a-z_]+_cu_[0-9a-f]+)?[0-9]*//; s/(.{110}).*/\1/'
    # BATCH_SERVE_ONLY=1: only the serve loads below (a call carrying node and flashkv alone).
    if [[ -z ${BATCH_SERVE_ONLY:-} ]]; then
      if [[ -z ${BATCH_SKIP_TESTS:-} ]]; then
        timeout 60 "$TB" --gtest_color=no --gtest_output=json:"$OUT/gpu-tests.json" \
          > "$OUT/gpu-tests.log" 2>&1 || rc=1
        grep -E '^\[ +(FAILED|PASSED|SKIPPED) |tests ran|Failure|Expected|Which is|mismatch' \
          "$OUT/gpu-tests.log" | head -40 || true
      fi
      local CS
      CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
      if [[ -n $CS ]]; then
        for tool in memcheck racecheck; do
          timeout 25 "$CS" --tool $tool --error-exitcode 9 "$TB" --gtest_color=no \
            --gtest_filter='CudaBatchKernelsTest.SmallShapes:CudaBatchGlueTest.SmallShapes' \
            > "$OUT/sanitizer-$tool.log" 2>&1 || rc=1
          tail -2 "$OUT/sanitizer-$tool.log"
        done
      fi
      local BM="--frontiers ${BATCH_FRONTIER:-256} --decode-steps 8 --warmup-steps 3 --profile-steps 2 --ttft 0"
      timeout 70 "$BB" --batch-micro "${BATCH_SIZES:-1,4,16,64}" $BM --json "$OUT/batch-micro.json" \
        "$@" > "$OUT/batch-micro.log" 2>&1 || rc=1
      grep -E '^batch' "$OUT/batch-micro.log" | cut -c1-200 || true
      grep -A14 '^batch' "$OUT/batch-micro.log" | grep -v '^batch' | sed -E "$short" || true
      # The build before the change, when staged beside this one (.devcarry/base/).
      if [[ -x $ROOT/.devcarry/base/flashkv_bench_cuda ]]; then
        timeout 70 "$ROOT/.devcarry/base/flashkv_bench_cuda" --batch-micro "${BATCH_SIZES:-1,4,16,64}" \
          $BM --json "$OUT/batch-micro-base.json" "$@" > "$OUT/batch-micro-base.log" 2>&1 || rc=1
        echo "base:"; grep -E '^batch' "$OUT/batch-micro-base.log" | cut -c1-200 || true
      fi
      for kv in ${BATCH_SWEEP:-}; do
        local tag=${kv//=/-}
        env "$kv" timeout 40 "$BB" --batch-micro "${BATCH_SWEEP_SIZES:-16}" $BM "$@" \
          > "$OUT/batch-micro-$tag.log" 2>&1 || rc=1
        echo "$kv:"; grep -A8 '^batch' "$OUT/batch-micro-$tag.log" | sed -E "$short" || true
      done
    fi
    local NODE
    NODE=$(command -v node || ls "$ROOT/.devcarry/node" 2>/dev/null || true)
    if [[ -n $NODE && -x /work/main/build-cuda/flashkv ]]; then
      # BATCH_GGUF=L: first the same two loads on a Flash-width ds4-layout GGUF of L layers
      # (`flashkv make-tiny --preset flash:L`, kept in /dev/shm for the next call on a warm
      # machine; the server reads it from there at every start, hence the longer bounds);
      # BATCH_MODEL=none leaves out the random-weights model.
      local models=() G=""
      if [[ -n ${BATCH_GGUF:-} ]]; then
        G=/dev/shm/flash-$BATCH_GGUF.gguf
        [[ -f $G ]] || { /usr/bin/time -f "make-tiny: %e s" /work/main/build-cuda/flashkv make-tiny \
          --preset "flash:$BATCH_GGUF" "$G" > "$OUT/make-tiny.log" 2>&1 || rc=1; tail -2 "$OUT/make-tiny.log"; }
        [[ -f $G ]] && models+=("$G")
      fi
      [[ ${BATCH_MODEL:-} == none ]] || models+=("${BATCH_MODEL:-random:flash}")
      # With a baseline's flashkv in .devcarry/base/, each load runs with it too (-base logs).
      local bins=(/work/main/build-cuda/flashkv)
      [[ -x $ROOT/.devcarry/base/flashkv ]] && bins+=("$ROOT/.devcarry/base/flashkv")
      local model tag load_s long_s fk
      for model in "${models[@]}"; do
        for fk in "${bins[@]}"; do
          tag="" load_s=90 long_s=45
          [[ $model == "$G" ]] && tag="-gguf" load_s=200 long_s=150
          [[ $fk == */base/* ]] && tag+="-base"
          local SL="$NODE $ROOT/bench/serve/serve_load.mjs --flashkv $fk --model $model --extra --backend=cuda"
          timeout "$load_s" $SL --ctx 8192 --live 64 --max-batch 64 --clients "${BATCH_CLIENTS:-1,4,16,64}" \
            --requests 1 --max-tokens 64 > "$OUT/serve-load$tag.log" 2>&1 || rc=1
          echo "== serve load, $model, $fk"; tail -8 "$OUT/serve-load$tag.log"
          timeout "$long_s" $SL --ctx 32768 --live 24 --max-batch 24 --clients 16 --requests 1 \
            --max-tokens 96 --long-prompt "${BATCH_LONG:-25000}" > "$OUT/serve-load-long$tag.log" 2>&1 || rc=1
          tail -4 "$OUT/serve-load-long$tag.log"
        done
      done
    fi
  fi
  if [[ $what == formats ]]; then
    # The GGUF block-type kernels (products/mxfp4_matvec.cu, products/kquant_matvec.cu): every GPU test (their
    # CPU twins CudaFormats / CudaMxfp4Test / CudaKQuantTest / CudaLlamaLayoutTest and the
    # rest), then memcheck on the K-quant / IQ kernels' tests.
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    "$TB" --gtest_color=no --gtest_output=json:"$OUT/gpu-tests.json" > "$OUT/gpu-tests.log" 2>&1 || rc=1
    grep -E '^\[ +(FAILED|PASSED|SKIPPED) |OK \] .*(KQuant|Llama|Formats|Mxfp4)|Failure|Expected|Which is|max\|d\||mix, q8|act-quant off' \
      "$OUT/gpu-tests.log" | head -160 || true
    local CS
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
    if [[ -n $CS ]]; then
      timeout "${FORMATS_MEMCHECK_S:-60}" "$CS" --tool memcheck --error-exitcode 9 "$TB" --gtest_color=no \
        --gtest_filter="${FORMATS_MEMCHECK:-Types/CudaKQuantTest.*}" > "$OUT/sanitizer-memcheck.log" 2>&1 || rc=1
      tail -3 "$OUT/sanitizer-memcheck.log"
    fi
    # One-token matvec of every block type at Flash's width: GB/s of weights vs 4.8 TB/s.
    /work/main/build-cuda/bench/flashkv_bench_cuda --formats --skip-model \
      --json "$OUT/formats-bench.json" > "$OUT/formats-bench.log" 2>&1 || rc=1
    cat "$OUT/formats-bench.log"
  fi
  if [[ $what == sanitize ]]; then
    local TB=/work/main/build-cuda/tests/backend/cuda/backend_cuda_test
    local CS
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
    if [[ -n $CS ]]; then
      for tool in memcheck racecheck; do
        timeout 90 "$CS" --tool $tool --error-exitcode 9 "$TB" --gtest_color=no \
          --gtest_filter='CudaImmaTest.SmallShapes*' > "$OUT/sanitizer-$tool.log" 2>&1 || rc=1
        tail -4 "$OUT/sanitizer-$tool.log"
      done
    else
      echo "compute-sanitizer: not found"
    fi
  fi
  if [[ $what == serve ]]; then
    # `flashkv serve --backend cuda --model random:flash`: the physical bounds of the
    # restore paths on this machine (disk read with O_DIRECT, pinned host <-> GPU copies),
    # time to first token from every cache tier, the greedy answer across tiers, the decode
    # stall of saves, CPU <-> CUDA snapshots through the disk tier (bench/serve/serve_tiers.py),
    # then the official openai / @anthropic-ai/sdk end-to-end suites against random:flash when
    # Node is on PATH or in .devcarry/node (stage with STAGE_NODE=1). Extra args go to
    # serve_tiers.py.
    dd if=/dev/urandom of="$OUT/dd.bin" bs=16M count=64 oflag=direct conv=fsync 2>&1 | tail -1
    dd if="$OUT/dd.bin" of=/dev/null bs=16M iflag=direct 2>&1 | tail -1
    rm -f "$OUT/dd.bin"
    python3 - <<'PY' || true
import torch, time
n = 1 << 30
h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
d = torch.empty(n, dtype=torch.uint8, device="cuda")
for name, f in (("host->GPU", lambda: d.copy_(h, non_blocking=True)),
                ("GPU->host", lambda: h.copy_(d, non_blocking=True))):
    f(); torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(5): f()
    torch.cuda.synchronize()
    print(f"pinned {name}: {5 * n / (time.perf_counter() - t) / 1e9:.1f} GB/s")
PY
    python3 "$ROOT/bench/serve/serve_tiers.py" --flashkv /work/main/build-cuda/flashkv --backend cuda \
      --model random:flash --out "$OUT/tiers" "$@" 2>&1 | tee "$OUT/tiers.log" || rc=1
    local NODE
    NODE=$(command -v node || ls "$ROOT/.devcarry/node" 2>/dev/null || true)
    if [[ -n $NODE ]]; then
      [[ -e $ROOT/tests/clients/node_modules ]] || ln -s "$ROOT/.devcarry/node_modules" \
        "$ROOT/tests/clients/node_modules"
      FLASHKV_BIN=/work/main/build-cuda/flashkv FLASHKV_MODEL=random:flash \
        FLASHKV_TEST_OUT="$OUT/sdk" "$NODE" --test --test-concurrency=1 "$ROOT/tests/clients/openai.test.mjs" \
        "$ROOT/tests/clients/anthropic.test.mjs" > "$OUT/sdk.log" 2>&1 || rc=1
      grep -E "^# (tests|pass|fail)|^not ok" "$OUT/sdk.log" || true
    else
      echo "node: not here (stage with STAGE_NODE=1 to carry it)"
    fi
  fi
  if [[ $what == offload ]]; then
    # Issue #28: the routed experts in host memory behind the device cache. A Flash-width
    # GGUF of OFFLOAD_LAYERS layers (default 43, ~81 GB) in /dev/shm, then `flashkv bench`
    # once per entry of OFFLOAD_RUNS: "auto" (the budget the device has), a number (GiB,
    # --gpu-memory), "slotsN" (--expert-cache-slots N), "nostage" (auto, prefill reading
    # uncached experts in place: --expert-stage-rows 0), "nogatherN" (decode reading misses in
    # place: --expert-gather-rows 0, with --gpu-memory N when N is given) or "resident" (no
    # flag), "pageableN" (--expert-host pageable, with --gpu-memory N when N is given), "none"
    # (no bench run); each run's greedy probes (bench's "greedy probe" lines)
    # must equal the first run's. Extra args go to bench. The host-link probe
    # (flashkv_host_link_probe) runs first unless OFFLOAD_PROBE=0.
    # OFFLOAD_FILE puts the GGUF elsewhere (a disk path: the page cache, not tmpfs, holds it);
    # OFFLOAD_MEM_GIB=N runs each bench in a cgroup of N GiB (memory.max, page cache
    # included), so a file larger than N GiB is read back from disk as it is used — host RAM
    # short, for the "pageableN" runs (--expert-host pageable [--gpu-memory N]).
    local L=${OFFLOAD_LAYERS:-43} G=${OFFLOAD_FILE:-/dev/shm/flash-offload.gguf}
    local FK=/work/main/build-cuda/flashkv CG=""
    if [[ -n ${OFFLOAD_MEM_GIB:-} ]]; then
      CG=/sys/fs/cgroup/flashkv-offload
      { mkdir -p $CG && echo "${OFFLOAD_MEM_GIB}G" > $CG/memory.max; } 2>/dev/null ||
        { echo "offload: no cgroup of ${OFFLOAD_MEM_GIB} GiB here (memory.max not writable)"; CG=""; }
    fi
    df -h /dev/shm | tail -1
    free -g | head -2
    [[ ${OFFLOAD_PROBE:-1} == 0 || ! -x /work/main/build-cuda/bench/flashkv_host_link_probe ]] ||
      /work/main/build-cuda/bench/flashkv_host_link_probe 2>&1 | tee "$OUT/host-link.log"
    [[ -f $G ]] || { /usr/bin/time -f "make-tiny: %e s" "$FK" make-tiny --preset "flash:$L" "$G" \
      > "$OUT/make-tiny.log" 2>&1 || { tail -5 "$OUT/make-tiny.log"; return 1; }; }
    tail -2 "$OUT/make-tiny.log"
    local first="" r
    for r in ${OFFLOAD_RUNS:-auto}; do
      local extra=()
      case $r in
        auto | resident) ;;
        slots*) extra=(--expert-cache-slots "${r#slots}") ;;
        nostage) extra=(--expert-stage-rows 0) ;;
        nogather*)
          extra=(--expert-gather-rows 0)
          [[ -z ${r#nogather} ]] || extra+=(--gpu-memory "${r#nogather}")
          ;;
        none) continue ;;
        pageable*)
          extra=(--expert-host pageable)
          [[ -z ${r#pageable} ]] || extra+=(--gpu-memory "${r#pageable}")
          ;;
        *) extra=(--gpu-memory "$r") ;;
      esac
      if [[ -n ${OFFLOAD_DROP:-} ]]; then sync; echo 3 > /proc/sys/vm/drop_caches || true; fi
      # shellcheck disable=SC2016  # $0 and $@ belong to the inner shell
      ${CG:+bash -c 'echo $$ > '"$CG"'/cgroup.procs && exec "$0" "$@"'} \
        "$FK" bench --backend cuda --model "$G" --ctx-start 2048 --ctx-max 8192 --step-mul 2 \
        --gen-tokens 32 --csv "$OUT/offload-$r.csv" "${extra[@]}" "$@" > "$OUT/offload-$r.log" 2>&1 || rc=1
      [[ -z $CG ]] || echo "cgroup: peak $(( $(cat $CG/memory.peak 2>/dev/null || echo 0) >> 20 )) MiB"
      grep -E "weights:|expert cache|model:|error|exhausted" "$OUT/offload-$r.log" | head -20
      cat "$OUT/offload-$r.csv" 2>/dev/null | cut -c1-200
      if [[ -z $first ]]; then
        first=$r
      elif [[ -f $OUT/offload-$r.csv && -f $OUT/offload-$first.csv ]]; then
        if diff <(grep "greedy probe" "$OUT/offload-$first.log") \
          <(grep "greedy probe" "$OUT/offload-$r.log") > /dev/null; then
          echo "offload $r: greedy probes equal to $first"
        else
          echo "offload $r: greedy probes DIFFER from $first"
          rc=1
        fi
      fi
    done
    # With OFFLOAD_SDK=N: the official openai / @anthropic-ai/sdk suites (tests/clients, Node
    # and node_modules carried in .devcarry: STAGE_NODE=1) against `flashkv serve --backend
    # cuda --gpu-memory N` on this file. With OFFLOAD_SERVE="N ...": the 25k-token agent
    # prompt's first token cold, live, from RAM and after a restart from disk
    # (serve_tiers.py) per budget N ("auto": no flag). With OFFLOAD_DS4=DIR (ds4-bench and
    # ds4-server built for this GPU, antirez/ds4): ds4-bench at 2k and 8k and ds4-server's
    # first token on the same 25k prompt, on the same file — the anchor.
    if [[ -n ${OFFLOAD_SDK:-} ]]; then
      local NODE
      NODE=$(command -v node || ls "$ROOT/.devcarry/node" 2>/dev/null || true)
      [[ -e $ROOT/tests/clients/node_modules ]] || ln -s "$ROOT/.devcarry/node_modules" \
        "$ROOT/tests/clients/node_modules"
      local sdk_args="--backend cuda"
      [[ $OFFLOAD_SDK == auto ]] || sdk_args+=" --gpu-memory $OFFLOAD_SDK"
      local suite
      for suite in ${OFFLOAD_SDK_SUITES:-openai anthropic}; do
        # One suite at a time, the device's memory back from the last server first.
        sleep 5
        nvidia-smi --query-gpu=memory.used --format=csv,noheader
        FLASHKV_BIN=$FK FLASHKV_MODEL=$G FLASHKV_SERVE_ARGS="$sdk_args" FLASHKV_START_TIMEOUT_S=300 \
          FLASHKV_TEST_OUT="$OUT/sdk-$suite" "$NODE" --test --test-concurrency=1 \
          "$ROOT/tests/clients/$suite.test.mjs" > "$OUT/sdk-$suite.log" 2>&1 || rc=1
        echo "sdk $suite:"
        grep -E "^# (tests|pass|fail|duration_ms)|^not ok" "$OUT/sdk-$suite.log" || true
        grep -hE "weights:|error|exhausted|failed" "$OUT/sdk-$suite"/*.log 2>/dev/null | cut -c1-400 | tail -4
      done
    fi
    for r in ${OFFLOAD_SERVE:-}; do
      local flags=()
      [[ $r == auto ]] || flags=(--serve-flag=--gpu-memory "--serve-flag=$r")
      python3 "$ROOT/bench/serve/serve_tiers.py" --flashkv "$FK" --backend cuda --model "$G" \
        --tokenizer "" --skip identity,stall,exchange --out "$OUT/tiers-$r" "${flags[@]}" \
        > "$OUT/tiers-$r.log" 2>&1 || rc=1
      echo "serve $r: $(tail -1 "$OUT/tiers-$r.log" | cut -c1-400)"
      grep -hE "weights:|restart_s" "$OUT/tiers-$r"/server-tiers-a.log 2>/dev/null | head -3
    done
    if [[ -n ${OFFLOAD_DS4:-} ]]; then
      local D=$ROOT/$OFFLOAD_DS4 P=$ROOT/data/bench/devils-dictionary.txt
      timeout 240 "$D/ds4-bench" -m "$G" --cuda --prompt-file "$P" --ctx-start 2048 \
        --ctx-max 8192 --step-mul 4 --gen-tokens 16 --csv "$OUT/ds4-bench.csv" \
        > "$OUT/ds4-bench.log" 2>&1 || echo "ds4-bench: exit $?"
      grep -iE "registered|cached|error|fail" "$OUT/ds4-bench.log" | head -5
      cat "$OUT/ds4-bench.csv" 2>/dev/null
      "$D/ds4-server" -m "$G" --ctx 32768 --port 8093 > "$OUT/ds4-server.log" 2>&1 &
      local pid=$! i
      for i in $(seq 1 180); do
        grep -q "listening on" "$OUT/ds4-server.log" && break
        kill -0 $pid 2>/dev/null || break
        sleep 1
      done
      echo "ds4-server: up after ${i} s"
      timeout 300 python3 "$ROOT/bench/serve/serve_tiers.py" --against http://127.0.0.1:8093 \
        --out "$OUT/ds4-tiers" > "$OUT/ds4-tiers.log" 2>&1 || echo "ds4-server turns: exit $?"
      tail -1 "$OUT/ds4-tiers.log" | cut -c1-400
      kill $pid 2>/dev/null; wait $pid 2>/dev/null
      grep -iE "registered|cached|error|fail" "$OUT/ds4-server.log" | head -5
    fi
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
    echo "usage: $0 stage | device [tests|bench|cli|prefill-solo|flashbench|flashbench-imma|imma|tiled|tiled-sanitize|indexer|prefill-explore|prefill-tiles|prefill-final|prefill-ncu|decode|decode-tests|decode-bench|decode-run|decode-final|verify|batch|batch-new|fast|fast-final|formats|sanitize|serve|offload|all] [extra args...]" >&2
    exit 2
    ;;
esac
