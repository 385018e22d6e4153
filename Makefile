# Thin wrapper over CMake/Ninja. `make run` and `make test` do all set-up on a fresh
# Debian 12 machine (scripts/deps.sh installs what is missing, idempotently): `make run`
# only what serving needs, `make test` the test rig too.
BUILD        ?= build
BUILD_ASAN   ?= build-asan
BUILD_FUZZ   ?= build-fuzz
JOBS         ?= $(shell nproc)
CMAKE_FLAGS  ?=
TINY_MODEL   := models/flashkv-tiny.gguf
FLASHKV      := $(BUILD)/flashkv
PREFIX       ?= /usr/local

.PHONY: all deps deps-serve build build-serve tiny run test test-asan fuzz fuzz-deps bench \
        install format clean cuda-archs aarch64-check

all: build

# The packages `flashkv serve` builds and runs with.
deps-serve:
	@bash scripts/deps.sh serve

# Those plus the test rig: GoogleTest, Google Benchmark, redis-server, Node, npm clients.
deps:
	@bash scripts/deps.sh test

# Tests and benchmarks are configured where GoogleTest is installed (FLASHKV_TESTS).
$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

# The flashkv binary alone, from the serving packages alone.
build-serve: deps-serve $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target flashkv

# Everything, tests and benchmarks included (a tree `make run` configured without
# GoogleTest is configured again with it).
build: deps $(BUILD)/build.ninja
	@grep -q '^FLASHKV_TESTS:BOOL=ON' $(BUILD)/CMakeCache.txt || \
	  cmake -S . -B $(BUILD) -DFLASHKV_TESTS=ON
	cmake --build $(BUILD) -j $(JOBS)

# Remade when the generator or the tokenizer changes, so a stale tiny model never lingers.
TINY_INPUTS  := $(wildcard src/convert/tiny_model*.cpp src/convert/ds4_*.cpp src/convert/vocab_fit.cpp) \
                models/tokenizer/tokenizer.json
$(TINY_MODEL): $(TINY_INPUTS) | build-serve
	$(FLASHKV) make-tiny $(TINY_MODEL)

tiny: build-serve $(TINY_MODEL)

# The server on the default model (./ds4flash.gguf if present, else the tiny model) with a
# disk KV cache in ./.flashkv/kv. Ctrl+C stops it (saving the live sessions to disk).
PORT         ?= 8000
run: build-serve tiny
	@echo
	@echo "flashkv serve: OpenAI and Anthropic APIs on http://127.0.0.1:$(PORT), disk KV cache in .flashkv/kv"
	@echo "try, from another shell:"
	@echo "  curl -s http://127.0.0.1:$(PORT)/v1/chat/completions -H 'content-type: application/json' \\"
	@echo "    -d '{\"messages\":[{\"role\":\"user\",\"content\":\"Hello! Who are you?\"}],\"max_tokens\":32}' -i"
	@echo
	$(FLASHKV) serve --port $(PORT) --kv-disk-dir .flashkv/kv

test: build tiny
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE gpu

$(BUILD_ASAN)/build.ninja:
	cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHKV_SANITIZE=ON -DFLASHKV_CUDA=OFF $(CMAKE_FLAGS)

test-asan: deps $(BUILD_ASAN)/build.ninja
	cmake --build $(BUILD_ASAN) -j $(JOBS) --target unit_tests
	cd $(BUILD_ASAN) && ctest --output-on-failure -j $(JOBS) -L unit

# libFuzzer (clang): every parser in tests/fuzz/fuzz_targets.h, coverage-guided under ASan
# + UBSan, from the seeds flashkv_fuzz writes, FUZZ_SECONDS each (corpora are kept in
# $(BUILD_FUZZ)/corpus between runs). FUZZ_TARGETS=gguf picks some.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= gguf kv request dsml safetensors remote
$(BUILD_FUZZ)/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B $(BUILD_FUZZ) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DFLASHKV_FUZZ=ON -DFLASHKV_CUDA=OFF -DFLASHKV_NATIVE=OFF $(CMAKE_FLAGS)

fuzz-deps:
	@FLASHKV_DEPS_FUZZ=1 bash scripts/deps.sh

fuzz: fuzz-deps $(BUILD_FUZZ)/build.ninja
	cmake --build $(BUILD_FUZZ) -j $(JOBS) --target flashkv_fuzz $(addprefix fuzz_,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(BUILD_FUZZ)/corpus/$$t && \
	  $(BUILD_FUZZ)/tests/fuzz/flashkv_fuzz $$t --write-seeds $(BUILD_FUZZ)/corpus/$$t && \
	  $(BUILD_FUZZ)/tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=30 \
	    -rss_limit_mb=4096 -print_final_stats=1 $(BUILD_FUZZ)/corpus/$$t || exit 1; \
	done

bench: build
	$(BUILD)/bench/flashkv_bench_tensor

# The binary, tokenizer, docs and an example systemd unit under $(PREFIX) (DESTDIR works).
install: build-serve
	cmake --install $(BUILD) --prefix $(PREFIX)

format:
	find src tests bench -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)

# The CUDA backend for every GPU generation docs/CUDA.md lists (Ampere, Ada, Hopper,
# Blackwell): a compile check of the fat library, apart from the Hopper-only build CI runs.
CUDA_ARCHS   ?= 80;86;89;90a;120
BUILD_ARCHS  ?= build-archs
cuda-archs: deps
	cmake -S . -B $(BUILD_ARCHS) -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHKV_CUDA=ON \
	  "-DFLASHKV_CUDA_ARCHS=$(CUDA_ARCHS)" $(CMAKE_FLAGS)
	cmake --build $(BUILD_ARCHS) -j $(JOBS) --target flashkv_backend_cuda

# The host code for aarch64 (GH200, DGX Spark): every translation unit of $(BUILD) but the
# CUDA kernels, compiled with Debian's cross compiler (also CTest aarch64_host_compiles).
aarch64-check: build
	python3 scripts/aarch64-check.py $(BUILD) --jobs $(JOBS)
