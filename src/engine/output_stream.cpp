#include "engine/output_stream.h"

#include "engine/tool_replay_map.h"
#include "tokenizer/utf8.h"

namespace flashkv {

OutputStream::OutputStream(const GenerationRequest& request)
    : tool_id_prefix_(request.tool_id_prefix),
      stops_(request.stop),
      reasoning_open_(request.output == OutputMode::kChat && request.thinking) {
  if (request.output == OutputMode::kChat) parser_.emplace(request.thinking, request.tools_active);
  if (request.output == OutputMode::kChat && request.tools_active)
    syntax_.emplace(request.thinking);
}

std::vector<GenerationEvent> OutputStream::Feed(std::string_view raw) {
  if (finished_) return {};
  // Decoder pieces never split a valid character, so substituting per piece equals
  // substituting the whole text.
  std::string clean = utf8::ReplaceInvalid(raw);
  if (syntax_) syntax_->Feed(clean);
  if (reasoning_open_) {
    think_tail_ += clean;
    if (think_tail_.find(kThinkClose) != std::string::npos) {
      reasoning_open_ = false;
      think_tail_.clear();
    } else if (think_tail_.size() >= kThinkClose.size()) {
      think_tail_.erase(0, think_tail_.size() - (kThinkClose.size() - 1));
    }
  }
  return Process(stops_.Feed(clean), /*final=*/false);
}

std::vector<GenerationEvent> OutputStream::Finish() {
  if (finished_) return {};
  std::vector<GenerationEvent> out = Process(stops_.Flush(), /*final=*/true);
  finished_ = true;
  return out;
}

std::vector<GenerationEvent> OutputStream::Process(std::string kept, bool final) {
  std::vector<GenerationEvent> out;
  text_ += kept;
  if (!parser_) {
    if (!kept.empty()) {
      GenerationEvent ev;
      ev.kind = GenerationEvent::Kind::kText;
      ev.text = std::move(kept);
      out.push_back(std::move(ev));
    }
    return out;
  }
  std::vector<ChatEvent> events = parser_->Feed(kept);
  if (final) {
    std::vector<ChatEvent> tail = parser_->Finish();
    events.insert(events.end(), std::make_move_iterator(tail.begin()),
                  std::make_move_iterator(tail.end()));
  }
  for (ChatEvent& ce : events) {
    if (ce.kind == ChatEvent::Kind::kDone) continue;
    GenerationEvent ev;
    ev.kind = GenerationEvent::Kind::kChat;
    if (ce.kind == ChatEvent::Kind::kToolCallBegin) {
      // The calls of an abandoned block are forgotten, so indices restart at its first.
      call_ids_.resize(size_t(std::max(0, ce.call_index)));
      call_ids_.push_back(NewRandomId(tool_id_prefix_));
      ev.tool_call_id = call_ids_.back();
    }
    ev.chat = std::move(ce);
    out.push_back(std::move(ev));
  }
  return out;
}

void OutputStream::Complete(FinishReason finish, GenerationResult* r) const {
  r->text = text_;
  r->stop_sequence = stops_.matched();
  if (parser_) {
    r->parsed = parser_->result();
    r->tool_call_ids = call_ids_;
    r->tool_call_ids.resize(r->parsed.tool_calls.size());
    for (std::string& id : r->tool_call_ids) {
      if (id.empty()) id = NewRandomId(tool_id_prefix_);
    }
    if (r->parsed.unterminated_tool_block && finish != FinishReason::kCancelled) {
      finish = FinishReason::kError;
      r->error = "unterminated tool call";
    }
    // A block that closed although tools were not offered still reads as calls.
    if (!r->parsed.tool_calls.empty() && finish == FinishReason::kStop &&
        r->stop_sequence.empty()) {
      finish = FinishReason::kToolCalls;
    }
  }
  r->finish = finish;
}

}  // namespace flashkv
