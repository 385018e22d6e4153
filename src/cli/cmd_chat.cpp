// `flashkv chat`: an interactive conversation in the terminal on the engine the server uses.
// Each turn renders the whole conversation with the DS4 chat template and runs it as one
// request, so the live session continues it (only the new turn is prefilled) and the disk
// KV cache keeps it across runs: /save NAME stores the text (cli/chat_store.h) and flushes
// the session's snapshot to disk; /load NAME brings the text back and the next turn restores
// its KV from disk instead of prefilling it again. Ctrl+C stops a reply and returns to the
// prompt; at an empty prompt a second Ctrl+C (or Ctrl+D, /exit) quits.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "chat/prompt_renderer.h"
#include "cli/chat_store.h"
#include "cli/commands.h"
#include "cli/kv_cache_flags.h"
#include "cli/line_editor.h"
#include "cli/load_progress.h"
#include "cli/model_flags.h"
#include "cli/prefill_chunk_flag.h"
#include "engine/engine.h"
#include "kv_disk/disk_cache.h"
#include "runtime/runtime.h"
#include "util/progress.h"

namespace flashkv::cli {
namespace {

struct ChatFlags {
  ModelFlags model;
  int ctx = 16384;
  int n_predict = 4096;
  float temperature = 0.6f;
  float top_p = 0.95f;
  uint64_t seed = 0;
  int chunk = 2048;
  std::string prefill_chunk_solo = "auto";  // cli/prefill_chunk_flag.h
  std::string system;
  bool think = false;
  std::string chat_dir;  // empty: $XDG_DATA_HOME/flashkv/chats
  bool no_kv_disk = false;
  KvDiskFlags kv;  // empty dir: $XDG_CACHE_HOME/flashkv/kv
};

std::atomic<bool> g_stop_reply{false};
int g_wake_prompt = -1;  // write end of the pipe the prompt's editor polls

void OnChatInterrupt(int) {
  g_stop_reply.store(true);
  if (g_wake_prompt >= 0) {
    const char b = 1;
    [[maybe_unused]] const ssize_t n = write(g_wake_prompt, &b, 1);
  }
}

// SIGINT goes to OnChatInterrupt for the whole chat, not only while a reply streams: a
// Ctrl+C typed in the moment the terminal is out of raw mode (a reply's last bytes, before
// the prompt's editor takes it) must reach the prompt as a Ctrl+C, not end the process with
// status 130. SA_RESTART: other reads and writes of the chat go on.
class ChatInterruptHandler {
 public:
  ChatInterruptHandler() {
    if (pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) == 0) g_wake_prompt = pipe_[1];
    struct sigaction sa {};
    sa.sa_handler = OnChatInterrupt;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &previous_);
  }
  ~ChatInterruptHandler() {
    sigaction(SIGINT, &previous_, nullptr);
    g_wake_prompt = -1;
    if (pipe_[0] >= 0) close(pipe_[0]);
    if (pipe_[1] >= 0) close(pipe_[1]);
  }
  ChatInterruptHandler(const ChatInterruptHandler&) = delete;
  ChatInterruptHandler& operator=(const ChatInterruptHandler&) = delete;

  int wake_fd() const { return pipe_[0]; }

 private:
  int pipe_[2] = {-1, -1};
  struct sigaction previous_ {};
};

std::string XdgDir(const char* var, const char* fallback, const char* leaf) {
  const char* base = std::getenv(var);
  if (base != nullptr && base[0] == '/') return std::string(base) + "/flashkv/" + leaf;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/" + fallback + "/flashkv/" + leaf;
}

// What the last reply cost, for /stats.
struct LastTurn {
  bool valid = false;
  CacheInfo cache;
  RequestTiming timing;
  FinishReason finish = FinishReason::kStop;
};

class ChatSession {
 public:
  ChatSession(const ChatFlags& f, const Tokenizer& tokenizer, Engine& engine, DiskCache* disk,
              ChatStore store)
      : f_(f), tokenizer_(tokenizer), engine_(engine), disk_(disk), store_(std::move(store)) {
    system_ = f.system;
    think_ = f.think;
    color_ = isatty(STDOUT_FILENO) == 1;
  }

  // False: quit.
  bool Command(const std::string& line);
  void Turn(const std::string& text);

 private:
  void PrintStats() const;
  void Save(const std::string& name);
  void Load(const std::string& name);
  std::vector<ChatMessage> Conversation() const;

  const ChatFlags& f_;
  const Tokenizer& tokenizer_;
  Engine& engine_;
  DiskCache* disk_;
  ChatStore store_;
  std::string system_;
  bool think_ = false;
  bool color_ = false;
  std::vector<ChatMessage> messages_;
  LastTurn last_;
};

std::vector<ChatMessage> ChatSession::Conversation() const {
  std::vector<ChatMessage> all;
  if (!system_.empty()) {
    ChatMessage s;
    s.role = ChatRole::kSystem;
    s.content = system_;
    all.push_back(std::move(s));
  }
  all.insert(all.end(), messages_.begin(), messages_.end());
  return all;
}

void ChatSession::Turn(const std::string& text) {
  ChatMessage user;
  user.role = ChatRole::kUser;
  user.content = text;
  messages_.push_back(std::move(user));

  GenerationRequest req;
  req.history = Conversation();
  req.prompt_options.thinking = think_ ? ThinkingMode::kHigh : ThinkingMode::kNone;
  req.prompt_text = RenderPrompt(req.history, req.prompt_options);
  req.prompt_tokens = tokenizer_.EncodeChatPrompt(req.prompt_text);
  if (int64_t(req.prompt_tokens.size()) + 1 >= f_.ctx) {
    std::printf(
        "the conversation has %zu tokens, the context %d: /clear it or restart with a "
        "larger --ctx\n",
        req.prompt_tokens.size(), f_.ctx);
    messages_.pop_back();
    return;
  }
  req.output = OutputMode::kChat;
  req.thinking = think_;
  req.max_tokens = f_.n_predict;
  req.replays_reasoning = false;  // the next turn renders the reply without its reasoning
  req.sampling = SamplerOptions{f_.temperature, 0, f_.top_p, 0.0f, f_.seed};
  if (f_.seed == 0)
    req.sampling.seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());

  auto handle = std::make_shared<RequestHandle>(std::move(req));
  g_stop_reply = false;
  std::thread worker([&] { engine_.Run(*handle); });

  std::optional<Progress> progress;
  int64_t cached = 0;
  bool in_reasoning = false;
  std::shared_ptr<const GenerationResult> result;
  std::string failure;
  while (!result && failure.empty()) {
    std::optional<GenerationEvent> ev = handle->Next(std::chrono::milliseconds(50));
    if (g_stop_reply.load() && !handle->cancelled()) handle->Cancel();
    if (!ev) continue;
    switch (ev->kind) {
      case GenerationEvent::Kind::kStarted:
        cached = ev->cache.cached_tokens;
        if (ev->cache.source == CacheSource::kDisk) {
          std::printf("[kv: %lld of %lld tokens restored from disk in %.1f ms]\n",
                      static_cast<long long>(ev->cache.cached_tokens),
                      static_cast<long long>(ev->cache.prompt_tokens), ev->cache.restore_ms);
          std::fflush(stdout);
        }
        progress.emplace("prefill", uint64_t(ev->cache.prompt_tokens), "tok");
        progress->Update(uint64_t(cached));
        break;
      case GenerationEvent::Kind::kPrefill:
        if (progress) progress->Update(uint64_t(cached + ev->done));
        break;
      case GenerationEvent::Kind::kChat: {
        progress.reset();
        const bool reasoning = ev->chat.kind == ChatEvent::Kind::kReasoning;
        if (ev->chat.kind != ChatEvent::Kind::kReasoning &&
            ev->chat.kind != ChatEvent::Kind::kContent) {
          break;
        }
        if (reasoning != in_reasoning) {
          if (color_) std::fputs(reasoning ? "\033[2m" : "\033[0m", stdout);
          if (!reasoning) std::fputs("\n", stdout);
          in_reasoning = reasoning;
        }
        std::fwrite(ev->chat.text.data(), 1, ev->chat.text.size(), stdout);
        std::fflush(stdout);
        break;
      }
      case GenerationEvent::Kind::kDone:
        result = ev->result;
        break;
      case GenerationEvent::Kind::kError:
        failure = ev->error.ok() ? "the request failed" : ev->error.ToString();
        break;
      case GenerationEvent::Kind::kText:
        break;
    }
  }
  worker.join();
  // The Ctrl+C that stopped this reply is spent; one typed after it is the prompt's.
  if (handle->cancelled()) g_stop_reply = false;
  progress.reset();
  if (in_reasoning && color_) std::fputs("\033[0m", stdout);
  std::fputs("\n", stdout);
  if (!failure.empty()) {
    std::printf("error: %s\n", failure.c_str());
    messages_.pop_back();
    return;
  }
  last_ = LastTurn{true, result->cache, result->timing, result->finish};
  if (result->finish == FinishReason::kCancelled) std::printf("[stopped]\n");
  if (result->finish == FinishReason::kError) std::printf("error: %s\n", result->error.c_str());
  // The reply as the next turn renders it: content only (the template drops reasoning), so
  // the live session's visible key matches what the next prompt starts with.
  ChatMessage reply;
  reply.role = ChatRole::kAssistant;
  reply.content = result->parsed.content;
  messages_.push_back(std::move(reply));
  std::fflush(stdout);
}

void ChatSession::PrintStats() const {
  std::printf("conversation: %zu messages, system prompt %s, thinking %s\n", messages_.size(),
              system_.empty() ? "none" : "set", think_ ? "on" : "off");
  if (!last_.valid) {
    std::printf("no reply yet\n");
    return;
  }
  const RequestTiming& t = last_.timing;
  std::printf(
      "last reply: prompt %lld tokens, %lld reused (%s%s%s), prefill %lld in %.1f ms "
      "(%.1f tok/s), generated %lld in %.1f ms (%.1f tok/s), finish %s\n",
      static_cast<long long>(last_.cache.prompt_tokens),
      static_cast<long long>(last_.cache.cached_tokens), CacheSourceName(last_.cache.source),
      last_.cache.detail.empty() ? "" : " ", last_.cache.detail.c_str(),
      static_cast<long long>(t.prefill_tokens), t.prefill_ms, t.prefill_tps(),
      static_cast<long long>(t.decode_tokens), t.decode_ms, t.decode_tps(),
      FinishReasonName(last_.finish));
}

void ChatSession::Save(const std::string& name) {
  SavedChat chat{system_, think_, messages_};
  if (Status s = store_.Save(name, chat); !s.ok()) {
    std::printf("not saved: %s\n", s.message().c_str());
    return;
  }
  // The live session's snapshot goes to disk now, so /load in a later run restores it.
  if (disk_ != nullptr) engine_.OnShutdown();
  std::printf("saved '%s' (%zu messages)%s\n", name.c_str(), messages_.size(),
              disk_ != nullptr ? ", its KV in the disk cache" : " (no disk KV cache: text only)");
}

void ChatSession::Load(const std::string& name) {
  Expected<SavedChat> chat = store_.Load(name);
  if (!chat.ok()) {
    std::printf("not loaded: %s\n", chat.status().message().c_str());
    return;
  }
  system_ = chat->system;
  think_ = chat->think;
  messages_ = std::move(chat->messages);
  std::printf(
      "loaded '%s' (%zu messages, thinking %s); its KV is restored from disk with the "
      "next message\n",
      name.c_str(), messages_.size(), think_ ? "on" : "off");
  for (const ChatMessage& m : messages_) {
    if (color_) std::fputs("\033[2m", stdout);
    std::printf("%s %s\n", m.role == ChatRole::kUser ? ">>>" : "   ", m.content.c_str());
    if (color_) std::fputs("\033[0m", stdout);
  }
}

bool ChatSession::Command(const std::string& line) {
  const size_t space = line.find(' ');
  const std::string cmd = line.substr(0, space);
  std::string arg = space == std::string::npos ? "" : line.substr(space + 1);
  while (!arg.empty() && arg.back() == ' ') arg.pop_back();
  if (cmd == "/exit" || cmd == "/quit" || cmd == "/bye") return false;
  if (cmd == "/help" || cmd == "/?") {
    std::printf(
        "/system TEXT   set the system prompt (/system alone clears it)\n"
        "/think on|off  thinking mode for the next replies\n"
        "/clear         forget the conversation (the system prompt stays)\n"
        "/save NAME     save the conversation; its KV goes to the disk cache\n"
        "/load NAME     load a saved conversation (its KV comes back from disk)\n"
        "/list          saved conversations\n"
        "/stats         the last reply's cache use and speeds\n"
        "/exit          quit (also Ctrl+D, or Ctrl+C twice at the prompt)\n"
        "A line ending in \\ continues on the next; \"\"\" starts and ends a block.\n"
        "Ctrl+C stops a reply.\n");
  } else if (cmd == "/system") {
    system_ = arg;
    std::printf(arg.empty() ? "system prompt cleared\n" : "system prompt set\n");
  } else if (cmd == "/think") {
    if (arg != "on" && arg != "off") {
      std::printf("usage: /think on|off (now %s)\n", think_ ? "on" : "off");
    } else {
      think_ = arg == "on";
      std::printf("thinking %s\n", think_ ? "on" : "off");
    }
  } else if (cmd == "/clear") {
    messages_.clear();
    std::printf("conversation cleared\n");
  } else if (cmd == "/save") {
    Save(arg);
  } else if (cmd == "/load") {
    Load(arg);
  } else if (cmd == "/list") {
    Expected<std::vector<std::string>> names = store_.List();
    if (!names.ok()) {
      std::printf("%s\n", names.status().message().c_str());
    } else if (names->empty()) {
      std::printf("no saved conversations in %s\n", store_.dir().c_str());
    } else {
      for (const std::string& n : *names) std::printf("%s\n", n.c_str());
    }
  } else if (cmd == "/stats") {
    PrintStats();
  } else {
    std::printf("unknown command %s (/help lists them)\n", cmd.c_str());
  }
  std::fflush(stdout);
  return true;
}

Status RunChat(ChatFlags f) {
  if (f.n_predict < 1) return InvalidArgument("-n must be >= 1");
  if (f.chunk < 1) return InvalidArgument("--prefill-chunk must be positive");
  // One conversation, so nothing else decodes: every step takes the solo chunk.
  FLASHKV_ASSIGN_OR_RETURN(
      const int solo_chunk,
      ResolvePrefillChunkSolo(f.prefill_chunk_solo, f.chunk, ResolvedBackend(f.model)));
  if (f.ctx < 64) return InvalidArgument("--ctx must be at least 64");
  if (f.chat_dir.empty()) f.chat_dir = XdgDir("XDG_DATA_HOME", ".local/share", "chats");
  if (f.no_kv_disk) {
    f.kv.dir.clear();
  } else if (f.kv.dir.empty()) {
    f.kv.dir = XdgDir("XDG_CACHE_HOME", ".cache", "kv");
  }

  FLASHKV_ASSIGN_OR_RETURN(ModelSetup setup, OpenModel(f.model));
  LoadReporter load;
  FLASHKV_ASSIGN_OR_RETURN(
      std::unique_ptr<Runtime> rt,
      OpenRuntime(f.model, setup, DeviceReserve{f.ctx, 1, solo_chunk}, load.Weights(0, 1)));
  std::unique_ptr<DiskCache> disk;
  FLASHKV_ASSIGN_OR_RETURN(CachePolicy policy, CachePolicy::Create(f.kv.policy));
  if (!f.kv.dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(f.kv.dir, ec);
    auto opened = OpenDiskCache(f.kv, setup);
    if (opened.ok()) {
      disk = std::move(*opened);
    } else {
      std::fprintf(stderr, "kv: disk cache off (%s); /save keeps the text only\n",
                   opened.status().ToString().c_str());
    }
  }
  EngineOptions eo;
  eo.ctx_size = f.ctx;
  eo.live_sessions = 1;
  eo.prefill_chunk = f.chunk;
  eo.prefill_chunk_solo = solo_chunk;
  eo.max_batch = 1;
  eo.disk = disk.get();
  eo.policy = policy;
  EngineMetrics metrics;
  ToolReplayMap replay;
  Engine engine(rt->model(), setup.tokenizer, replay, metrics, eo);

  ChatSession chat(f, setup.tokenizer, engine, disk.get(), ChatStore(f.chat_dir));
  std::error_code ec;
  std::filesystem::create_directories(f.chat_dir, ec);
  LineEditor editor(ec ? "" : f.chat_dir + "/history");
  ChatInterruptHandler sigint;
  editor.SetInterrupt(&g_stop_reply, sigint.wake_fd());
  std::printf(
      "flashkv chat: %s on %s, context %d%s. /help lists commands; Ctrl+C stops a "
      "reply, Ctrl+D or /exit quits.\n",
      setup.description.c_str(), std::string(rt->backend().name()).c_str(), f.ctx,
      disk ? (", KV cache " + f.kv.dir).c_str() : "");
  std::fflush(stdout);

  bool interrupted = false;  // the last prompt was left with Ctrl+C
  std::string block;         // a multi-line message being typed
  bool in_block = false;
  while (true) {
    std::string line;
    const LineEditor::Result r =
        editor.ReadLine(in_block || !block.empty() ? "... " : ">>> ", &line);
    if (r == LineEditor::Result::kEof) break;
    if (r == LineEditor::Result::kInterrupt) {
      if (in_block || !block.empty()) {
        block.clear();
        in_block = false;
        interrupted = false;
        continue;
      }
      if (interrupted) break;
      interrupted = true;
      std::printf("(Ctrl+C again, Ctrl+D or /exit to quit)\n");
      std::fflush(stdout);
      continue;
    }
    interrupted = false;
    if (line == "\"\"\"") {
      in_block = !in_block;
      if (in_block) continue;
      line = block;
      block.clear();
    } else if (in_block) {
      block += line + "\n";
      continue;
    } else if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      block += line + "\n";
      continue;
    } else if (!block.empty()) {
      line = block + line;
      block.clear();
    }
    if (line.empty()) continue;
    editor.AddHistory(line);
    if (line[0] == '/' && line.find('\n') == std::string::npos) {
      if (!chat.Command(line)) break;
      continue;
    }
    chat.Turn(line);
  }
  // Like the server's shutdown: the live session goes to disk for the next run.
  if (disk) engine.OnShutdown();
  return Status::Ok();
}

void RegisterChat(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat",
                                 "Interactive chat in the terminal (line editing, "
                                 "/save and /load through the disk KV cache)");
  auto f = std::make_shared<ChatFlags>();
  AddModelFlags(cmd, &f->model);
  AddNumericsFlags(cmd, &f->model);
  AddTokenizerFlag(cmd, &f->model);
  cmd->add_option("--ctx,-c,--ctx-size", f->ctx, "context tokens of the conversation")
      ->capture_default_str();
  cmd->add_option("-n,--n-predict,--tokens,--gen-tokens", f->n_predict, "most tokens per reply")
      ->capture_default_str();
  cmd->add_option("--temp", f->temperature, "temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-p", f->top_p, "nucleus mass (1: off)")->capture_default_str();
  cmd->add_option("--seed", f->seed, "sampler seed (0: a new one each reply)");
  cmd->add_option("--prefill-chunk,--chunk", f->chunk, "prompt tokens per prefill step")
      ->capture_default_str();
  AddPrefillChunkSoloFlag(cmd, &f->prefill_chunk_solo);
  cmd->add_option("--system,--system-prompt", f->system, "the system prompt");
  cmd->add_flag("--think", f->think, "start with thinking on (/think on|off switches)");
  cmd->add_option("--chat-dir", f->chat_dir,
                  "where /save writes conversations and the line history "
                  "(default $XDG_DATA_HOME/flashkv/chats)");
  cmd->add_flag("--no-kv-disk", f->no_kv_disk, "no disk KV cache (/save keeps the text only)");
  AddKvDiskFlags(cmd, &f->kv,
                 "disk KV cache directory (default $XDG_CACHE_HOME/flashkv/kv): conversations "
                 "continue from it across runs");
  cmd->callback([f, cmd] {
    // The engine's per-request info lines would land inside the replies.
    const CLI::App* root = cmd->get_parent();
    if (root != nullptr && root->get_option("--log-level")->count() == 0) {
      spdlog::set_level(spdlog::level::warn);
    }
    Status s = RunChat(*f);
    if (!s.ok()) Fail("chat", s);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(15, RegisterChat);

}  // namespace flashkv::cli
