#include "server/sing_mux_h2.hpp"

#include <utility>

namespace vlessbench::vless_server {

grpc::h2_limits sing_mux_h2::limits(std::uint32_t max_streams) {
  grpc::h2_limits l;
  l.max_streams = max_streams;
  return l;
}

sing_mux_h2::sing_mux_h2(std::uint32_t max_streams) : h2_("", limits(max_streams), grpc::h2_streams::connect) {}

grpc::h2_stream* sing_mux_h2::find(std::uint32_t stream) {
  const auto it = streams_.find(stream);
  return it == streams_.end() ? nullptr : it->second.s.get();
}

std::string_view sing_mux_h2::feed(std::string_view in, std::vector<event>& events) {
  const bool ok = in.empty() || h2_.feed(in.data(), in.size());
  for (auto& r : h2_.take_rejected())
    rejected_.push_back({static_cast<std::uint32_t>(r.id), "h2mux_not_connect", std::move(r.detail)});
  for (auto& s : h2_.take_opened()) {
    const auto id = static_cast<std::uint32_t>(s->id);
    events.push_back({event::kind_t::opened, id, {}});
    streams_[id] = {std::move(s), false};
  }
  for (const std::int32_t raw : h2_.take_touched()) {
    const auto id = static_cast<std::uint32_t>(raw);
    const auto it = streams_.find(id);
    if (it == streams_.end()) continue;
    grpc::h2_stream& s = *it->second.s;
    if (!s.in.empty()) events.push_back({event::kind_t::data, id, std::exchange(s.in, {})});
    if (!it->second.ended) {
      // Closed without the client's END_STREAM, or reset after it: the client gave the stream up.
      const bool reset = s.closed && (!s.peer_ended || s.reset_code != 0);
      if (reset || s.peer_ended) {
        events.push_back({reset ? event::kind_t::reset : event::kind_t::ended, id, {}});
        it->second.ended = true;
      }
    }
    if (s.closed) streams_.erase(it);
  }
  if (!ok) return h2_.failure();
  return {};
}

void sing_mux_h2::send(std::uint32_t stream, std::string_view data) {
  if (auto* s = find(stream)) h2_.send(*s, data.data(), data.size());
}

void sing_mux_h2::finish(std::uint32_t stream) {
  if (auto* s = find(stream)) h2_.finish(*s, 0, "");
}

void sing_mux_h2::consumed(std::uint32_t stream, std::size_t n) {
  if (auto* s = find(stream)) h2_.credit(*s, n);
}

std::string_view sing_mux_h2::drain(std::string& to_client) {
  for (auto out = h2_.next_output(); !out.empty(); out = h2_.next_output()) to_client.append(out);
  // Over by a violation (our GOAWAY went out, nghttp2 wants neither to read nor to write); a client's own
  // orderly GOAWAY is followed by its close, which ends the session as any close does.
  if (h2_.done() && !h2_.failure().empty()) return h2_.failure();
  return {};
}

std::vector<sing_mux::h2_framing::rejection> sing_mux_h2::take_rejected() { return std::exchange(rejected_, {}); }

}  // namespace vlessbench::vless_server
