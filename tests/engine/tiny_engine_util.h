// Shared set-up for the engine tests that run the real model: the ds4-tiny fixture (a DS4
// GGUF with a 1024-id vocabulary, fast enough for unit tests and ASan), its tokenizer,
// chat prompts rendered by chat/, and a helper that runs one request on the calling thread
// (which then is the engine's worker) and collects its events.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "chat/prompt_renderer.h"
#include "engine/engine.h"
#include "engine/request_handle.h"
#include "engine/scheduler.h"
#include "gguf/gguf_file.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"

namespace flashkv::testing {

inline std::string TinyModelPath() {
  return std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";
}

// One process-wide model (loading is the slow part); each test makes its own Engine.
struct TinyModel {
  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<Tokenizer> tokenizer;
  Model& model() { return runtime->model(); }
};

inline TinyModel& Tiny() {
  static TinyModel* tiny = [] {
    auto* t = new TinyModel;
    RuntimeOptions ro;
    ro.model_path = TinyModelPath();
    ro.threads = 2;
    auto rt = Runtime::Open(ro);
    EXPECT_TRUE(rt.ok()) << rt.status().ToString();
    t->runtime = std::move(*rt);
    auto gguf = GgufFile::Open(TinyModelPath());
    EXPECT_TRUE(gguf.ok());
    auto tok = Tokenizer::FromGguf(*gguf);
    EXPECT_TRUE(tok.ok()) << tok.status().ToString();
    t->tokenizer = std::make_unique<Tokenizer>(std::move(*tok));
    return t;
  }();
  return *tiny;
}

inline ChatMessage Msg(ChatRole role, std::string content) {
  ChatMessage m;
  m.role = role;
  m.content = std::move(content);
  return m;
}

// A greedy chat request for `history`, non-thinking unless asked.
inline GenerationRequest ChatRequest(const std::vector<ChatMessage>& history, int max_tokens,
                                     ThinkingMode thinking = ThinkingMode::kNone) {
  GenerationRequest r;
  r.prompt_options.thinking = thinking;
  r.prompt_text = RenderPrompt(history, r.prompt_options);
  r.prompt_tokens = Tiny().tokenizer->EncodeChatPrompt(r.prompt_text);
  r.thinking = thinking != ThinkingMode::kNone;
  r.max_tokens = max_tokens;
  r.history = history;
  return r;
}

// A greedy raw request for exact ids (no chat parsing, no visible keys).
inline GenerationRequest RawRequest(std::vector<int32_t> ids, int max_tokens) {
  GenerationRequest r;
  auto text = Tiny().tokenizer->Decode(ids);
  EXPECT_TRUE(text.ok());
  r.prompt_text = *text;
  r.prompt_tokens = std::move(ids);
  r.output = OutputMode::kRaw;
  r.max_tokens = max_tokens;
  return r;
}

struct RunOutcome {
  std::vector<GenerationEvent> events;
  std::shared_ptr<const GenerationResult> result;  // null when the request failed
  Status error;
};

inline RunOutcome Drain(RequestHandle& h) {
  RunOutcome out;
  while (true) {
    auto ev = h.Next(std::chrono::milliseconds(30000));
    if (!ev) {
      ADD_FAILURE() << "no event within 30 s";
      return out;
    }
    out.events.push_back(*ev);
    if (ev->kind == GenerationEvent::Kind::kDone) {
      out.result = ev->result;
      return out;
    }
    if (ev->kind == GenerationEvent::Kind::kError) {
      out.error = ev->error;
      return out;
    }
  }
}

// Runs `request` on this thread (acting as the worker).
inline RunOutcome RunNow(Engine& engine, GenerationRequest request) {
  RequestHandle h(std::move(request));
  engine.Run(h);
  return Drain(h);
}

// Submits every request from its own client thread at once and waits for all: the text of
// each reply ("" for one that was refused or failed), in request order.
inline std::vector<std::string> RunConcurrently(Scheduler& sched,
                                                const std::vector<GenerationRequest>& reqs) {
  std::vector<std::string> got(reqs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < reqs.size(); ++i) {
    threads.emplace_back([&, i] {
      auto h = std::make_shared<RequestHandle>(reqs[i]);
      if (!sched.Submit(h)) return;
      auto out = Drain(*h);
      if (out.result) got[i] = out.result->text;
    });
  }
  for (auto& t : threads) t.join();
  return got;
}

}  // namespace flashkv::testing
