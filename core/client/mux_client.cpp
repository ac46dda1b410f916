#include "core/client/mux_client.hpp"

#include <algorithm>

namespace vlessbench::mux {

namespace {

constexpr std::size_t max_frame_data = 0xffff;
constexpr std::size_t scratch_size = 64 * 1024;

class category_impl : public std::error_category {
 public:
  const char* name() const noexcept override { return "mux client"; }
  std::string message(int e) const override {
    switch (static_cast<errc>(e)) {
      case errc::bad_frame: return "mux: bad frame from the server";
      case errc::sub_ended: return "mux: sub-connection is not open";
      case errc::sub_error: return "mux: the server ended the sub-connection with an error";
      case errc::too_many_subs: return "mux: too many open sub-connections";
      case errc::closed: return "mux: connection closed";
    }
    return "mux client error";
  }
};

frame keep_frame(std::uint16_t id, std::string_view data) {
  frame f;
  f.id = id;
  f.st = status::keep;
  f.option = option_data;
  f.data = data;
  return f;
}

}  // namespace

const std::error_category& category() {
  static const category_impl c;
  return c;
}

std::error_code make_error_code(errc e) { return {static_cast<int>(e), category()}; }

std::optional<target> make_target(network net, std::string_view host, std::uint16_t port) {
  if (host.empty() || port == 0) return std::nullopt;
  target t;
  t.net = net;
  t.port = port;
  std::error_code ec;
  const auto addr = asio::ip::make_address(std::string(host), ec);
  if (!ec && addr.is_v4()) {
    const auto b = addr.to_v4().to_bytes();
    t.type = address_type::ipv4;
    t.address.assign(reinterpret_cast<const char*>(b.data()), b.size());
  } else if (!ec && addr.is_v6()) {
    const auto b = addr.to_v6().to_bytes();
    t.type = address_type::ipv6;
    t.address.assign(reinterpret_cast<const char*>(b.data()), b.size());
  } else {
    if (host.size() > 255) return std::nullopt;
    t.type = address_type::domain;
    t.address.assign(host);
  }
  return t;
}

vless::request_header vless_request(const uuid_bytes& uuid) {
  vless::request_header h;
  h.uuid = uuid;
  h.command = static_cast<std::uint8_t>(vless::command::mux);
  return h;
}

// ---------------------------------------------------------------------------------------------
// sub_table

std::optional<std::uint16_t> sub_table::open(std::string& out, const target& dest, std::string_view first_data,
                                             bool xudp, std::optional<std::array<std::uint8_t, 8>> global_id) {
  if (subs_.size() >= max_subs_ || subs_.size() >= 0xffff) return std::nullopt;
  // A datagram never spans frames: the rest would arrive as another packet.
  if (dest.net == network::udp && first_data.size() > max_frame_data) return std::nullopt;
  while (next_id_ == 0 || subs_.count(next_id_) != 0) ++next_id_;  // wraps to 0, then 1
  const std::uint16_t id = next_id_++;
  sub& s = subs_[id];
  s.dest = dest;
  s.xudp = xudp && dest.net == network::udp;
  ++opened_;
  frame f;
  f.id = id;
  f.st = status::new_sub;
  f.dest = dest;
  if (s.xudp) f.global_id = global_id;
  const std::string_view head = first_data.substr(0, max_frame_data);
  if (!head.empty()) {
    f.option = option_data;
    f.data = head;
  }
  encode_mux_frame(out, f);
  if (first_data.size() > head.size()) {
    write(out, id, first_data.substr(head.size()));
  }
  return id;
}

bool sub_table::write(std::string& out, std::uint16_t id, std::string_view data) {
  if (subs_.count(id) == 0) return false;
  while (!data.empty()) {
    const std::string_view chunk = data.substr(0, max_frame_data);
    encode_mux_frame(out, keep_frame(id, chunk));
    data.remove_prefix(chunk.size());
  }
  return true;
}

bool sub_table::write_packet(std::string& out, std::uint16_t id, std::string_view datagram, const target* to) {
  const auto it = subs_.find(id);
  if (it == subs_.end() || datagram.size() > max_frame_data) return false;
  frame f = keep_frame(id, datagram);
  if (it->second.xudp) f.dest = to ? *to : it->second.dest;
  encode_mux_frame(out, f);
  return true;
}

bool sub_table::end(std::string& out, std::uint16_t id) {
  if (subs_.erase(id) == 0) return false;
  frame f;
  f.id = id;
  f.st = status::end;
  encode_mux_frame(out, f);
  return true;
}

std::string sub_table::file(const frame& f) {
  switch (f.st) {
    case status::new_sub: return "new_from_server";
    case status::keep_alive: ++keep_alives_; return {};
    case status::end: {
      const auto it = subs_.find(f.id);
      if (it != subs_.end()) {
        it->second.ended = true;
        it->second.error = f.error();
      }
      return {};
    }
    case status::keep: break;
  }
  if (!f.has_data()) return {};
  const auto it = subs_.find(f.id);
  if (it == subs_.end() || it->second.ended) {
    dropped_bytes_ += f.data.size();
    return {};
  }
  sub& s = it->second;
  if (s.buffered + f.data.size() > max_buffered_) return "sub_buffer_overflow";
  s.buffered += f.data.size();
  if (s.dest.net == network::udp)
    s.packets.push_back(packet{std::string(f.data), f.dest});
  else
    s.stream.append(f.data);
  return {};
}

std::string sub_table::feed(std::string_view bytes) {
  // Whole frames straight from bytes; only a frame cut at the end is copied.
  std::string_view rest = bytes;
  if (!in_.empty()) {
    in_.append(bytes);
    rest = in_;
  }
  std::size_t used = 0;
  std::string reason;
  for (;;) {
    const auto r = parse_mux_frame(rest.substr(used));
    if (r.invalid()) {
      reason = std::string(r.reason);
      break;
    }
    if (!r.complete()) break;
    reason = file(r.value);
    if (!reason.empty()) break;
    used += r.consumed;
  }
  if (!reason.empty()) {
    in_.clear();
    return reason;
  }
  if (in_.empty())
    in_.assign(rest.substr(used));
  else
    in_.erase(0, used);
  return {};
}

std::size_t sub_table::take(std::uint16_t id, char* data, std::size_t size) {
  const auto it = subs_.find(id);
  if (it == subs_.end()) return 0;
  sub& s = it->second;
  const std::size_t n = std::min(size, s.stream.size());
  s.stream.copy(data, n);
  s.stream.erase(0, n);
  s.buffered -= n;
  return n;
}

std::optional<packet> sub_table::take_packet(std::uint16_t id) {
  const auto it = subs_.find(id);
  if (it == subs_.end() || it->second.packets.empty()) return std::nullopt;
  sub& s = it->second;
  packet p = std::move(s.packets.front());
  s.packets.pop_front();
  s.buffered -= p.data.size();
  return p;
}

bool sub_table::has_data(std::uint16_t id) const {
  const auto it = subs_.find(id);
  return it != subs_.end() && it->second.buffered > 0;
}

bool sub_table::remote_ended(std::uint16_t id) const {
  const auto it = subs_.find(id);
  return it == subs_.end() || it->second.ended;
}

bool sub_table::remote_error(std::uint16_t id) const {
  const auto it = subs_.find(id);
  return it != subs_.end() && it->second.error;
}

// ---------------------------------------------------------------------------------------------
// connection

connection::connection(asio::any_io_executor ex, const vless::client_plan& plan)
    : socket_(ex), client_(socket_, plan), signal_(ex), scratch_(std::make_unique<char[]>(scratch_size)) {
  signal_.expires_at(asio::steady_timer::time_point::max());
}

awaitable<std::error_code> connection::connect() {
  const auto ec = co_await client_.connect();
  usable_ = !ec;
  if (ec) fail(ec.message());
  co_return ec;
}

awaitable<std::error_code> connection::handshake() {
  const auto ec = co_await client_.handshake();
  if (ec) fail(ec.message());
  co_return ec;
}

awaitable<std::error_code> connection::send_header() {
  std::string none;
  co_return co_await send(none);
}

void connection::fail(std::string why) {
  if (usable_ || failure_.empty()) failure_ = std::move(why);
  usable_ = false;
  std::error_code ignored;
  socket_.close(ignored);
  wake();
}

void connection::close() {
  if (failure_.empty()) failure_ = "closed";
  usable_ = false;
  std::error_code ignored;
  socket_.close(ignored);
  wake();
}

void connection::wake() { signal_.cancel(); }

awaitable<void> connection::wait_turn() { co_await signal_.async_wait(as_tuple_awaitable); }

// One write at a time: a second writer waits for the first (frames never
// interleave mid-frame). The VLESS header goes with the first write
// (vless::client). A writer that just wrote lets the woken waiters go first:
// otherwise a sub writing in a loop would take every turn (its next send runs
// before their wake-ups) and concurrent subs would move one after another.
awaitable<std::error_code> connection::send(std::string& frames) {
  while (writing_ && usable_) {
    ++write_waiters_;
    co_await wait_turn();
    --write_waiters_;
  }
  if (!usable_) co_return make_error_code(errc::closed);
  if (!pending_.empty()) {
    frames.insert(0, pending_);
    pending_.clear();
  }
  writing_ = true;
  const auto ec = co_await client_.write(frames);
  writing_ = false;
  if (ec) fail(ec.message());
  wake();
  if (write_waiters_ > 0) co_await asio::post(co_await asio::this_coro::executor, use_awaitable);
  co_return ec;
}

awaitable<std::error_code> connection::open(const target& dest, std::string_view first_data, std::uint16_t& id) {
  if (!usable_) co_return make_error_code(errc::closed);
  std::string out;
  const auto opened = table_.open(out, dest, first_data);
  if (!opened) co_return make_error_code(errc::too_many_subs);
  id = *opened;
  co_return co_await send(out);
}

awaitable<std::error_code> connection::write(std::uint16_t id, std::string_view data) {
  std::string out;
  if (!table_.write(out, id, data)) co_return make_error_code(errc::sub_ended);
  co_return co_await send(out);
}

void connection::end(std::uint16_t id) { table_.end(pending_, id); }

awaitable<std::error_code> connection::flush() {
  if (pending_.empty() || !usable_) co_return std::error_code{};
  std::string none;
  co_return co_await send(none);
}

awaitable<std::error_code> connection::open_udp(const target& dest, std::string_view first_datagram, bool xudp,
                                                std::optional<std::array<std::uint8_t, 8>> global_id,
                                                std::uint16_t& id) {
  if (!usable_) co_return make_error_code(errc::closed);
  std::string out;
  const auto opened = table_.open(out, dest, first_datagram, xudp, global_id);
  if (!opened) co_return make_error_code(errc::too_many_subs);
  id = *opened;
  co_return co_await send(out);
}

awaitable<std::error_code> connection::write_packet(std::uint16_t id, std::string_view datagram) {
  std::string out;
  if (!table_.write_packet(out, id, datagram)) co_return make_error_code(errc::sub_ended);
  co_return co_await send(out);
}

awaitable<std::error_code> connection::pull() {
  if (reading_) {  // another sub is reading: it files our frames too
    co_await wait_turn();
    co_return std::error_code{};
  }
  reading_ = true;
  std::size_t got = 0;
  const auto ec = co_await client_.read_some(scratch_.get(), scratch_size, got);
  reading_ = false;
  if (ec) {
    fail(ec.message());
    co_return ec;
  }
  if (auto why = table_.feed(std::string_view(scratch_.get(), got)); !why.empty()) {
    fail("mux: " + why);
    co_return make_error_code(errc::bad_frame);
  }
  wake();
  co_return std::error_code{};
}

awaitable<std::error_code> connection::read_some(std::uint16_t id, char* data, std::size_t size, std::size_t& n) {
  n = 0;
  for (;;) {
    if (!table_.is_open(id)) co_return make_error_code(errc::sub_ended);
    if ((n = table_.take(id, data, size)) > 0) co_return std::error_code{};
    if (table_.remote_ended(id))
      co_return table_.remote_error(id) ? make_error_code(errc::sub_error) : std::error_code(asio::error::eof);
    if (!usable_) co_return make_error_code(errc::closed);
    if (const auto ec = co_await pull()) co_return ec;
  }
}

awaitable<std::error_code> connection::read_packet(std::uint16_t id, packet& out) {
  for (;;) {
    if (!table_.is_open(id)) co_return make_error_code(errc::sub_ended);
    if (auto p = table_.take_packet(id)) {
      out = std::move(*p);
      co_return std::error_code{};
    }
    if (table_.remote_ended(id))
      co_return table_.remote_error(id) ? make_error_code(errc::sub_error) : std::error_code(asio::error::eof);
    if (!usable_) co_return make_error_code(errc::closed);
    if (const auto ec = co_await pull()) co_return ec;
  }
}

}  // namespace vlessbench::mux
