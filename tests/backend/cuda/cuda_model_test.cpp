// The whole model on CUDA: the tiny fixtures against the CPU backend and the references,
// chunked prefill bit-identity on the GPU, and KV state moved between backends (snapshot
// sections: CUDA → CPU, CPU → CUDA, and CUDA save → restore → decode, which must equal an
// uninterrupted CUDA run bit for bit), and a CUDA state through the disk tier's chunked
// (version 2) snapshots and back. Label `gpu`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/hf_converter.h"
#include "cuda_test_util.h"
#include "kv_disk/disk_cache.h"
#include "model/model.h"
#include "util/sha1.h"
#include "util/thread_pool.h"

namespace flashkv::testing {
namespace {

std::string Fixture(const std::string& rel) {
  return std::string(FLASHKV_FIXTURES_DIR) + "/" + rel;
}

std::vector<float> ReadF32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

std::vector<int32_t> Ints(const std::string& json_path, const char* key) {
  std::ifstream in(json_path);
  const auto j = nlohmann::json::parse(in);
  return j[key].get<std::vector<int32_t>>();
}

int Argmax(const float* x, int n) {
  return int(std::max_element(x, x + n) - x);
}

struct RunResult {
  std::vector<float> logits;  // [prompt + decode, vocab]
  std::vector<int32_t> greedy;
};

// Prefill in chunks (0: whole prompt), then `decode` greedy steps, like `flashkv logits`.
RunResult RunModel(Model& m, const std::vector<int32_t>& prompt, int chunk, int decode) {
  const int vocab = m.config().n_vocab;
  RunResult r;
  r.logits.resize((prompt.size() + decode) * size_t(vocab));
  auto st = m.NewState(int(prompt.size()) + decode);
  EXPECT_TRUE(st.ok());
  if (!st.ok()) return r;
  Status s = m.Forward(prompt, *st, LogitsFor::kAll, r.logits.data(), chunk);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (int step = 0; step < decode && s.ok(); ++step) {
    const int32_t next =
        Argmax(r.logits.data() + (prompt.size() + step - 1) * size_t(vocab), vocab);
    r.greedy.push_back(next);
    s = m.Forward({&next, 1}, *st, LogitsFor::kAll,
                  r.logits.data() + (prompt.size() + step) * size_t(vocab));
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return r;
}

// Every section of every layer, concatenated (the snapshot payload without a header).
std::vector<float> ReadState(const KvState& st) {
  std::vector<float> all;
  for (int l = 0; l < int(st.shape().layers.size()); ++l) {
    for (KvSection sec : {KvSection::kRaw, KvSection::kCompressed, KvSection::kCompressorKv,
                          KvSection::kCompressorScore, KvSection::kIndexerRows,
                          KvSection::kIndexerKv, KvSection::kIndexerScore}) {
      const size_t n = st.SectionFloats(l, sec);
      const size_t at = all.size();
      all.resize(at + n);
      EXPECT_TRUE(st.ReadSection(l, sec, all.data() + at).ok());
    }
  }
  return all;
}

void WriteState(KvState& st, int64_t n_tokens, const std::vector<float>& all) {
  ASSERT_TRUE(st.SetTokenCount(n_tokens).ok());
  size_t at = 0;
  for (int l = 0; l < int(st.shape().layers.size()); ++l) {
    for (KvSection sec : {KvSection::kRaw, KvSection::kCompressed, KvSection::kCompressorKv,
                          KvSection::kCompressorScore, KvSection::kIndexerRows,
                          KvSection::kIndexerKv, KvSection::kIndexerScore}) {
      const size_t n = st.SectionFloats(l, sec);
      ASSERT_LE(at + n, all.size());
      ASSERT_TRUE(st.WriteSection(l, sec, all.data() + at).ok());
      at += n;
    }
  }
  ASSERT_EQ(at, all.size());
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b, size_t from = 0) {
  double m = 0;
  for (size_t i = from; i < std::min(a.size(), b.size()); ++i) {
    m = std::max(m, double(std::fabs(a[i] - b[i])));
  }
  return m;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

class CudaModelTest : public ::testing::Test {
 protected:
  void SetUp() override { FLASHKV_REQUIRE_GPU(); }
  static std::unique_ptr<Model> Load(Backend& be, const std::string& path, ModelOptions o) {
    auto m = Model::Load(path, be, &o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(*m) : nullptr;
  }
  static std::string Ds4Tiny() { return Fixture("ds4-tiny/ds4-tiny.gguf"); }
  static std::vector<int32_t> Ds4Prompt() {
    return Ints(Fixture("ds4-tiny/reference.json"), "prompt_tokens");
  }
  // hf-tiny-a converted to an f32 GGUF once per process.
  static std::string HfTinyA() {
    static std::string path = [] {
      const std::string out = std::string(FLASHKV_BINARY_DIR) + "/test-tmp-cuda-hf-tiny-a.gguf";
      ConvertOptions o;
      o.hf_dir = Fixture("hf-tiny-a");
      o.out_path = out;
      o.tokenizer_path = std::string(FLASHKV_SOURCE_DIR) + "/models/tokenizer/tokenizer.json";
      o.scheme = Ds4WeightScheme::kF32;
      o.show_progress = false;
      auto r = ConvertHfCheckpoint(o);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      return out;
    }();
    return path;
  }
  ThreadPool pool_{2};
  CpuBackend cpu_{&pool_};
};

const ModelOptions kHfOff{NumericsMode::kHf, ActQuantMode::kOff};
const ModelOptions kOfficialQ8{NumericsMode::kOfficial, ActQuantMode::kQ8};
const ModelOptions kOfficialOff{NumericsMode::kOfficial, ActQuantMode::kOff};

// The gate: fp32 / HF-parity numerics, CPU and CUDA logits within 1e-3 over the
// 400-token prompt (window filled, compressed rows, indexer selection active) and 16
// greedy decode steps.
TEST_F(CudaModelTest, Ds4TinyCpuAndCudaAgreeInHfParityMode) {
  auto mc = Load(cpu_, Ds4Tiny(), kHfOff);
  auto mg = Load(*SharedCuda(), Ds4Tiny(), kHfOff);
  ASSERT_TRUE(mc && mg);
  const auto prompt = Ds4Prompt();
  const RunResult c = RunModel(*mc, prompt, 0, 16);
  const RunResult g = RunModel(*mg, prompt, 0, 16);
  const double d = MaxAbsDiff(c.logits, g.logits);
  std::printf("ds4-tiny hf/off: CPU vs CUDA max|d| %.3g over %zu logits\n", d, c.logits.size());
  EXPECT_LE(d, 1e-3);
  EXPECT_EQ(c.greedy, g.greedy);
}

TEST_F(CudaModelTest, HfTinyACpuAndCudaAgree) {
  auto mc = Load(cpu_, HfTinyA(), kHfOff);
  auto mg = Load(*SharedCuda(), HfTinyA(), kHfOff);
  ASSERT_TRUE(mc && mg);
  const auto prompt = Ints(Fixture("hf-tiny-a/reference.json"), "prompt_tokens");
  const RunResult c = RunModel(*mc, prompt, 0, 16);
  const RunResult g = RunModel(*mg, prompt, 0, 16);
  const double d = MaxAbsDiff(c.logits, g.logits);
  std::printf("hf-tiny-a: CPU vs CUDA max|d| %.3g\n", d);
  EXPECT_LE(d, 1e-3);
}

// hf-tiny-a's reference test on CUDA: transformers' logits within 1e-4 at every prompt
// position and decode step, for chunked and whole prefills, with the reference's greedy
// tokens.
TEST_F(CudaModelTest, HfTinyAMatchesTransformersOnCuda) {
  auto mg = Load(*SharedCuda(), HfTinyA(), kHfOff);
  ASSERT_TRUE(mg);
  const auto prompt = Ints(Fixture("hf-tiny-a/reference.json"), "prompt_tokens");
  const auto greedy = Ints(Fixture("hf-tiny-a/reference.json"), "greedy_tokens");
  const auto pre = ReadF32(Fixture("hf-tiny-a/prefill_logits.f32"));
  const auto dec = ReadF32(Fixture("hf-tiny-a/decode_logits.f32"));
  ASSERT_EQ(prompt.size(), 80u);
  for (int chunk : {1, 7, 64, 0}) {
    const RunResult g = RunModel(*mg, prompt, chunk, 16);
    EXPECT_EQ(g.greedy, greedy) << "chunk " << chunk;
    std::vector<float> want = pre;
    want.insert(want.end(), dec.begin(), dec.end());
    const double d = MaxAbsDiff(g.logits, want);
    std::printf("hf-tiny-a on CUDA, chunk %d: max|d| vs transformers %.3g\n", chunk, d);
    EXPECT_LE(d, 1e-4) << "chunk " << chunk;
  }
}

// ds4's own logits (official numerics): the thresholds of the CPU fidelity test.
TEST_F(CudaModelTest, Ds4TinyOfficialNumericsMatchDs4OnCuda) {
  auto mg = Load(*SharedCuda(), Ds4Tiny(), kOfficialQ8);
  auto mc = Load(cpu_, Ds4Tiny(), kOfficialQ8);
  ASSERT_TRUE(mg && mc);
  const auto prompt = Ds4Prompt();
  const RunResult g = RunModel(*mg, prompt, 0, 0);
  const RunResult c = RunModel(*mc, prompt, 0, 0);
  const auto ref = ReadF32(Fixture("ds4-tiny/prefill_logits.f32"));
  int agree = 0, agree_cpu = 0;
  for (int p = 0; p < 400; ++p) {
    agree += Argmax(&g.logits[size_t(p) * 1024], 1024) == Argmax(&ref[size_t(p) * 1024], 1024);
    agree_cpu +=
        Argmax(&g.logits[size_t(p) * 1024], 1024) == Argmax(&c.logits[size_t(p) * 1024], 1024);
  }
  std::printf(
      "ds4-tiny official/q8 on CUDA: argmax vs ds4 %d/400, vs CPU %d/400, max|d| vs CPU %.3g\n",
      agree, agree_cpu, MaxAbsDiff(g.logits, c.logits));
  // q8 activations amplify last-bit differences (a requantized int8 flips), so on this
  // random-weight model CUDA and CPU agree with each other about as well as each agrees
  // with ds4 (the CPU fidelity test's 90 % bound).
  EXPECT_GE(agree, 360);
  EXPECT_GE(agree_cpu, 360);

  auto mo = Load(*SharedCuda(), Ds4Tiny(), kOfficialOff);
  ASSERT_TRUE(mo);
  std::vector<int32_t> tokens = prompt;
  for (int t : Ints(Fixture("ds4-tiny/reference.json"), "greedy_tokens")) tokens.push_back(t);
  const RunResult o = RunModel(*mo, tokens, 0, 0);
  const auto noactq = ReadF32(Fixture("ds4-tiny/noactq_logits.f32"));
  std::vector<double> row_max;
  int agree_o = 0;
  for (int p = 0; p < 416; ++p) {
    double m = 0;
    for (int i = 0; i < 1024; ++i) {
      m = std::max(
          m, double(std::fabs(o.logits[size_t(p) * 1024 + i] - noactq[size_t(p) * 1024 + i])));
    }
    row_max.push_back(m);
    agree_o += Argmax(&o.logits[size_t(p) * 1024], 1024) == Argmax(&noactq[size_t(p) * 1024], 1024);
  }
  std::sort(row_max.begin(), row_max.end());
  std::printf("ds4-tiny official/noactq on CUDA: median row max|d| %.3g, argmax %d/416\n",
              row_max[208], agree_o);
  EXPECT_LE(row_max[208], 1e-2);
  EXPECT_GE(agree_o, 408);
}

// The batching contract on the GPU: prefill in chunks of 1, 7, 64 or at once gives the same
// logits and state bit for bit, in both numerics.
TEST_F(CudaModelTest, ChunkedPrefillIsBitIdenticalOnCuda) {
  const auto prompt = Ds4Prompt();
  for (ModelOptions o : {kOfficialQ8, kHfOff}) {
    auto mg = Load(*SharedCuda(), Ds4Tiny(), o);
    ASSERT_TRUE(mg);
    std::vector<float> whole_logits, whole_state;
    for (int chunk : {0, 1, 7, 64}) {
      auto st = mg->NewState(int(prompt.size()));
      ASSERT_TRUE(st.ok());
      std::vector<float> logits(prompt.size() * 1024);
      ASSERT_TRUE(mg->Forward(prompt, *st, LogitsFor::kAll, logits.data(), chunk).ok());
      const auto state = ReadState(*st);
      if (chunk == 0) {
        whole_logits = logits;
        whole_state = state;
        continue;
      }
      EXPECT_TRUE(BitEqual(whole_logits, logits)) << "chunk " << chunk;
      EXPECT_TRUE(BitEqual(whole_state, state)) << "chunk " << chunk;
    }
  }
}

// Snapshot sections: save after a 300-token prefill, restore into a fresh state, decode.
// On CUDA the restored run equals the uninterrupted one bit for bit; across backends the
// continuation agrees with the destination backend's own uninterrupted run to 1e-3 (hf),
// and in official/q8 mode stays within twice the two backends' own divergence on the
// same prompt, with the destination's greedy choice in at least 3 of 4 steps.
TEST_F(CudaModelTest, KvStateMovesBetweenBackends) {
  auto all = Ds4Prompt();
  const std::vector<int32_t> prompt(all.begin(), all.begin() + 300);
  const int decode = 12;
  const int vocab = 1024;
  for (ModelOptions o : {kOfficialQ8, kHfOff}) {
    auto mg = Load(*SharedCuda(), Ds4Tiny(), o);
    auto mc = Load(cpu_, Ds4Tiny(), o);
    ASSERT_TRUE(mg && mc);
    const RunResult g_ref = RunModel(*mg, prompt, 0, decode);
    const RunResult c_ref = RunModel(*mc, prompt, 0, decode);
    // How far the backends drift apart on the same 300 prompt rows: q8 requantization turns
    // last-bit differences into whole quantization steps, so this is the scale for q8.
    double baseline = 0;
    for (size_t i = 0; i < prompt.size() * size_t(vocab); ++i)
      baseline = std::max(baseline, double(std::fabs(g_ref.logits[i] - c_ref.logits[i])));

    // The prefill states of both backends.
    auto sg = mg->NewState(int(prompt.size()) + decode);
    auto sc = mc->NewState(int(prompt.size()) + decode);
    ASSERT_TRUE(sg.ok() && sc.ok());
    std::vector<float> scratch(prompt.size() * vocab);
    ASSERT_TRUE(mg->Forward(prompt, *sg, LogitsFor::kAll, scratch.data()).ok());
    ASSERT_TRUE(mc->Forward(prompt, *sc, LogitsFor::kAll, scratch.data()).ok());
    const std::vector<float> snap_g = ReadState(*sg);
    const std::vector<float> snap_c = ReadState(*sc);

    // CUDA -> CUDA: bit-identical continuation.
    {
      auto st = mg->NewState(int(prompt.size()) + decode);
      ASSERT_TRUE(st.ok());
      WriteState(*st, int64_t(prompt.size()), snap_g);
      EXPECT_TRUE(BitEqual(ReadState(*st), snap_g));
      std::vector<float> logits = g_ref.logits;
      for (int step = 0; step < decode; ++step) {
        const int32_t next = g_ref.greedy[step];
        float* row = logits.data() + (prompt.size() + step) * size_t(vocab);
        std::fill(row, row + vocab, 0.0f);
        ASSERT_TRUE(mg->Forward({&next, 1}, *st, LogitsFor::kAll, row).ok());
      }
      EXPECT_TRUE(BitEqual(logits, g_ref.logits));
    }
    // CUDA -> CPU and CPU -> CUDA: continue on the other backend with the reference's tokens.
    for (int dir = 0; dir < 2; ++dir) {
      Model& dst = dir == 0 ? *mc : *mg;
      const std::vector<float>& snap = dir == 0 ? snap_g : snap_c;
      const RunResult& ref = dir == 0 ? c_ref : g_ref;
      auto st = dst.NewState(int(prompt.size()) + decode);
      ASSERT_TRUE(st.ok());
      WriteState(*st, int64_t(prompt.size()), snap);
      double worst = 0;
      int same_argmax = 0;
      for (int step = 0; step < decode; ++step) {
        const int32_t next = ref.greedy[step];
        std::vector<float> row(vocab);
        ASSERT_TRUE(dst.Forward({&next, 1}, *st, LogitsFor::kAll, row.data()).ok());
        const float* want = ref.logits.data() + (prompt.size() + step) * size_t(vocab);
        for (int i = 0; i < vocab; ++i)
          worst = std::max(worst, double(std::fabs(row[i] - want[i])));
        same_argmax += std::max_element(row.begin(), row.end()) - row.begin() ==
                       std::max_element(want, want + vocab) - want;
      }
      std::printf(
          "%s snapshot %s: continuation max|d| %.3g (backends on the prompt: %.3g), "
          "argmax %d/%d\n",
          o.numerics == NumericsMode::kHf ? "hf/off" : "official/q8",
          dir == 0 ? "CUDA -> CPU" : "CPU -> CUDA", worst, baseline, same_argmax, decode);
      // hf/off: the 1e-3 gate. q8: requantization amplifies the prefix's last-bit
      // differences (see Ds4TinyOfficialNumericsMatchDs4OnCuda), so the bound is relative to
      // the backends' own divergence; a misplaced section would be far outside it.
      EXPECT_LE(worst, o.numerics == NumericsMode::kHf ? 1e-3 : 2 * baseline);
      EXPECT_GE(4 * same_argmax, 3 * decode);
    }
  }
}

// The disk tier's version-2 snapshot of a CUDA state: after a 300-token prefill the state
// is saved as a manifest and 128-token content-addressed chunks (two, the rest in the
// manifest's tail), then restored into fresh CUDA states by the default load path (several
// chunk files at once, O_DIRECT where the filesystem has it) and by one reader through the
// page cache. Each restore reads back bit for bit, carries the saved logits, and decodes
// exactly like the uninterrupted run.
TEST_F(CudaModelTest, ChunkedDiskSnapshotRestoresBitExactOnCuda) {
  auto all = Ds4Prompt();
  const std::vector<int32_t> prompt(all.begin(), all.begin() + 300);
  const int decode = 12;
  const int vocab = 1024;
  auto mg = Load(*SharedCuda(), Ds4Tiny(), kOfficialQ8);
  ASSERT_TRUE(mg);
  const RunResult ref = RunModel(*mg, prompt, 0, decode);
  auto sg = mg->NewState(int(prompt.size()) + decode);
  ASSERT_TRUE(sg.ok());
  std::vector<float> scratch(prompt.size() * vocab);
  ASSERT_TRUE(mg->Forward(prompt, *sg, LogitsFor::kAll, scratch.data()).ok());
  const std::vector<float> saved = ReadState(*sg);
  const std::vector<float> last(ref.logits.begin() + (prompt.size() - 1) * vocab,
                                ref.logits.begin() + prompt.size() * vocab);

  const std::string dir = std::string(FLASHKV_BINARY_DIR) + "/test-tmp-cuda-disk-chunks";
  std::filesystem::remove_all(dir);
  for (bool buffered : {false, true}) {
    DiskCacheOptions o;
    o.dir = dir;
    o.identity = SnapshotIdentity{Sha1Of("ds4-tiny official/q8"), "official/q8"};
    o.chunk_tokens = 128;
    if (buffered) {
      o.load.readers = 1;
      o.load.direct = false;
    }
    auto cache = DiskCache::Open(o);
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    if (!buffered) {
      SnapshotContent c;
      c.tokens = prompt;
      c.logits = last;
      c.text = "cuda";
      c.reason = SaveReason::kContinued;
      auto key = (*cache)->Save(*sg, c);
      ASSERT_TRUE(key.ok()) << key.status().ToString();
      ASSERT_TRUE((*cache)->Flush().ok());
    }
    EXPECT_EQ((*cache)->stats().chunks, 2u);
    auto st = mg->NewState(int(prompt.size()) + decode);
    ASSERT_TRUE(st.ok());
    auto hit = (*cache)->Load(
        DiskLookup{.tokens = prompt, .text = {}, .min_tokens = 300, .max_tokens = 300}, *st);
    ASSERT_TRUE(hit.ok()) << hit.status().ToString();
    EXPECT_EQ(hit->tokens, prompt);
    EXPECT_TRUE(BitEqual(hit->logits, last));
    EXPECT_TRUE(BitEqual(ReadState(*st), saved)) << (buffered ? "buffered" : "default");
    std::vector<float> logits = ref.logits;
    for (int step = 0; step < decode; ++step) {
      const int32_t next = ref.greedy[step];
      float* row = logits.data() + (prompt.size() + step) * size_t(vocab);
      std::fill(row, row + vocab, 0.0f);
      ASSERT_TRUE(mg->Forward({&next, 1}, *st, LogitsFor::kAll, row).ok());
    }
    EXPECT_TRUE(BitEqual(logits, ref.logits)) << (buffered ? "buffered" : "default");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace flashkv::testing
