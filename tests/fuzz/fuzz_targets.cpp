#include "fuzz_targets.h"

#include <hiredis/hiredis.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include <string>

#include <spdlog/spdlog.h>

#include "backend/cpu/cpu_backend.h"
#include "chat/output_parser.h"
#include "chat/prompt_renderer.h"
#include "convert/safetensors_file.h"
#include "gguf/gguf_file.h"
#include "kv_remote/remote_command.h"
#include "kv_remote/remote_frame.h"
#include "kv_remote/remote_store.h"
#include "model/model_config.h"
#include "server/anthropic_messages.h"
#include "server/openai_chat.h"
#include "server/openai_responses.h"
#include "server/request_reader.h"
#include "snapshot/snapshot_chunks.h"
#include "snapshot/snapshot_codec.h"
#include "tokenizer/tokenizer.h"
#include "util/crc32c.h"
#include "util/file_io.h"

namespace flashkv::fuzz {

// Seeds (fuzz_seeds.cpp).
std::vector<Bytes> GgufSeeds();
std::vector<Bytes> SnapshotSeeds();
std::vector<Bytes> RequestSeeds();
std::vector<Bytes> DsmlSeeds();
std::vector<Bytes> SafetensorsSeeds();
std::vector<Bytes> ChunkSeeds();
std::vector<Bytes> RemoteSeeds();
std::string_view RemoteSeedSecret();
std::string_view RemoteSeedKey();
Sha1Digest RemoteSeedModel();
KvShape SeedShape();
SnapshotIdentity SeedIdentity();

namespace {

// Keeps sums of what was read alive so nothing is optimised away.
volatile uint64_t g_sink = 0;

void Quiet() {
  static const bool once = [] {
    spdlog::set_level(spdlog::level::off);
    return true;
  }();
  (void)once;
}

int RunGguf(Input in) {
  Quiet();
  auto f = GgufFile::FromBytes(Bytes(in.begin(), in.end()));
  if (!f.ok()) return 0;
  int depth = 1;
  uint64_t h = 0;
  for (const std::string& key : f->keys()) {
    h += f->Describe(key).size();
    if (auto v = f->GetU64(key); v.ok()) h += *v;
    if (auto v = f->GetI64(key); v.ok()) h += uint64_t(*v);
    if (auto v = f->GetF64(key); v.ok()) h += *v != 0;
    if (auto v = f->GetBool(key); v.ok()) h += *v;
    if (auto v = f->GetString(key); v.ok()) h += v->size();
    if (auto v = f->GetIntArray(key); v.ok()) h += v->size();
    if (auto v = f->GetFloatArray(key); v.ok()) h += v->size();
    if (auto v = f->GetStringArray(key); v.ok()) h += v->size();
  }
  for (const GgufTensorInfo& t : f->tensors()) {
    for (uint64_t i = 0; i < t.nbytes; i += 61) h += t.data[i];
    if (t.nbytes > 0) h += t.data[t.nbytes - 1];
  }
  if (auto c = ModelConfig::FromGguf(*f); c.ok()) {
    h += uint64_t(c->q_dim()) + c->hc_dim();
    ++depth;
  }
  if (auto tok = Tokenizer::FromGguf(*f); tok.ok()) {
    ++depth;
    const std::vector<int32_t> ids = tok->Encode("Hello <｜User｜> wörld 123", true);
    h += ids.size();
    if (auto text = tok->Decode(ids); text.ok()) h += text->size();
  }
  g_sink = g_sink + h;
  return depth;
}

// One memory file for every input, reached by path as the cache reaches its files.
class MemoryFile {
 public:
  MemoryFile() : fd_(memfd_create("fuzz-kv", MFD_CLOEXEC)) {}
  std::string Hold(Input in) {
    if (ftruncate(fd_, 0) != 0) return {};
    size_t done = 0;
    while (done < in.size()) {
      const ssize_t n = pwrite(fd_, in.data() + done, in.size() - done, off_t(done));
      if (n <= 0) return {};
      done += size_t(n);
    }
    return "/proc/self/fd/" + std::to_string(fd_);
  }

 private:
  int fd_;
};

int RunSnapshot(Input in) {
  Quiet();
  static MemoryFile mem;
  static CpuBackend backend(nullptr);
  const std::string path = mem.Hold(in);
  if (path.empty()) return 0;
  uint64_t h = 0;
  int depth = 0;
  {
    auto file = File::OpenRead(path);
    if (!file.ok()) return 0;
    if (auto header = ReadSnapshotHeader(*file); header.ok()) {
      depth = 1;
      h += header->n_tokens;
      for (const SnapshotSection& s : header->sections) {
        if (s.bytes <= (uint64_t(1) << 20)) {
          if (auto bytes = ReadSnapshotSection(*file, s); bytes.ok()) h += bytes->size();
        }
      }
    }
    if (auto scan = ScanSnapshotFile(*file); scan.ok()) {
      ++depth;
      h += scan->text.size() + scan->tokens.size();
      h += TokensKey(scan->tokens)[0];
    }
  }
  if (auto v = VerifySnapshotFile(path); v.ok()) {
    h += v->n_tokens;
    ++depth;
  }
  static auto state = KvState::Create(backend, SeedShape());
  if (state.ok()) {
    SnapshotLoadOptions o;
    o.chunk_bytes = 4096;  // many chunks, so the staging path runs
    o.staging_buffers = 2;
    if (auto loaded = LoadSnapshot(path, SeedIdentity(), *state, o); loaded.ok()) {
      ++depth;
      h += loaded->tokens.size() + loaded->logits.size() + loaded->extensions.size();
      h += uint64_t(state->n_tokens());
    }
  }
  g_sink = g_sink + h;
  return depth;
}

// A chunk file's header and payload CRC, and the same bytes as a manifest's chunk list.
int RunChunk(Input in) {
  Quiet();
  int depth = 0;
  uint64_t h = 0;
  const std::string_view bytes(reinterpret_cast<const char*>(in.data()), in.size());
  if (auto header = ParseChunkHeader(in.data(), in.size()); header.ok()) {
    depth = 1;
    h += header->index + header->n_layer;
    // The payload CRC and (version 3) every layer's.
    if (VerifyChunkBytes(bytes, "").ok()) ++depth;
  }
  if (auto refs = DecodeChunkRefs(bytes, uint32_t(in.size() / kChunkRefBytes)); refs.ok()) {
    ++depth;
    for (const SnapshotChunkRef& r : *refs) h += r.file_bytes + r.name[0];
  }
  g_sink = g_sink + h;
  return depth;
}

int RunRequest(Input in) {
  Quiet();
  if (in.empty()) return 0;
  static constexpr Dialect kDialects[] = {Dialect::kChatCompletions, Dialect::kCompletions,
                                          Dialect::kResponses, Dialect::kAnthropic};
  const Dialect d = kDialects[in[0] % 4];
  const std::string_view body(reinterpret_cast<const char*>(in.data() + 1), in.size() - 1);
  Expected<ApiRequest> r = ReadApiRequest(d, body);
  if (!r.ok()) return 0;
  PromptOptions po;
  po.tools = r->tools;
  po.thinking = r->thinking;
  const std::string prompt = d == Dialect::kCompletions
                                 ? RenderCompletionPrompt(r->prompt, r->thinking)
                                 : RenderPrompt(r->messages, po);
  g_sink = g_sink + prompt.size();
  return 1 + !r->tools.empty() + !r->messages.empty();
}

int RunDsml(Input in) {
  Quiet();
  if (in.empty()) return 0;
  const uint8_t flags = in[0];
  const std::string_view text(reinterpret_cast<const char*>(in.data() + 1), in.size() - 1);
  OutputParser parser(flags & 1, flags & 2);
  const size_t chunk = 1 + (flags >> 2);  // 1..64 bytes per piece, as a stream arrives
  uint64_t h = 0;
  for (size_t at = 0; at < text.size(); at += chunk) {
    for (const ChatEvent& ev : parser.Feed(text.substr(at, chunk))) h += ev.text.size();
  }
  for (const ChatEvent& ev : parser.Finish()) h += ev.text.size();
  GenerationResult r;
  r.parsed = parser.result();
  r.text = std::string(text);
  r.tool_call_ids.resize(r.parsed.tool_calls.size(), "call_x");
  ResponseContext ctx;
  ctx.id = "x";
  h += DumpJson(ChatCompletionResponse(ctx, r)).size();
  h += DumpJson(AnthropicResponse(ctx, r)).size();
  h += DumpJson(ResponsesResponse(ctx, r)).size();
  g_sink = g_sink + h;
  return 1 + !r.parsed.tool_calls.empty() + r.parsed.tool_block_complete;
}

int RunSafetensors(Input in) {
  Quiet();
  auto f = SafetensorsFile::FromBytes(Bytes(in.begin(), in.end()));
  if (!f.ok()) return 0;
  uint64_t h = 0;
  int converted = 0;
  for (const SafetensorsTensor& t : f->tensors()) {
    if (auto v = t.ToF32(); v.ok()) {
      h += v->size();
      ++converted;
    }
  }
  g_sink = g_sink + h;
  return 1 + (converted > 0);
}

// First byte: 0 a frame read without a secret, 1 with the seeds' secret (as a keyed tier),
// 2 a RESP reply read through the bounded reader from a socket; the rest is the value.
int RunRemote(Input in) {
  Quiet();
  if (in.empty()) return 0;
  const uint8_t mode = in[0] % 3;
  const std::string_view value(reinterpret_cast<const char*>(in.data() + 1), in.size() - 1);
  if (mode == 2) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
    const int big = 1 << 21;
    ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    (void)::send(sv[0], value.data(), value.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ::shutdown(sv[0], SHUT_WR);
    redisContext* ctx = redisConnectFd(sv[1]);
    int depth = 0;
    if (ctx != nullptr && ctx->err == 0) {
      BoundRemoteReader(ctx);
      RemoteReplyLimits limits;
      limits.max_bytes = 64 << 10;
      limits.max_elements = 64;
      Expected<redisReply*> r =
          RunRemoteCommand(ctx, {"GET", "k"}, RemoteClock::now() + std::chrono::seconds(2), limits);
      if (r.ok()) {
        depth = 1 + ((*r)->type == REDIS_REPLY_ARRAY);
        g_sink = g_sink + (*r)->len + (*r)->elements;
        freeReplyObject(*r);
      }
    }
    if (ctx != nullptr) redisFree(ctx);  // closes sv[1]
    ::close(sv[0]);
    return depth;
  }
  const std::string_view secret = mode == 1 ? RemoteSeedSecret() : std::string_view();
  Expected<RemotePart> part =
      UnframeRemotePart(value, RemoteSeedModel(), 0, secret, RemoteSeedKey());
  if (!part.ok()) return 0;
  Expected<RemoteEntryRecord> rec = DecodeRemoteEntryRecord(part->payload);
  if (!rec.ok()) return 1;
  uint64_t h = rec->n_tokens;
  for (const auto& [name, bytes] : rec->objects) h += name.size() + bytes;
  g_sink = g_sink + h;
  return 2 + (mode == 1);
}

}  // namespace

const std::vector<Target>& Targets() {
  static const std::vector<Target> targets = {
      {"gguf", &RunGguf, &GgufSeeds},       {"kv", &RunSnapshot, &SnapshotSeeds},
      {"kvchunk", &RunChunk, &ChunkSeeds},  {"request", &RunRequest, &RequestSeeds},
      {"dsml", &RunDsml, &DsmlSeeds},       {"safetensors", &RunSafetensors, &SafetensorsSeeds},
      {"remote", &RunRemote, &RemoteSeeds},
  };
  return targets;
}

const Target* FindTarget(std::string_view name) {
  for (const Target& t : Targets()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace flashkv::fuzz
