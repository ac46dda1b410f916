#pragma once
// Text made safe for HTML and SVG (XML): element content and quoted attribute values. Used by the
// HTTP target's index page and the runner's report.svg.
#include <string>
#include <string_view>

namespace vlessbench {

// & < > " ' escaped as &amp; &lt; &gt; &quot; &#39;; every other byte as it is.
std::string html_escape(std::string_view text);

}  // namespace vlessbench
