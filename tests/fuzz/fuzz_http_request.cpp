// libFuzzer target for http::parse_request: the head contract the target's sessions rely on
// (http_head_invariants.hpp), plus the request fields.
#include <cstddef>
#include <cstdint>

#include "http_head_invariants.hpp"

using namespace vlessbench;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::check_head_parser(
      std::string_view(reinterpret_cast<const char*>(data), size),
      [](std::string_view s) { return http::parse_request(s); },
      [](const parse_result<http::request>& a, const parse_result<http::request>& b) {
        const auto& x = a.value;
        const auto& y = b.value;
        return fuzz::same_common(a, b) && x.method == y.method && x.target == y.target &&
               x.version_minor == y.version_minor && x.content_length == y.content_length &&
               x.keep_alive == y.keep_alive;
      });
  return 0;
}
