#include "server/startup_gate.h"

#include <chrono>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "engine/scheduler.h"
#include "gguf/gguf_file.h"
#include "server/json_util.h"
#include "tokenizer/tokenizer.h"

namespace flashkv {
namespace {

TEST(StartupGateTest, HealthAnswers503LoadingWithPhaseAndProgress) {
  StartupGate gate;
  gate.SetProgress("loading weights", 0.4567);
  const HttpResponse r = gate.LoadingResponse("/health");
  EXPECT_EQ(r.status, 503);
  Json body = Json::parse(r.body);
  EXPECT_EQ(body["status"], "loading");
  EXPECT_EQ(body["phase"], "loading weights");
  EXPECT_DOUBLE_EQ(body["progress"].get<double>(), 0.457);
  EXPECT_GE(body["elapsed_s"].get<double>(), 0.0);
  bool retry_after = false;
  for (const auto& [name, value] : r.headers) retry_after |= name == "Retry-After";
  EXPECT_TRUE(retry_after);
  EXPECT_FALSE(gate.open());
}

TEST(StartupGateTest, ProgressIsClampedAndNeverGoesBackwards) {
  StartupGate gate;
  gate.SetProgress("a", 0.5);
  gate.SetProgress("b", 0.25);  // a later phase may start lower; the bar does not
  EXPECT_DOUBLE_EQ(Json::parse(gate.LoadingResponse("/health").body)["progress"].get<double>(),
                   0.5);
  gate.SetProgress("c", 7.0);
  EXPECT_DOUBLE_EQ(Json::parse(gate.LoadingResponse("/health").body)["progress"].get<double>(),
                   1.0);
  EXPECT_EQ(Json::parse(gate.LoadingResponse("/health").body)["phase"], "c");
}

TEST(StartupGateTest, ApiRoutesAnswer503InTheirOwnErrorShapeWhileLoading) {
  StartupGate gate;
  gate.SetProgress("loading weights", 0.25);
  const HttpResponse openai = gate.LoadingResponse("/v1/chat/completions");
  EXPECT_EQ(openai.status, 503);
  Json o = Json::parse(openai.body);
  ASSERT_TRUE(o.contains("error"));
  EXPECT_NE(o["error"]["message"].get<std::string>().find("still loading (loading weights, 25%)"),
            std::string::npos)
      << openai.body;
  const HttpResponse anthropic = gate.LoadingResponse("/v1/messages");
  EXPECT_EQ(anthropic.status, 503);
  EXPECT_EQ(Json::parse(anthropic.body)["type"], "error") << anthropic.body;
}

TEST(StartupGateTest, EveryApiRouteIsListedOnce) {
  // The gate registers ApiServer::Routes() before the model loads; a route missing from the
  // list would 404 for good.
  std::set<std::string> seen;
  for (const ApiRoute& r : ApiServer::Routes()) EXPECT_TRUE(seen.insert(r.path).second) << r.path;
  for (const char* path :
       {"/health", "/metrics", "/v1/models", "/v1/models/{param}", "/v1/chat/completions",
        "/v1/completions", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens"}) {
    EXPECT_TRUE(seen.count(path)) << path;
  }
}

// Admits nothing: the gate's routes are answered before any request reaches an engine.
class NoRunner : public RequestRunner {
 public:
  bool CanAdmit() const override { return false; }
  void Admit(RequestHandle&) override {}
  void Step() override {}
  bool idle() const override { return true; }
};

// What `flashkv serve` does (cli/cmd_serve.cpp): the gate's routes on a bound HttpServer
// before the model loads, then Open with the ApiServer. Over a real socket /health is a 503
// "loading" with its progress until then, and the ApiServer's 200 from then on.
TEST(StartupGateTest, OverHttpHealthIs503LoadingThen200OnceOpen) {
  StartupGate gate;
  HttpServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.threads = 2;
  o.error_body = ApiServer::TransportErrorBody;
  HttpServer http(o);
  gate.Register(http);
  ASSERT_TRUE(http.Bind().ok());
  std::thread serving([&http] { (void)http.Serve(); });
  httplib::Client client("127.0.0.1", http.port());
  gate.SetProgress("loading weights", 0.5);

  auto loading = client.Get("/health");
  for (int i = 0; i < 200 && !loading; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    loading = client.Get("/health");
  }
  ASSERT_TRUE(loading);
  EXPECT_EQ(loading->status, 503);
  EXPECT_EQ(loading->get_header_value("Retry-After"), "1");
  const Json body = Json::parse(loading->body);
  EXPECT_EQ(body["status"], "loading") << loading->body;
  EXPECT_EQ(body["phase"], "loading weights");
  EXPECT_DOUBLE_EQ(body["progress"].get<double>(), 0.5);
  auto chat =
      client.Post("/v1/chat/completions", R"({"messages":[{"content":"hi"}]})", "application/json");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 503);
  EXPECT_TRUE(Json::parse(chat->body).contains("error")) << chat->body;

  auto gguf = GgufFile::Open(std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  auto tokenizer = Tokenizer::FromGguf(*gguf);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  NoRunner runner;
  EngineMetrics metrics;
  Scheduler scheduler(runner, metrics);
  ToolReplayMap replay;
  ApiServerOptions ao;
  ao.model_id = "tiny";
  ApiServer api(scheduler, *tokenizer, replay, metrics, ao);
  gate.Open(api);
  auto ready = client.Get("/health");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  const Json ok = Json::parse(ready->body);
  EXPECT_EQ(ok["status"], "ok") << ready->body;
  EXPECT_EQ(ok["model"], "tiny");
  EXPECT_TRUE(gate.open());

  http.Stop();
  serving.join();
}

}  // namespace
}  // namespace flashkv
