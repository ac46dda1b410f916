// libFuzzer target for http::parse_response: the head contract the runner relies on
// (http_head_invariants.hpp), plus the response fields.
#include <cstddef>
#include <cstdint>

#include "http_head_invariants.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::check_head_parser(
      std::string_view(reinterpret_cast<const char*>(data), size),
      [](std::string_view s) { return http::parse_response(s); },
      [](const parse_result<http::response>& a, const parse_result<http::response>& b) {
        const auto& x = a.value;
        const auto& y = b.value;
        return fuzz::same_common(a, b) && x.status == y.status && x.reason == y.reason &&
               x.version_minor == y.version_minor && x.content_length == y.content_length && x.chunked == y.chunked &&
               x.keep_alive == y.keep_alive;
      });
  return 0;
}
