#pragma once
// `vlessbench compare`: several runs' summary.json side by side (e.g. a default-ACK batch next
// to a QUICKACK batch). Pure: labelled JSON texts in, a table out.
#include <string>
#include <utility>
#include <vector>

namespace vlessbench::runner {

// runs: (label, summary.json text). Throws std::runtime_error naming the label on bad input.
std::string format_comparison(const std::vector<std::pair<std::string, std::string>>& runs);

}  // namespace vlessbench::runner
