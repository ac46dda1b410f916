// libFuzzer target for http::parse_request. Besides memory safety (ASan), it checks the contract
// the target's session relies on: consumed stays inside the buffer, a complete head is never
// empty, the head alone parses to the same result, and a shorter prefix never contradicts it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "http_parser.hpp"

namespace {

using namespace vlessbench;

bool same(const parse_result<http::request>& a, const parse_result<http::request>& b) {
  if (a.status != b.status || a.consumed != b.consumed || a.reason != b.reason) return false;
  const auto& x = a.value;
  const auto& y = b.value;
  if (x.method != y.method || x.target != y.target || x.version_minor != y.version_minor ||
      x.content_length != y.content_length || x.keep_alive != y.keep_alive || x.headers.size() != y.headers.size())
    return false;
  for (std::size_t i = 0; i < x.headers.size(); ++i)
    if (x.headers[i].name != y.headers[i].name || x.headers[i].value != y.headers[i].value) return false;
  return true;
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto whole = http::parse_request(input);

  check(whole.consumed <= input.size());
  check(whole.consumed <= http::max_head_bytes);
  check(whole.invalid() == !whole.reason.empty());
  if (whole.complete()) {
    check(whole.consumed > 0);
    check(input.substr(0, whole.consumed).ends_with("\r\n\r\n"));
    check(same(http::parse_request(input.substr(0, whole.consumed)), whole));
    // One byte less is never enough: the head ends exactly where consumed says.
    check(http::parse_request(input.substr(0, whole.consumed - 1)).need_more());
  } else {
    check(whole.consumed == 0);
  }

  // A prefix either still waits or already reaches the same verdict.
  const auto prefix = http::parse_request(input.substr(0, size / 2));
  check(prefix.need_more() || same(prefix, whole));
  return 0;
}
