#pragma once
// Percent-encoding (RFC 3986), the one codec the share link and the admin listener's query share.
// '+' is no space in either direction: the share-link proposal mandates encodeURIComponent, which
// writes a space as %20, and a token may contain '+'.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace vlessbench {

// nullopt: a '%' not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view s);
// The same, keeping a '%' not followed by two hex digits as it is (a query value typed by hand:
// the admin token).
std::string percent_decode_lenient(std::string_view s);
// Escapes all but RFC 3986 unreserved characters.
std::string percent_encode(std::string_view s);

// A query (k=v&k=v, empty pairs skipped, a key without '=' has an empty value), values
// percent-decoded, into out. False with reason on bad percent-encoding or a repeated key (the
// share-link proposal forbids them: a link that says two things is refused, not guessed at).
bool parse_query(std::string_view query, std::map<std::string, std::string, std::less<>>& out, std::string& reason);

}  // namespace vlessbench
