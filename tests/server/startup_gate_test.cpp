#include "server/startup_gate.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "server/json_util.h"

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

}  // namespace
}  // namespace flashkv
