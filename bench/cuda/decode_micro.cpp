#include "decode_micro.h"

#include <cxxabi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <regex>
#include <span>
#include <string>

#include <fmt/format.h>

#include "state/kv_checkpoint.h"
#include "tensor/dtype.h"

namespace flashkv {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

// "MatVecKernel<Q8_0, true, 1>" from the mangled name: demangled, namespaces and the
// argument list dropped, DType values named.
std::string ShortName(const std::string& mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string s = status == 0 && d != nullptr ? d : mangled;
  std::free(d);
  if (s.rfind("void ", 0) == 0) s = s.substr(5);
  for (const char* ns : {"flashkv::cuda::", "(anonymous namespace)::", "flashkv::"}) {
    for (size_t p; (p = s.find(ns)) != std::string::npos;) s.erase(p, std::strlen(ns));
  }
  const size_t paren = s.rfind('(');
  if (paren != std::string::npos && paren > 0 && s.back() == ')') s = s.substr(0, paren);
  static const std::regex dtype(R"(\(DType\)(\d+))");
  std::string named;
  std::sregex_iterator it(s.begin(), s.end(), dtype), end;
  size_t at = 0;
  for (; it != end; ++it) {
    named += s.substr(at, size_t(it->position()) - at);
    named += GetDTypeInfo(DType(std::stoi((*it)[1].str()))).name;
    at = size_t(it->position() + it->length());
  }
  return named + s.substr(at);
}

namespace {

std::vector<int32_t> Prompt(size_t n, int vocab) {
  std::mt19937 rng(7);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(rng() % uint32_t(vocab));
  return t;
}

int32_t Argmax(const std::vector<float>& v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

std::vector<HostCopy> Sections(KvState& st, std::vector<std::vector<float>>& host) {
  std::vector<HostCopy> copies;
  host.clear();
  const KvShape& shape = st.shape();
  for (int l = 0; l < int(shape.layers.size()); ++l) {
    const KvState::Layer& L = st.layer(l);
    const std::pair<DevPtr<float>, KvSection> parts[] = {
        {L.ring, KvSection::kRaw},
        {L.comp_rows, KvSection::kCompressed},
        {L.comp_state_kv, KvSection::kCompressorKv},
        {L.comp_state_score, KvSection::kCompressorScore},
        {L.index_rows, KvSection::kIndexerRows},
        {L.index_state_kv, KvSection::kIndexerKv},
        {L.index_state_score, KvSection::kIndexerScore}};
    for (const auto& [p, sec] : parts) {
      const size_t n =
          sec == KvSection::kRaw ? size_t(shape.n_swa) * shape.head_dim : st.SectionFloats(l, sec);
      if (n == 0 || !p) continue;
      host.emplace_back(n);
      copies.push_back({DevPtr<void>(p.get()), host.back().data(), n * sizeof(float)});
    }
  }
  return copies;
}

namespace {

struct Variant {
  const char* name = "";
  bool fused = false;
  bool overlap = true;  // CudaBackend::SetOverlappedLaunches
  double tok_s = 0;
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // every timed step's
  std::vector<CudaKernelTime> profile;
  double wall_ms_profiled = 0;
};

// The verify step of speculative decoding at the restored frontier, for each row count r of
// o.verify_rows: capture a KvCheckpoint, append the greedy continuation's first r tokens in
// one forward with every row's logits, restore. The rows' logits must equal the one-token
// steps' (`greedy`, chunked prefill ≡ decode); each r is timed over o.decode_steps repeats
// after two untimed ones, and the capture + restore alone beside it.
Expected<nlohmann::json> VerifySteps(CudaBackend& be, Model& model, KvState& st,
                                     const Variant& greedy, const std::function<Status()>& restore,
                                     const DecodeMicroOptions& o) {
  const int V = model.config().n_vocab;
  const int max_rows = *std::max_element(o.verify_rows.begin(), o.verify_rows.end());
  if (max_rows < 1 || max_rows > int(greedy.tokens.size())) {
    return InvalidArgument("--verify-rows: 1 … {} rows", greedy.tokens.size());
  }
  FLASHKV_RETURN_IF_ERROR(restore());
  FLASHKV_ASSIGN_OR_RETURN(KvCheckpoint cp, KvCheckpoint::Create(be, st.shape(), max_rows));
  std::vector<float> logits(size_t(max_rows) * size_t(V));
  auto timed = [&](int reps, auto&& step) -> Expected<double> {
    FLASHKV_RETURN_IF_ERROR(be.Synchronize());
    const auto a = Clock::now();
    for (int i = 0; i < reps; ++i) FLASHKV_RETURN_IF_ERROR(step());
    FLASHKV_RETURN_IF_ERROR(be.Synchronize());
    return 1e3 * std::chrono::duration<double>(Clock::now() - a).count() / reps;
  };
  auto round_trip = [&]() -> Status {
    FLASHKV_RETURN_IF_ERROR(cp.Capture(st));
    return cp.Restore(st);
  };
  FLASHKV_ASSIGN_OR_RETURN(const double cp_ms, timed(o.decode_steps, round_trip));
  nlohmann::json out = nlohmann::json::array();
  for (int r : o.verify_rows) {
    auto step = [&]() -> Status {
      FLASHKV_RETURN_IF_ERROR(cp.Capture(st));
      FLASHKV_RETURN_IF_ERROR(
          model.Forward(std::span<const int32_t>(greedy.tokens.data(), size_t(r)), st,
                        LogitsFor::kAll, logits.data()));
      return cp.Restore(st);
    };
    for (int i = 0; i < 2; ++i) FLASHKV_RETURN_IF_ERROR(step());  // untimed: graphs, caches
    const bool same = std::memcmp(logits.data(), greedy.logits.data(),
                                  sizeof(float) * size_t(r) * size_t(V)) == 0;
    FLASHKV_ASSIGN_OR_RETURN(const double ms, timed(o.decode_steps, step));
    std::printf(
        "  verify step of %d row%s: %.3f ms (capture + restore alone %.3f ms); its logits %s the "
        "one-token steps'\n",
        r, r == 1 ? "" : "s", ms, cp_ms, same ? "are bit-identical to" : "DIFFER from");
    out.push_back({{"rows", r}, {"ms", ms}, {"checkpoint_ms", cp_ms}, {"bit_identical", same}});
  }
  std::fflush(stdout);
  FLASHKV_RETURN_IF_ERROR(restore());
  return out;
}

}  // namespace

Status RunDecodeMicro(CudaBackend& be, Model& model, const DecodeMicroOptions& o,
                      nlohmann::json& out) {
  const ModelConfig& cfg = model.config();
  const int V = cfg.n_vocab;
  // The copy reference: 1 GiB device to device, read + write bytes per second.
  constexpr size_t kCopyBytes = size_t(1) << 30;
  FLASHKV_ASSIGN_OR_RETURN(const double copy_ms, be.TimeDeviceCopy(kCopyBytes, 10));
  const double copy_gbs = 2.0 * double(kCopyBytes) / (copy_ms * 1e-3) / 1e9;
  std::printf("device-to-device copy of 1 GiB: %.3f ms, %.0f GB/s (read + write)\n", copy_ms,
              copy_gbs);
  nlohmann::json res;
  res["copy_gb_s"] = copy_gbs;
  res["bytes_per_token_gb"] = o.bytes_per_token / 1e9;
  nlohmann::json rows = nlohmann::json::array();
  const int max_f = *std::max_element(o.frontiers.begin(), o.frontiers.end());
  const int steps = o.warmup_steps + std::max(o.decode_steps, o.profile_steps) + 1;
  const auto prompt = Prompt(size_t(max_f), V);
  const bool was_fused = be.fused();
  const bool was_overlap = be.overlapped_launches();

  for (int f : o.frontiers) {
    FLASHKV_ASSIGN_OR_RETURN(KvState st, model.NewState(f + steps));
    be.SetFused(false);
    std::vector<float> first(V);
    FLASHKV_RETURN_IF_ERROR(model.Forward(std::span<const int32_t>(prompt.data(), size_t(f)), st,
                                          LogitsFor::kLast, first.data(), o.chunk));
    std::vector<std::vector<float>> saved;
    const std::vector<HostCopy> copies = Sections(st, saved);
    FLASHKV_RETURN_IF_ERROR(be.ReadMany(copies.data(), copies.size()));
    auto restore = [&]() -> Status {
      FLASHKV_RETURN_IF_ERROR(st.SetTokenCount(f));
      return be.WriteMany(copies.data(), copies.size());
    };
    // n greedy steps from the restored state; their tokens and logits appended when asked.
    auto decode = [&](int n, std::vector<int32_t>* tokens, std::vector<float>* kept) -> Status {
      std::vector<float> logits = first;
      for (int i = 0; i < n; ++i) {
        const int32_t next = Argmax(logits);
        if (tokens != nullptr) tokens->push_back(next);
        FLASHKV_RETURN_IF_ERROR(
            model.Forward(std::span<const int32_t>(&next, 1), st, LogitsFor::kLast, logits.data()));
        if (kept != nullptr) kept->insert(kept->end(), logits.begin(), logits.end());
      }
      return Status::Ok();
    };

    // Unfused, fused with the tile kernels launched plainly, fused with them overlapped
    // (programmatic dependent launches: the backend's default).
    std::vector<Variant> variants(3);
    const char* names[3] = {"unfused", "fused_plain_launches", "fused"};
    const bool fused[3] = {false, true, true};
    const bool overlap[3] = {was_overlap, false, was_overlap};
    for (int i = 0; i < 3; ++i) {
      variants[i].name = names[i];
      variants[i].fused = fused[i];
      variants[i].overlap = overlap[i];
    }
    for (Variant& v : variants) {
      be.SetFused(v.fused);
      be.SetOverlappedLaunches(v.overlap);
      // Timed, graphs on: warm-up steps (the graphs are built on repeats), then the timed
      // steps from the same state again (copying each step's logits out costs ~0.5 MB).
      FLASHKV_RETURN_IF_ERROR(restore());
      FLASHKV_RETURN_IF_ERROR(decode(o.warmup_steps, nullptr, nullptr));
      FLASHKV_RETURN_IF_ERROR(restore());
      FLASHKV_RETURN_IF_ERROR(be.Synchronize());
      const auto a = Clock::now();
      FLASHKV_RETURN_IF_ERROR(decode(o.decode_steps, &v.tokens, &v.logits));
      v.tok_s = o.decode_steps / std::chrono::duration<double>(Clock::now() - a).count();
      // Profiled (graphs off).
      FLASHKV_RETURN_IF_ERROR(restore());
      FLASHKV_RETURN_IF_ERROR(be.Synchronize());
      be.SetProfiling(true);
      be.ProfileTimes(true);
      const auto b = Clock::now();
      FLASHKV_RETURN_IF_ERROR(decode(o.profile_steps, nullptr, nullptr));
      FLASHKV_RETURN_IF_ERROR(be.Synchronize());
      v.wall_ms_profiled =
          1e3 * std::chrono::duration<double>(Clock::now() - b).count() / o.profile_steps;
      v.profile = be.ProfileTimes(true);
      be.SetProfiling(false);
    }
    bool same = true;
    for (size_t i = 1; i < variants.size(); ++i) {
      same = same && variants[0].tokens == variants[i].tokens &&
             variants[0].logits.size() == variants[i].logits.size() &&
             std::memcmp(variants[0].logits.data(), variants[i].logits.data(),
                         4 * variants[0].logits.size()) == 0;
    }

    nlohmann::json row;
    row["frontier"] = f;
    row["fused_bit_identical"] = same;
    for (const Variant& v : variants) {
      const char* name = v.name;
      double launches = 0, ms = 0, bytes = 0, product_ms = 0;
      for (const CudaKernelTime& k : v.profile) {
        launches += double(k.launches);
        ms += k.ms;
        bytes += double(k.bytes);
        if (k.bytes > 0) product_ms += k.ms;
      }
      const double product_gbs = product_ms > 0 ? bytes / (product_ms * 1e-3) / 1e9 : 0.0;
      const double per = 1.0 / o.profile_steps;
      std::printf(
          "\nfrontier %d, %s: decode %.1f tok/s (%.2f ms, %.1f%% of the copy-bandwidth bound "
          "%.0f tok/s); profiled step: %.0f kernels (%.1f per layer), %.2f ms of kernel time, "
          "%.2f ms wall\n",
          f, name, v.tok_s, 1e3 / v.tok_s, 100.0 * v.tok_s * o.bytes_per_token / (copy_gbs * 1e9),
          copy_gbs * 1e9 / o.bytes_per_token, launches * per, launches * per / cfg.n_layer,
          ms * per, v.wall_ms_profiled);
      std::printf("  %10s %8s %7s %9s %7s  %s\n", "us/token", "launches", "share", "GB/s",
                  "of copy", "kernel");
      nlohmann::json kernels = nlohmann::json::array();
      for (const CudaKernelTime& k : v.profile) {
        const double us = 1e3 * k.ms * per;
        const double gbs = k.bytes > 0 ? double(k.bytes) / (k.ms * 1e-3) / 1e9 : 0.0;
        const std::string shortname = ShortName(k.name);
        std::printf("  %10.1f %8.1f %6.1f%% %9s %7s  %s\n", us, double(k.launches) * per,
                    ms > 0 ? 100.0 * k.ms / ms : 0.0,
                    gbs > 0 ? fmt::format("{:.0f}", gbs).c_str() : "",
                    gbs > 0 ? fmt::format("{:.0f}%", 100.0 * gbs / copy_gbs).c_str() : "",
                    shortname.c_str());
        kernels.push_back({{"kernel", shortname},
                           {"us_per_token", us},
                           {"launches_per_token", double(k.launches) * per},
                           {"weight_gb_s", gbs}});
      }
      std::printf(
          "  weight products: %.3f GB per token in %.2f ms, %.0f GB/s (%.0f%% of the copy); the "
          "other kernels %.2f ms\n",
          bytes * per / 1e9, product_ms * per, product_gbs, 100.0 * product_gbs / copy_gbs,
          (ms - product_ms) * per);
      nlohmann::json r;
      r["decode_tok_s"] = v.tok_s;
      r["decode_ms_per_token"] = 1e3 / v.tok_s;
      r["kernels_per_token"] = launches * per;
      r["kernels_per_layer"] = launches * per / cfg.n_layer;
      r["kernel_ms_per_token"] = ms * per;
      r["product_gb_per_token"] = bytes * per / 1e9;
      r["product_ms_per_token"] = product_ms * per;
      r["product_gb_s"] = product_gbs;
      r["profiled_wall_ms_per_token"] = v.wall_ms_profiled;
      r["kernels"] = kernels;
      row[name] = r;
    }
    std::printf(
        "frontier %d: fused decode (plain and overlapped launches) %s the unfused (%d greedy "
        "steps, logits compared)\n",
        f, same ? "is bit-identical to" : "DIFFERS from", o.decode_steps);
    std::fflush(stdout);
    if (!o.verify_rows.empty()) {
      be.SetFused(was_fused);
      be.SetOverlappedLaunches(was_overlap);
      FLASHKV_ASSIGN_OR_RETURN(nlohmann::json verify,
                               VerifySteps(be, model, st, variants.back(), restore, o));
      row["verify"] = verify;
    }
    rows.push_back(row);
  }
  be.SetFused(was_fused);
  be.SetOverlappedLaunches(was_overlap);
  res["frontiers"] = rows;
  out["decode_micro"] = res;
  return Status::Ok();
}

}  // namespace flashkv
