// XML text and attribute escaping, shared by the SVG writer (util/svg_plot) and DSML tool-call
// attributes (chat/dsml): both need exactly & < > " as entities.
// Must not: decode entities or know either format's grammar.
#pragma once

#include <string>
#include <string_view>

namespace flashkv {

// & < > " → &amp; &lt; &gt; &quot;; every other byte (UTF-8 included) as written.
std::string EscapeXml(std::string_view text);

}  // namespace flashkv
