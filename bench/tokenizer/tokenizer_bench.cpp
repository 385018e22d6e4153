// Tokenizer throughput on 1 MiB of English prose and 1 MiB of C++ source, one thread.
// Corpora come from files every Debian machine with the build deps has, so the figure is
// reproducible: prose = /usr/share/common-licenses/* then /usr/share/doc/*/copyright
// (sorted, identical files once); code = /usr/include/c++/<ver>/ headers (sorted).
// Results go in docs/PERFORMANCE.md, section "Tokenizer".
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace flashkv {
namespace {

constexpr size_t kCorpusBytes = size_t{1} << 20;

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Concatenates the files in order (skipping repeats of identical content) up to 1 MiB.
std::string BuildCorpus(const std::vector<std::filesystem::path>& files) {
  std::string out;
  std::set<std::string> seen;
  for (const auto& f : files) {
    std::string text = ReadFile(f);
    if (text.empty() || !seen.insert(text).second) continue;
    out += text;
    if (out.size() >= kCorpusBytes) break;
  }
  if (out.size() > kCorpusBytes) out.resize(kCorpusBytes);
  return out;
}

std::vector<std::filesystem::path> SortedFiles(const std::filesystem::path& dir,
                                               const std::string& name_filter) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    if (!name_filter.empty() && it->path().filename() != name_filter) continue;
    files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

const std::string& Prose() {
  static const std::string text = [] {
    auto files = SortedFiles("/usr/share/common-licenses", "");
    auto more = SortedFiles("/usr/share/doc", "copyright");
    files.insert(files.end(), more.begin(), more.end());
    return BuildCorpus(files);
  }();
  return text;
}

const std::string& Code() {
  static const std::string text = [] {
    std::vector<std::filesystem::path> files;
    for (const auto& f : SortedFiles("/usr/include/c++", "")) files.push_back(f);
    return BuildCorpus(files);
  }();
  return text;
}

const Tokenizer& Tok() {
  static const Tokenizer* tok = [] {
    Expected<Vocab> v = LoadVocabFromTokenizerJson(std::string(FLASHKV_SOURCE_DIR) +
                                                   "/models/tokenizer/tokenizer.json");
    if (!v.ok() || !AddMissingChatMarkers(*v, 129280).ok()) std::abort();
    Expected<Tokenizer> t = Tokenizer::FromVocab(*v);
    if (!t.ok()) std::abort();
    return new Tokenizer(std::move(*t));
  }();
  return *tok;
}

void RunEncode(benchmark::State& state, const std::string& text) {
  if (text.size() < kCorpusBytes) {
    state.SkipWithError("corpus files missing on this machine");
    return;
  }
  size_t n_tokens = 0;
  for (auto _ : state) {
    std::vector<int32_t> ids = Tok().Encode(text, /*allow_specials=*/false);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
}

// The same text in 4 KiB calls (a chat turn's size): no per-call word cache.
void RunEncodeChunked(benchmark::State& state, const std::string& text) {
  constexpr size_t kChunk = 4096;
  for (auto _ : state) {
    for (size_t i = 0; i < text.size(); i += kChunk) {
      std::vector<int32_t> ids = Tok().Encode(std::string_view(text).substr(i, kChunk), false);
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

void RunDecodeStream(benchmark::State& state, const std::string& text) {
  std::vector<int32_t> ids = Tok().Encode(text, false);
  for (auto _ : state) {
    StreamDecoder d(Tok());
    size_t bytes = 0;
    for (int32_t id : ids) bytes += d.Push(id)->size();
    bytes += d.Flush().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

void BM_EncodeProse(benchmark::State& s) {
  RunEncode(s, Prose());
}
void BM_EncodeCode(benchmark::State& s) {
  RunEncode(s, Code());
}
void BM_EncodeProse4K(benchmark::State& s) {
  RunEncodeChunked(s, Prose());
}
void BM_EncodeCode4K(benchmark::State& s) {
  RunEncodeChunked(s, Code());
}
void BM_StreamDecodeProse(benchmark::State& s) {
  RunDecodeStream(s, Prose());
}

BENCHMARK(BM_EncodeProse)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeCode)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeProse4K)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeCode4K)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StreamDecodeProse)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace flashkv

BENCHMARK_MAIN();
