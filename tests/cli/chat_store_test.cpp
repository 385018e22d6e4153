#include "cli/chat_store.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace flashkv::cli {
namespace {

TEST(ChatStoreTest, SavesAndLoadsAConversationByName) {
  testing::ScopedWorkDir dir("flashkv_chat_store");
  ChatStore store("chats");
  SavedChat chat;
  chat.system = "be brief";
  chat.think = true;
  ChatMessage user;
  user.role = ChatRole::kUser;
  user.content = "hi\nthere";
  ChatMessage reply;
  reply.role = ChatRole::kAssistant;
  reply.content = "hello";
  chat.messages = {user, reply};
  ASSERT_TRUE(store.Save("my-chat_1.v2", chat).ok());
  Expected<SavedChat> back = store.Load("my-chat_1.v2");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->system, "be brief");
  EXPECT_TRUE(back->think);
  ASSERT_EQ(back->messages.size(), 2u);
  EXPECT_EQ(back->messages[0].content, "hi\nthere");
  EXPECT_EQ(back->messages[1].role, ChatRole::kAssistant);
  Expected<std::vector<std::string>> names = store.List();
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"my-chat_1.v2"});
  EXPECT_EQ(store.Load("other").status().code(), StatusCode::kNotFound);
}

TEST(ChatStoreTest, NamesNeverBecomePaths) {
  testing::ScopedWorkDir dir("flashkv_chat_store_names");
  ChatStore store("chats");
  for (const char* bad :
       {"", "../x", "a/b", ".hidden", "a b", "x\\y", "..",
        "0123456789012345678901234567890123456789012345678901234567890123456789"}) {
    EXPECT_FALSE(store.Save(bad, SavedChat{}).ok()) << bad;
    EXPECT_EQ(store.Load(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(std::filesystem::exists("x"));
  EXPECT_FALSE(std::filesystem::exists("chats/a"));
}

}  // namespace
}  // namespace flashkv::cli
