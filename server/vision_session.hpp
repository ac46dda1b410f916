#pragma once
// The session's side of XTLS Vision (docs/sessions.md "Vision"): a request that names flow
// xtls-rprx-vision turns its transport's Vision on (server/transport/vision_stream.hpp) once
// admitted, or is refused where the transport has none (Vision runs on raw TLS only); its log
// line gets the flow and the Vision facts. The relay above stays as it is: it reads and writes
// the unpadded stream and counts its payload.
#include <optional>
#include <string>
#include <type_traits>

#include "core/log/access_events.hpp"
#include "core/wire/vision.hpp"
#include "core/wire/vless_codec.hpp"

namespace vlessbench::vless_server::detail {

// False: refused (the session's reject reason is set). pending: the bytes after the header,
// unpadded in place.
template <class Session>
bool start_flow(Session& s, std::size_t& pending) {
  if (s.request().flow.empty()) return true;
  if constexpr (std::remove_cvref_t<decltype(s.client)>::can.vision) {
    const auto error = s.client.start_vision(s.request().uuid, s.payload(), pending, vless::response_header.size());
    if (error) {
      s.reject(*error, "in the padding that came with the request header");
      return false;
    }
    return true;
  } else {
    s.reject("flow_unsupported", std::string(s.request().flow) + " runs on raw TLS only, not over " +
                                     std::string(s.client.facts().transport));
    return false;
  }
}

template <class Transport>
std::optional<vision_facts> vision_of(Transport& t) {
  if constexpr (Transport::can.vision) {
    if (t.vision()) return t.vision_facts_now();
  }
  return std::nullopt;
}

}  // namespace vlessbench::vless_server::detail
