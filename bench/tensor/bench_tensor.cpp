// Throughput of the CPU tensor kernels in GB/s of weight bytes, next to the machine's memory
// read bandwidth (the physical limit of a decode-time matvec, which streams every weight once).
//
// Weights are 128 MiB per type (4x a 32 MiB L3), rows of 4096 values with random quant bits and
// sane f16 scales. Second benchmark argument: 1 = one thread (CPU time), 0 = a pool of one
// thread per core (wall time, names end in /real_time).
#include <benchmark/benchmark.h>

#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "tensor/dot.h"
#include "tensor/half.h"
#include "tensor/matmul.h"
#include "tensor/quant.h"
#include "util/thread_pool.h"

namespace flashkv {
namespace {

constexpr int64_t kN = 4096;                   // values per row
constexpr int64_t kWeightBytes = 128ll << 20;  // per type

ThreadPool* Pool(int64_t threads_arg) {
  static ThreadPool one(1);
  static ThreadPool all(0);
  return threads_arg == 1 ? &one : &all;
}

uint64_t Next(uint64_t& s) {  // xorshift64*: fast fill of large buffers
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return s * 0x2545f4914f6cdd1dull;
}

void PutHalf(uint8_t* p, float v) {
  const uint16_t h = F32ToF16(v);
  std::memcpy(p, &h, 2);
}

struct Weights {
  std::vector<uint8_t> bytes;
  int64_t rows = 0;
  int64_t row_bytes = 0;
};

const Weights& WeightsFor(DType t) {
  static std::map<DType, std::unique_ptr<Weights>> cache;
  auto& slot = cache[t];
  if (slot) return *slot;
  slot = std::make_unique<Weights>();
  Weights& w = *slot;
  const DTypeInfo& info = GetDTypeInfo(t);
  w.row_bytes = static_cast<int64_t>(*RowBytes(t, kN));
  w.rows = kWeightBytes / w.row_bytes;
  w.bytes.resize(static_cast<size_t>(w.rows * w.row_bytes));
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i + 8 <= w.bytes.size(); i += 8) {
    const uint64_t r = Next(s);
    std::memcpy(&w.bytes[i], &r, 8);
  }
  const int64_t blocks = w.rows * (kN / info.block_size);
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* p = w.bytes.data() + b * info.block_bytes;
    const float v = 0.001f + static_cast<float>(Next(s) % 1000) * 1e-5f;
    switch (t) {
      case DType::kF32:
        std::memcpy(p, &v, 4);
        break;
      case DType::kF16:
        PutHalf(p, v);
        break;
      case DType::kBF16: {
        const uint16_t h = F32ToBF16(v);
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kQ8_0:
      case DType::kIQ2_XXS:
        PutHalf(p, v);
        break;
      case DType::kQ4_K:
        PutHalf(p, v);
        PutHalf(p + 2, v);
        break;
      case DType::kQ2_K:
        PutHalf(p + 80, v);
        PutHalf(p + 82, v);
        break;
      default:
        break;
    }
  }
  return w;
}

std::vector<float> Activations(int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  uint64_t s = 12345;
  for (auto& v : x) v = static_cast<float>(static_cast<int64_t>(Next(s) % 2001) - 1000) * 1e-3f;
  return x;
}

// ---- memory bandwidth ---------------------------------------------------------------------

std::vector<uint64_t>& BigBuffer() {
  static std::vector<uint64_t> buf(kWeightBytes / 8, 1);
  return buf;
}

void BM_MemRead(benchmark::State& state) {
  auto& buf = BigBuffer();
  ThreadPool* pool = Pool(state.range(0));
  const size_t n = buf.size();
  for (auto _ : state) {
    std::vector<uint64_t> partial(static_cast<size_t>(pool->size()), 0);
    pool->ParallelFor(n, 1 << 16, [&](size_t b, size_t e, int th) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      size_t i = b;
      for (; i + 4 <= e; i += 4) {
        s0 += buf[i];
        s1 += buf[i + 1];
        s2 += buf[i + 2];
        s3 += buf[i + 3];
      }
      for (; i < e; ++i) s0 += buf[i];
      partial[static_cast<size_t>(th)] = s0 + s1 + s2 + s3;
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n * 8));
}
BENCHMARK(BM_MemRead)->Arg(1);
BENCHMARK(BM_MemRead)->Arg(0)->UseRealTime();

void BM_Memcpy(benchmark::State& state) {
  auto& src = BigBuffer();
  static std::vector<uint64_t> dst(src.size());
  ThreadPool* pool = Pool(state.range(0));
  for (auto _ : state) {
    pool->ParallelFor(src.size(), 1 << 16, [&](size_t b, size_t e, int) {
      std::memcpy(dst.data() + b, src.data() + b, (e - b) * 8);
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(src.size() * 8));
}
BENCHMARK(BM_Memcpy)->Arg(1);
BENCHMARK(BM_Memcpy)->Arg(0)->UseRealTime();

// ---- kernels ------------------------------------------------------------------------------

void BM_Dequant(benchmark::State& state) {
  const DType t = static_cast<DType>(state.range(0));
  const Weights& w = WeightsFor(t);
  ThreadPool* pool = Pool(state.range(1));
  std::vector<std::vector<float>> out(static_cast<size_t>(pool->size()), std::vector<float>(kN));
  for (auto _ : state) {
    pool->ParallelFor(static_cast<size_t>(w.rows), 16, [&](size_t b, size_t e, int th) {
      float* o = out[static_cast<size_t>(th)].data();
      for (size_t r = b; r < e; ++r) {
        Status s = DequantizeRow(t, w.bytes.data() + r * w.row_bytes, o, kN);
        benchmark::DoNotOptimize(s);
        benchmark::DoNotOptimize(o);
      }
    });
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.bytes.size()));
  state.SetLabel(std::string(GetDTypeInfo(t).name));
}

void BM_MatVecQ8(benchmark::State& state) {
  const DType t = static_cast<DType>(state.range(0));
  const Weights& w = WeightsFor(t);
  ThreadPool* pool = Pool(state.range(1));
  const auto x = Activations(kN);
  std::vector<float> y(static_cast<size_t>(w.rows));
  for (auto _ : state) {
    MatMulQ8(t, w.bytes.data(), w.rows, kN, x.data(), 1, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.bytes.size()));
  state.SetLabel(std::string(GetDTypeInfo(t).name));
}

void BM_MatVecF32(benchmark::State& state) {
  const DType t = static_cast<DType>(state.range(0));
  const Weights& w = WeightsFor(t);
  ThreadPool* pool = Pool(state.range(1));
  const auto x = Activations(kN);
  std::vector<float> y(static_cast<size_t>(w.rows));
  for (auto _ : state) {
    MatMulF32(t, w.bytes.data(), w.rows, kN, x.data(), 1, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.bytes.size()));
  state.SetLabel(std::string(GetDTypeInfo(t).name));
}

// Compute ceiling of the single-thread DotQ8 kernels: 64 rows (at most 272 KiB) stay in L2
// and the activation is quantized once outside the loop, so only the dot kernels run. CPU
// time, so a busy machine distorts it less.
void BM_DotQ8InCache(benchmark::State& state) {
  const DType t = static_cast<DType>(state.range(0));
  const Weights& w = WeightsFor(t);
  const int64_t rows = 64;
  const auto x = Activations(kN);
  const ActQuant aq = ActQuantFor(t);
  std::vector<float> xq(static_cast<size_t>(ActQuantBytes(aq, kN) / 4 + 1));
  QuantizeAct(aq, x.data(), xq.data(), kN);
  std::vector<float> y(static_cast<size_t>(rows));
  for (auto _ : state) {
    MatMulQ8Prequantized(t, w.bytes.data(), rows, kN, xq.data(), 1, y.data(), nullptr);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * rows * w.row_bytes);
  state.SetLabel(std::string(GetDTypeInfo(t).name));
}

// Prefill-shaped: 32 tokens through 4096 x 4096 weights. Reported per weight byte read once,
// so it shows how far batching moves the kernels from memory- to compute-bound.
void BM_MatMulQ8Batch32(benchmark::State& state) {
  const DType t = static_cast<DType>(state.range(0));
  const Weights& w = WeightsFor(t);
  ThreadPool* pool = Pool(state.range(1));
  const int64_t rows = 4096, tokens = 32;
  const auto x = Activations(kN * tokens);
  std::vector<float> y(static_cast<size_t>(rows * tokens));
  for (auto _ : state) {
    MatMulQ8(t, w.bytes.data(), rows, kN, x.data(), tokens, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * rows * w.row_bytes);
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations() * tokens),
                                               benchmark::Counter::kIsRate);
  state.SetLabel(std::string(GetDTypeInfo(t).name));
}

// One thread is timed on CPU time: the machine this was written on is a shared 2-vCPU VM, and
// CPU time leaves out the slices other processes take. The pool is timed on wall time (CPU
// time would count only the calling thread).
constexpr DType kAllTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16,   DType::kQ8_0,
                               DType::kQ2_K, DType::kQ4_K, DType::kIQ2_XXS};
constexpr DType kBlockTypes[] = {DType::kQ8_0, DType::kQ2_K, DType::kQ4_K, DType::kIQ2_XXS};

template <const DType* kTypes, size_t kCount, int kThreads>
void Types(benchmark::internal::Benchmark* b) {
  for (size_t i = 0; i < kCount; ++i) b->Args({static_cast<int64_t>(kTypes[i]), kThreads});
  if (kThreads != 1) b->UseRealTime();
}

#define FLASHKV_BENCH_TYPES(fn, types)                     \
  BENCHMARK(fn)->Apply(Types<types, std::size(types), 1>); \
  BENCHMARK(fn)->Apply(Types<types, std::size(types), 0>)

FLASHKV_BENCH_TYPES(BM_Dequant, kBlockTypes);
FLASHKV_BENCH_TYPES(BM_MatVecQ8, kAllTypes);
FLASHKV_BENCH_TYPES(BM_MatVecF32, kAllTypes);
FLASHKV_BENCH_TYPES(BM_MatMulQ8Batch32, kBlockTypes);
BENCHMARK(BM_DotQ8InCache)
    ->Arg(static_cast<int64_t>(DType::kF16))
    ->Arg(static_cast<int64_t>(DType::kQ8_0))
    ->Arg(static_cast<int64_t>(DType::kQ2_K))
    ->Arg(static_cast<int64_t>(DType::kQ4_K))
    ->Arg(static_cast<int64_t>(DType::kIQ2_XXS));

}  // namespace
}  // namespace flashkv

BENCHMARK_MAIN();
