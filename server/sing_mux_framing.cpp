#include "server/sing_mux_framing.hpp"

#include <algorithm>

#include "core/wire/mux_frame.hpp"
#include "core/wire/smux_frame.hpp"
#include "core/wire/yamux_frame.hpp"

namespace vlessbench::sing_mux {

namespace {

constexpr std::size_t smux_chunk = 32 * 1024;  // smux's own MaxFrameSize
constexpr std::size_t max_ended = 4096;        // streams ended by the engine, awaiting the client's close
constexpr std::size_t logged_refusals = 16;

}  // namespace

framing::framing(std::size_t max_streams, std::uint32_t seed, std::function<std::unique_ptr<h2_framing>()> h2)
    : max_streams_(max_streams), rng_(seed), make_h2_(std::move(h2)) {}

std::string_view framing::up(std::string_view in, sub_events& to_engine, std::string& to_client) {
  if (!error_.empty()) return error_;
  if (req_ && req_->padding)
    unpad_.feed(in, in_);
  else
    in_.append(in);
  if (!req_) {
    const auto p = parse_request(in_);
    if (p.invalid()) return error_ = p.reason;
    if (!p.complete()) return {};
    req_ = p.value;
    if (req_->proto == protocol::h2mux) {
      if (make_h2_) h2_ = make_h2_();
      if (!h2_) return error_ = "h2mux_unsupported";
    }
    std::string rest = in_.substr(p.consumed);
    in_.clear();
    if (req_->padding)
      unpad_.feed(rest, in_);
    else
      in_ = std::move(rest);
  }
  return frames_up(to_engine, to_client);
}

std::string_view framing::frames_up(sub_events& to_engine, std::string& to_client) {
  if (is_h2()) {
    if (const std::string_view e = h2_frames(to_engine, to_client); !e.empty() && error_.empty()) {
      error_text_ = e;
      error_ = error_text_;
    }
    return error_;
  }
  std::size_t at = 0;
  while (error_.empty() && at < in_.size()) {
    const std::size_t before = at;
    const std::string_view e =
        is_yamux() ? yamux_frame(to_engine, to_client, at) : smux_frame(to_engine, to_client, at);
    if (!e.empty()) error_ = e;
    if (at == before) break;  // need more
  }
  in_.erase(0, at);
  return error_;
}

std::string_view framing::smux_frame(sub_events& to_engine, std::string& to_client, std::size_t& at) {
  const auto p = smux::parse_frame(std::string_view(in_).substr(at));
  if (p.invalid()) return p.reason;
  if (!p.complete()) return {};
  at += p.consumed;
  const smux::frame& f = p.value;
  if (smux_version_ == 0) smux_version_ = f.version;
  if (f.version != smux_version_) return "smux_version_changed";
  const auto it = streams_.find(f.sid);
  stream* s = it == streams_.end() ? nullptr : &it->second;
  switch (f.c) {
    case smux::cmd::syn:
      if (s == nullptr) open(f.sid, to_client);  // a repeated SYN: smux ignores it too
      break;
    case smux::cmd::psh:
      if (s == nullptr) break;
      if (f.version == 2) {  // our UPDs grant it smux::initial_window
        if (f.data.size() > s->recv_window) return "window_exceeded";
        s->recv_window -= f.data.size();
      }
      data_up(*s, f.data, to_engine, to_client);
      break;
    case smux::cmd::fin:
      if (s != nullptr) fin_up(*s, false, to_engine, to_client);
      break;
    case smux::cmd::upd:
      if (s != nullptr) {
        s->peer_consumed = f.consumed;
        s->peer_window = f.window;
        flush(*s, to_client);
      }
      break;
    case smux::cmd::nop: break;
  }
  return {};
}

std::string_view framing::yamux_frame(sub_events& to_engine, std::string& to_client, std::size_t& at) {
  const auto p = yamux::parse_frame(std::string_view(in_).substr(at));
  if (p.invalid()) return p.reason;
  if (!p.complete()) return {};
  at += p.consumed;
  const yamux::frame& f = p.value;
  if (f.t == yamux::type::ping) {
    if ((f.flags & yamux::flag_syn) != 0)
      yamux::encode_frame(to_client, yamux::type::ping, yamux::flag_ack, 0, f.length);
    return {};
  }
  if (f.t == yamux::type::go_away) return {};  // the client closes the connection next
  auto it = streams_.find(f.stream);
  stream* s = it == streams_.end() ? nullptr : &it->second;
  if ((f.flags & yamux::flag_syn) != 0) {
    if (s != nullptr) return "duplicate_stream";
    s = open(f.stream, to_client);
  }
  if (s == nullptr) return {};  // a stream that is gone: what crossed its close
  if (f.t == yamux::type::window_update) {
    s->send_window += f.length;
    flush(*s, to_client);
  } else if (!f.data.empty()) {
    if (f.data.size() > s->recv_window) return "window_exceeded";
    s->recv_window -= f.data.size();
    data_up(*s, f.data, to_engine, to_client);
  }
  if ((f.flags & (yamux::flag_fin | yamux::flag_rst)) != 0)
    if (auto again = streams_.find(f.stream); again != streams_.end())
      fin_up(again->second, (f.flags & yamux::flag_rst) != 0, to_engine, to_client);
  return {};
}

std::string_view framing::h2_frames(sub_events& to_engine, std::string& to_client) {
  h2_events_.clear();
  std::string_view e = h2_->feed(in_, h2_events_);
  in_.clear();
  for (auto& ev : h2_events_) {
    const auto it = streams_.find(ev.stream);
    stream* s = it == streams_.end() ? nullptr : &it->second;
    switch (ev.kind) {
      case h2_framing::event::kind_t::opened:
        if (s == nullptr) open(ev.stream, to_client);  // nghttp2 opens a stream id once
        break;
      case h2_framing::event::kind_t::data:
        if (s == nullptr || s->reset || s->engine_end || s->client_fin)
          h2_->consumed(ev.stream, ev.data.size());  // nothing reads it: its window comes back now
        else
          data_up(*s, ev.data, to_engine, to_client);
        break;
      case h2_framing::event::kind_t::ended:
      case h2_framing::event::kind_t::reset:
        if (s != nullptr) fin_up(*s, ev.kind == h2_framing::event::kind_t::reset, to_engine, to_client);
        break;
    }
  }
  for (auto& r : h2_->take_rejected()) {
    ++refused_;
    if (refusals_.size() < logged_refusals && refused_ <= logged_refusals)
      refusals_.push_back({r.stream, r.reason, {}, std::move(r.detail)});
  }
  if (const std::string_view over = h2_->drain(to_client); e.empty()) e = over;
  return e;
}

framing::stream* framing::open(std::uint32_t sid, std::string& to_client) {
  stream& s = streams_[sid];
  s.sid = sid;
  s.send_window = yamux::initial_window;
  s.recv_window = yamux::initial_window;
  s.peer_window = smux::initial_window;
  if (!is_yamux()) s.recv_window = smux::initial_window;
  ++live_;
  if (is_yamux()) yamux::encode_frame(to_client, yamux::type::window_update, yamux::flag_ack, sid, 0);
  if (live_ > max_streams_) {  // h2mux: nghttp2 refuses past SETTINGS_MAX_CONCURRENT_STREAMS first
    sub_events none;
    refuse(s, "too_many_streams", none, to_client);
    return nullptr;
  }
  return &s;
}

void framing::data_up(stream& s, std::string_view data, sub_events& to_engine, std::string& to_client) {
  if (data.empty()) return;
  if (!reading(s)) return credit(s, data.size(), to_client);  // nobody reads them: no credit waits
  data_into(s, data, to_engine, to_client);
  // Credited back once the engine has taken the events these bytes became (consumed()); at once when no
  // event waits (a refusal took them, or a request still cut short).
  if (to_engine.empty()) return credit(s, data.size(), to_client);
  sub_event& last = to_engine.back();
  if (last.kind == sub_event::kind_t::credit && last.stream == s.sid) {
    last.bytes += data.size();
    return;
  }
  sub_event c;
  c.kind = sub_event::kind_t::credit;
  c.stream = s.sid;
  c.bytes = data.size();
  to_engine.push_back(std::move(c));
}

void framing::consumed(std::uint32_t stream, std::size_t bytes, std::string& to_client) {
  if (const auto it = streams_.find(stream); it != streams_.end())
    credit(it->second, bytes, to_client);
  else if (h2_)
    h2_->consumed(stream, bytes);  // forgotten here, its window still counts at the connection
  if (h2_) h2_->drain(to_client);
}

void framing::data_into(stream& s, std::string_view data, sub_events& to_engine, std::string& to_client) {
  if (!reading(s)) return;
  if (!s.requested) {
    s.pending.append(data);
    const auto p = parse_stream_request(s.pending);
    if (p.invalid()) return refuse(s, p.reason, to_engine, to_client);
    if (!p.complete()) return;
    s.requested = true;
    s.req = p.value;
    s.pending.erase(0, p.consumed);
    const bool addressed = s.req.dest.net == network::udp && s.req.packet_addr;
    if (!addressed && s.req.dest.port == 0) return refuse(s, "port_zero", to_engine, to_client);
    if (s.req.dest.net == network::tcp) {
      std::string first = std::move(s.pending);
      s.pending.clear();
      return open_to_engine(s, s.req.dest, first, to_engine);
    }
    if (!addressed) open_to_engine(s, s.req.dest, {}, to_engine);
    return udp_up(s, to_engine, to_client);
  }
  if (s.req.dest.net == network::udp) {
    s.pending.append(data);
    return udp_up(s, to_engine, to_client);
  }
  data_to_engine(s, data, nullptr, to_engine);
}

void framing::udp_up(stream& s, sub_events& to_engine, std::string& to_client) {
  std::size_t at = 0;
  for (;;) {
    const auto p = parse_udp_packet(std::string_view(s.pending).substr(at), s.req.packet_addr);
    if (p.invalid()) return refuse(s, p.reason, to_engine, to_client);
    if (!p.complete()) break;
    at += p.consumed;
    const destination* dest = p.value.dest ? &*p.value.dest : nullptr;
    if (dest != nullptr && dest->port == 0) return refuse(s, "port_zero", to_engine, to_client);
    if (!s.opened) {
      s.first_dest = *dest;
      open_to_engine(s, *dest, p.value.data, to_engine);
    } else {
      data_to_engine(s, p.value.data, dest, to_engine);
    }
  }
  s.pending.erase(0, at);
}

void framing::open_to_engine(stream& s, const destination& t, std::string_view data, sub_events& to_engine) {
  s.mux_id = free_mux_id();
  by_mux_[s.mux_id] = s.sid;
  s.opened = true;
  sub_event e;
  e.kind = sub_event::kind_t::open;
  e.id = s.mux_id;
  e.dest = t;
  e.has_data = !data.empty();
  e.data = data;
  to_engine.push_back(std::move(e));
}

void framing::data_to_engine(const stream& s, std::string_view data, const destination* dest, sub_events& to_engine) {
  sub_event e;
  e.kind = sub_event::kind_t::data;
  e.id = s.mux_id;
  e.data = data;
  if (dest != nullptr) e.dest = *dest;
  to_engine.push_back(std::move(e));
}

void framing::end_to_engine(const stream& s, sub_events& to_engine) {
  if (!s.opened || s.mux_id == 0 || s.engine_end) return;
  sub_event e;
  e.kind = sub_event::kind_t::end;
  e.id = s.mux_id;
  to_engine.push_back(std::move(e));
}

void framing::fin_up(stream& s, bool rst, sub_events& to_engine, std::string& to_client) {
  if (s.client_fin || s.reset) return;
  s.client_fin = true;
  s.reset = rst;
  if (s.engine_end) return forget(s.sid);
  if (!s.opened) {  // no sub yet: nothing to end but the stream
    if (!rst) send_close(s, to_client);
    s.engine_end = true;
    --live_;
    return forget(s.sid);
  }
  end_to_engine(s, to_engine);
}

void framing::refuse(stream& s, std::string_view reason, sub_events& to_engine, std::string& to_client) {
  ++refused_;
  if (refusals_.size() < logged_refusals && refused_ <= logged_refusals)
    refusals_.push_back({s.sid, reason, s.requested ? format_destination(s.req.dest) : std::string()});
  end_to_engine(s, to_engine);
  if (!s.responded) {
    std::string status;
    encode_stream_error(status, reason);
    s.responded = true;
    send_data(s, status, to_client);
  }
  send_close(s, to_client);
  if (s.mux_id != 0) by_mux_.erase(s.mux_id);
  s.mux_id = 0;
  s.engine_end = true;
  --live_;
  s.pending.clear();
  if (s.client_fin) return forget(s.sid);
  ended(s.sid);
}

void framing::send(std::uint16_t id, std::string_view data, const destination* from, std::string& to_client) {
  const auto m = by_mux_.find(id);
  if (m == by_mux_.end()) return;
  stream& s = streams_.at(m->second);
  if (s.reset) return;
  std::string out;
  if (!s.responded) out.push_back(static_cast<char>(status_success));
  s.responded = true;
  if (s.req.dest.net == network::udp) {
    const destination* dest = nullptr;
    if (s.req.packet_addr) dest = from != nullptr ? from : (s.first_dest ? &*s.first_dest : &s.req.dest);
    encode_udp_packet(out, dest, data);
  } else {
    out.append(data);
  }
  send_data(s, out, to_client);
  if (h2_) h2_->drain(to_client);
}

void framing::closed(std::uint16_t id, bool error, std::string& to_client) {
  const auto m = by_mux_.find(id);
  if (m == by_mux_.end()) return;
  stream& s = streams_.at(m->second);
  by_mux_.erase(s.mux_id);
  s.mux_id = 0;
  if (!s.responded && !s.reset) {
    std::string status;
    if (error)
      encode_stream_error(status, "refused by vlessbenchd (its access log has the reason)");
    else
      status.push_back(static_cast<char>(status_success));
    s.responded = true;
    send_data(s, status, to_client);
  }
  if (!s.reset) send_close(s, to_client);
  s.engine_end = true;
  --live_;
  if (s.client_fin || s.reset)
    forget(s.sid);
  else
    ended(s.sid);
  if (h2_) h2_->drain(to_client);
}

void framing::send_data(stream& s, std::string_view data, std::string& to_client) {
  if (s.closed_out) return;
  if (is_h2()) return h2_->send(s.sid, data);  // the HTTP/2 windows hold what they must
  if (!s.held.empty() || s.fin_held) {
    s.held.append(data);
    held_ += data.size();
    return;
  }
  std::size_t allowed = data.size();
  if (is_yamux()) {
    allowed = std::min<std::uint64_t>(allowed, s.send_window);
  } else if (smux_version_ == 2) {
    const std::uint64_t inflight = s.sent - std::min(s.sent, s.peer_consumed);
    allowed = std::min<std::uint64_t>(allowed, s.peer_window > inflight ? s.peer_window - inflight : 0);
  }
  for (std::size_t off = 0; off < allowed;) {
    const std::size_t n = std::min(allowed - off, is_yamux() ? yamux::initial_window : smux_chunk);
    if (is_yamux()) {
      yamux::encode_frame(to_client, yamux::type::data, 0, s.sid, static_cast<std::uint32_t>(n), data.substr(off, n));
      s.send_window -= n;
    } else {
      smux::encode_frame(to_client, smux_version_ == 0 ? 1 : smux_version_, smux::cmd::psh, s.sid, data.substr(off, n));
      s.sent += n;
    }
    off += n;
  }
  if (allowed < data.size()) {
    s.held.append(data.substr(allowed));
    held_ += data.size() - allowed;
  }
}

void framing::send_close(stream& s, std::string& to_client) {
  if (s.closed_out) return;
  if (!s.held.empty()) {
    s.fin_held = true;
    return;
  }
  s.closed_out = true;
  if (is_h2())
    h2_->finish(s.sid);
  else if (is_yamux())
    yamux::encode_frame(to_client, yamux::type::window_update, yamux::flag_fin, s.sid, 0);
  else
    smux::encode_frame(to_client, smux_version_ == 0 ? 1 : smux_version_, smux::cmd::fin, s.sid);
}

void framing::flush(stream& s, std::string& to_client) {
  if (s.held.empty()) return;
  std::string held = std::move(s.held);
  s.held.clear();
  held_ -= held.size();
  const bool fin = s.fin_held;
  s.fin_held = false;
  send_data(s, held, to_client);
  if (fin) send_close(s, to_client);
}

void framing::credit(stream& s, std::size_t n, std::string& to_client) {
  if (is_h2()) return h2_->consumed(s.sid, n);
  s.recv_unacked += n;
  s.consumed += n;
  if (is_yamux() && s.recv_unacked >= yamux::initial_window / 2) {
    yamux::encode_frame(to_client, yamux::type::window_update, 0, s.sid, static_cast<std::uint32_t>(s.recv_unacked));
    s.recv_window += s.recv_unacked;
    s.recv_unacked = 0;
  } else if (smux_version_ == 2 && s.recv_unacked >= smux::initial_window / 4) {
    smux::encode_upd(to_client, s.sid, static_cast<std::uint32_t>(s.consumed), smux::initial_window);
    s.recv_window += s.recv_unacked;
    s.recv_unacked = 0;
  }
}

void framing::ended(std::uint32_t sid) {
  ended_.push_back(sid);
  while (ended_.size() > max_ended) {
    const auto old = ended_.front();
    ended_.pop_front();
    if (auto o = streams_.find(old); o != streams_.end() && o->second.engine_end) forget(old);
  }
}

void framing::forget(std::uint32_t sid) {
  const auto it = streams_.find(sid);
  if (it == streams_.end()) return;
  held_ -= it->second.held.size();
  if (it->second.mux_id != 0) by_mux_.erase(it->second.mux_id);
  streams_.erase(it);
}

std::uint16_t framing::free_mux_id() const {
  while (next_mux_ == 0 || by_mux_.contains(next_mux_)) ++next_mux_;
  return next_mux_++;
}

std::string framing::seal(std::string bytes) {
  if (!req_ || !req_->padding || sealed_ >= padded_records || bytes.empty()) return bytes;
  std::string out;
  std::string_view rest(bytes);
  std::uniform_int_distribution<int> pad(256, 767);
  while (!rest.empty() && sealed_ < padded_records) {
    const std::size_t n = std::min<std::size_t>(rest.size(), 0xffff);
    encode_padded_record(out, rest.substr(0, n), static_cast<std::uint16_t>(pad(rng_)));
    rest.remove_prefix(n);
    ++sealed_;
  }
  out.append(rest);
  return out;
}

}  // namespace vlessbench::sing_mux
