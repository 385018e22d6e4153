// What text a chat reply makes visible: the prompt prefix a client's next request starts
// with once it appends the reply to its history (docs/SERVER.md §2.2, the visible-key
// snapshots). Must not: know tokens, sessions or the cache (the engine pairs these texts
// with the KV they resume).
#pragma once

#include <string>
#include <vector>

#include "chat/chat_message.h"
#include "chat/prompt_renderer.h"

namespace flashkv {

// The rendered texts a client's next prompt may start with after `reply` (an assistant
// message: content, reasoning, tool calls, raw DSML) follows `history`: everything before
// the next user turn's marker. Clients either resend the reasoning or drop it, so both
// renderings are answered, the one this client most likely resends first
// (`replays_reasoning`), without duplicates (they agree when the template drops old
// reasoning anyway). Empty when `history` is empty.
std::vector<std::string> VisibleTextsAfterReply(const std::vector<ChatMessage>& history,
                                                const ChatMessage& reply,
                                                const PromptOptions& options,
                                                bool replays_reasoning);

}  // namespace flashkv
