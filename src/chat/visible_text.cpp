#include "chat/visible_text.h"

#include <algorithm>

namespace flashkv {

std::vector<std::string> VisibleTextsAfterReply(const std::vector<ChatMessage>& history,
                                                const ChatMessage& reply,
                                                const PromptOptions& options,
                                                bool replays_reasoning) {
  std::vector<std::string> texts;
  if (history.empty()) return texts;
  // A user turn after the reply makes the template render the reply as history (old
  // reasoning dropped without tools); everything before that turn's marker is what the
  // next prompt starts with, whatever the user then writes.
  for (int pass = 0; pass < 2; ++pass) {
    const bool with_reasoning = (pass == 0) == replays_reasoning;
    std::vector<ChatMessage> next = history;
    next.push_back(reply);
    if (!with_reasoning) next.back().reasoning.clear();
    next.push_back(ChatMessage{ChatRole::kUser, "x", {}, {}, {}, {}});
    std::string text = RenderPrompt(next, options);
    const size_t cut = text.rfind(kUserMarker);
    if (cut == std::string::npos) continue;
    text.resize(cut);
    if (std::find(texts.begin(), texts.end(), text) == texts.end())
      texts.push_back(std::move(text));
  }
  return texts;
}

}  // namespace flashkv
