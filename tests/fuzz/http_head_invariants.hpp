#pragma once
// The contract both HTTP head fuzz targets check, beyond memory safety (ASan): consumed stays
// inside the buffer, a complete head is never empty and ends in CRLFCRLF, the head alone parses to
// the same result, one byte less is never enough, and a shorter prefix never contradicts it.
#include <string_view>

#include "core/wire/http_parser.hpp"

namespace vlessbench::fuzz {

inline void check(bool ok) {
  if (!ok) __builtin_trap();
}

// parse: std::string_view -> parse_result<T>; same: compares two results field by field.
template <class Parse, class Same>
void check_head_parser(std::string_view input, Parse parse, Same same) {
  const auto whole = parse(input);
  check(whole.consumed <= input.size());
  check(whole.consumed <= http::max_head_bytes);
  check(whole.invalid() == !whole.reason.empty());
  if (whole.complete()) {
    check(whole.consumed > 0);
    check(input.substr(0, whole.consumed).ends_with("\r\n\r\n"));
    check(same(parse(input.substr(0, whole.consumed)), whole));
    check(parse(input.substr(0, whole.consumed - 1)).need_more());
  } else {
    check(whole.consumed == 0);
  }
  const auto prefix = parse(input.substr(0, input.size() / 2));
  check(prefix.need_more() || same(prefix, whole));
}

// Status, consumed, reason and the headers of two results (the message-specific fields are the
// caller's).
template <class T>
bool same_common(const parse_result<T>& a, const parse_result<T>& b) {
  if (a.status != b.status || a.consumed != b.consumed || a.reason != b.reason) return false;
  const auto& x = a.value.headers;
  const auto& y = b.value.headers;
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (x[i].name != y[i].name || x[i].value != y[i].value) return false;
  return true;
}

}  // namespace vlessbench::fuzz
