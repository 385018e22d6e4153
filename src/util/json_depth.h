// How deeply JSON text nests, measured without parsing it: the bound every parser of
// client or model JSON checks first, because parsing is iterative but everything done
// with the parsed value afterwards (dump, copy, compare) recurses once per level.
// Must not: parse or validate JSON (text that is not JSON gets a depth too).
#pragma once

#include <string_view>

namespace flashkv {

// Deepest nesting of arrays/objects any request, tool argument or generated parameter may
// have (ds4 uses the same bound for request bodies).
inline constexpr int kMaxJsonDepth = 256;

// True when no '[' / '{' outside string literals opens more than `limit` levels. A linear
// scan with constant memory, so it is safe on any input; unbalanced or invalid text is
// measured as written (e.g. 300 '[' with no ']' is 300 deep).
bool JsonDepthWithin(std::string_view text, int limit = kMaxJsonDepth);

}  // namespace flashkv
