#include "core/client/vless_client.hpp"

#include "core/wire/http_parser.hpp"

#include <algorithm>
#include <cstring>

#include <openssl/rand.h>

namespace vlessbench::vless {

request_header tcp_request(const uuid_bytes& uuid, std::string_view host, std::uint16_t port) {
  request_header h;
  h.uuid = uuid;
  h.command = static_cast<std::uint8_t>(command::tcp);
  h.dest = destination_for_host(host, port);
  return h;
}

client_plan make_bare_tls_plan(const tcp::endpoint& server, const tls::client_options& tls) {
  client_plan plan;
  plan.server = server;
  plan.tls = tls;
  plan.tls_context = std::make_shared<asio::ssl::context>(tls::make_client_context(tls));
  return plan;  // header empty: nothing goes before the first write, nothing is taken off a read
}

client_plan make_client_plan(const tcp::endpoint& server, const tls::client_options& tls,
                             const request_header& request) {
  client_plan plan = make_bare_tls_plan(server, tls);
  plan.header = encode_request(request);
  return plan;
}

namespace {

class client_category_impl : public std::error_category {
 public:
  const char* name() const noexcept override { return "vless client"; }
  std::string message(int e) const override {
    switch (static_cast<client_errc>(e)) {
      case client_errc::bad_response: return "vless response: bad_version";
      case client_errc::upgrade_refused: return "upgrade: refused by the server (not 101)";
      case client_errc::bad_upgrade_response: return "upgrade: bad response (not a valid 101)";
      case client_errc::bad_frame: return "websocket: bad frame from the server";
      case client_errc::grpc_failed: return "grpc: the stream failed";
      case client_errc::bad_vision: return "vision: bad padding from the server";
      case client_errc::xhttp_failed: return "xhttp: the server refused a request";
    }
    return "vless client error";
  }
};

}  // namespace

const std::error_category& client_category() {
  static const client_category_impl category;
  return category;
}

std::error_code make_error_code(client_errc e) { return {static_cast<int>(e), client_category()}; }

awaitable<std::error_code> client::connect() {
  auto [ec] = co_await socket_.async_connect(plan_.server, as_tuple_awaitable);
  if (ec) co_return ec;
  std::error_code ignored;  // a socket that refuses the option still works; the policy is best effort
  if (plan_.nodelay) socket_.set_option(tcp::no_delay(true), ignored);
  co_return std::error_code{};
}

awaitable<std::error_code> client::handshake() {
  const transport_spec& t = plan_.transport;
  if (t.tls && plan_.vision) {
    vision_tls_ = std::make_unique<fd_tls>(socket_, *plan_.tls_context, plan_.tls);
    if (auto ec = co_await vision_tls_->handshake()) co_return ec;
    uuid_bytes uuid{};
    std::memcpy(uuid.data(), plan_.header.data() + 1, uuid.size());  // version(1) · UUID(16)
    vision_ = std::make_unique<vision_client>(uuid);
  } else if (t.kind == transport_kind::xhttp) {
    if (t.tls) tls_.emplace(socket_, *plan_.tls_context);
    xhttp_ = std::make_unique<xhttp::client_transport>(xhttp::settings_for(t, http_host(), plan_.xhttp_post_interval),
                                                       socket_, tls_ ? &*tls_ : nullptr, plan_.server,
                                                       *plan_.tls_context, plan_.tls, plan_.nodelay);
    if (auto ec = co_await xhttp_->handshake(tls_handshake())) co_return ec;
  } else if (t.tls) {
    tls_.emplace(socket_, *plan_.tls_context);
    if (auto ec = co_await tls_handshake()) co_return ec;
  }
  if (t.kind == transport_kind::grpc) {
    // Preface, SETTINGS and the request's HEADERS go with the first write.
    h2_ = std::make_unique<gun::h2_client>(gun::request_target{http_host(), t.service_name, t.tls, t.grpc_multi});
  }
  if (t.upgrades()) {
    std::array<unsigned char, 16> nonce{};
    RAND_bytes(nonce.data(), nonce.size());
    ws_key_ = ws::base64_encode(std::string_view(reinterpret_cast<const char*>(nonce.data()), nonce.size()), false);
    if (t.kind == transport_kind::ws) decoder_.emplace(ws::frame_rules{false, std::uint64_t{1} << 40});
    upgrade_unread_ = true;
    if (t.max_early_data > 0) {
      upgrade_deferred_ = true;  // goes with the first write
    } else {
      if (auto ec = co_await raw_write(upgrade_request({}))) co_return ec;
      if (auto ec = co_await read_upgrade_response()) co_return ec;
    }
  }
  header_pending_ = !plan_.split_header && !plan_.header.empty();
  response_pending_ = !plan_.header.empty();
  co_return std::error_code{};
}

void client::attach(std::shared_ptr<xhttp::h2_connection> connection) {
  xhttp_ = std::make_unique<xhttp::client_transport>(
      xhttp::settings_for(plan_.transport, http_host(), plan_.xhttp_post_interval), std::move(connection));
  header_pending_ = !plan_.split_header && !plan_.header.empty();
  response_pending_ = !plan_.header.empty();
}

// TLS on the connected socket (tls_ in place); nothing without TLS.
awaitable<std::error_code> client::tls_handshake() {
  if (!tls_) co_return std::error_code{};
  tls::prepare_client(tls_->native_handle(), plan_.tls);
  auto [ec] = co_await tls_->async_handshake(asio::ssl::stream_base::client, as_tuple_awaitable);
  co_return ec;
}

std::string http_host(const client_plan& plan) {
  if (!plan.transport.host.empty()) return plan.transport.host;
  return !plan.tls.sni.empty() ? plan.tls.sni : plan.server.address().to_string();
}

std::string client::http_host() const { return vless::http_host(plan_); }

std::error_code client::h2_error() {
  upgrade_error_ = h2_->error();
  return make_error_code(client_errc::grpc_failed);
}

awaitable<std::error_code> client::h2_flush() {
  for (;;) {
    const std::string out = h2_->take_output();
    if (!out.empty())
      if (auto ec = co_await raw_write(out)) co_return ec;
    if (!h2_->error().empty()) co_return h2_error();
    if (!h2_->send_blocked()) co_return std::error_code{};
    // The server's window is full: read (its WINDOW_UPDATE, and data kept for read_some).
    char buf[16 * 1024];
    std::size_t n = 0;
    if (auto ec = co_await raw_read(buf, sizeof buf, n)) co_return ec;
    h2_->feed(buf, n);
  }
}

std::string client::upgrade_request(std::string_view early) const {
  const transport_spec& t = plan_.transport;
  const std::string host = http_host();
  return ws::format_upgrade_request(
      {t.kind == transport_kind::ws ? ws::upgrade_kind::websocket : ws::upgrade_kind::httpupgrade, t.path, host,
       ws_key_, early, t.early_data_header});
}

void client::frame_into(std::string& out, std::string_view data) {
  if (upgrade_deferred_) {
    upgrade_deferred_ = false;
    std::string_view early;
    if (decoder_) {  // ws: the first bytes in the request, the rest in a frame behind it
      early = data.substr(0, std::min<std::size_t>(data.size(), plan_.transport.max_early_data));
      data.remove_prefix(early.size());
    }
    out += upgrade_request(early);
  }
  if (!decoder_) {
    out += data;
    return;
  }
  if (data.empty()) return;
  ws::mask_key key{};
  RAND_bytes(key.data(), key.size());
  char head[ws::max_header_bytes];
  out.append(head, ws::encode_frame_header(head, ws::opcode::binary, true, data.size(), &key));
  const std::size_t at = out.size();
  out += data;
  ws::apply_mask(out.data() + at, data.size(), key, 0);
}

awaitable<std::error_code> client::vision_write(std::string_view data) {
  std::string wire;
  if (header_pending_) {
    header_pending_ = false;
    wire = plan_.header;  // unpadded, in the same record as the first frame
  }
  const bool direct = vision_->up.pad(vision_->filter, data, wire).direct;
  auto ec = co_await raw_write(wire);
  if (!ec && direct) vision_->up_direct = true;
  co_return ec;
}

std::error_code client::vision_read(char* data, std::size_t& n) {
  vision_client& v = *vision_;
  if (v.down.padded()) {
    const auto r = v.down.feed(data, n, data);
    if (!r.error.empty()) {
      v.error = r.error;
      return make_error_code(client_errc::bad_vision);
    }
    n = r.out;
  }
  if (v.filter.filtering() && n > 0) v.filter.observe({data, n});
  if (v.down.direct() && !v.down_direct) {
    // What the TLS read of its last record and did not return yet; the rest is in the socket.
    v.down_direct = true;
    raw_in_ += vision_tls_->take_pending();
  }
  return {};
}

awaitable<std::error_code> client::raw_write(std::string_view data) {
  if (vision_tls_ && !vision_->up_direct) co_return co_await vision_tls_->write(data);
  if (tls_) {
    auto [ec, n] = co_await asio::async_write(*tls_, asio::buffer(data.data(), data.size()), as_tuple_awaitable);
    (void)n;
    co_return ec;
  }
  auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(data.data(), data.size()), as_tuple_awaitable);
  (void)n;
  co_return ec;
}

awaitable<std::error_code> client::raw_read(char* data, std::size_t size, std::size_t& n) {
  if (!raw_in_.empty()) {
    n = std::min(size, raw_in_.size());
    std::memcpy(data, raw_in_.data(), n);
    raw_in_.erase(0, n);
    co_return std::error_code{};
  }
  if (vision_tls_ && !vision_->down_direct) co_return co_await vision_tls_->read_some(data, size, n);
  if (tls_) {
    auto [ec, got] = co_await tls_->async_read_some(asio::buffer(data, size), as_tuple_awaitable);
    n = got;
    co_return ec;
  }
  auto [ec, got] = co_await socket_.async_read_some(asio::buffer(data, size), as_tuple_awaitable);
  n = got;
  co_return ec;
}

awaitable<std::error_code> client::read_upgrade_response() {
  upgrade_unread_ = false;
  const auto kind = decoder_ ? ws::upgrade_kind::websocket : ws::upgrade_kind::httpupgrade;
  std::string head;
  char buf[4096];
  for (;;) {
    std::size_t n = 0;
    if (auto ec = co_await raw_read(buf, sizeof buf, n)) co_return ec;
    head.append(buf, n);
    const auto r = ws::parse_upgrade_response(head, kind, ws_key_);
    if (r.complete()) {
      raw_in_ = head.substr(r.consumed);
      co_return std::error_code{};
    }
    if (r.invalid()) {
      upgrade_error_ = head.substr(0, head.find("\r\n"));
      if (const auto body = head.find("\r\n\r\n"); body != std::string::npos)
        upgrade_error_ += " " + head.substr(body + 4);
      while (!upgrade_error_.empty() && upgrade_error_.back() == '\n') upgrade_error_.pop_back();
      co_return make_error_code(r.reason == "upgrade_refused" ? client_errc::upgrade_refused
                                                              : client_errc::bad_upgrade_response);
    }
    if (head.size() > http::max_head_bytes) co_return make_error_code(client_errc::bad_upgrade_response);
  }
}

awaitable<std::error_code> client::send_header() {
  if (xhttp_) co_return co_await xhttp_->write(plan_.header);
  if (h2_) {
    h2_->send(plan_.header);
    co_return co_await h2_flush();
  }
  if (!plan_.transport.upgrades()) co_return co_await raw_write(plan_.header);
  std::string wire;
  frame_into(wire, plan_.header);
  co_return co_await raw_write(wire);
}

awaitable<std::error_code> client::write(std::string_view data) {
  if (vision_) co_return co_await vision_write(data);
  std::string_view out = data;
  if (header_pending_) {
    header_pending_ = false;
    out_.reserve(plan_.header.size() + data.size());
    out_ = plan_.header;
    out_ += data;
    out = out_;
  }
  std::error_code ec;
  if (xhttp_) {
    ec = co_await xhttp_->write(out);
  } else if (h2_) {
    h2_->send(out);
    ec = co_await h2_flush();
  } else if (plan_.transport.upgrades()) {
    std::string wire;
    wire.reserve(out.size() + 64);
    wire += pong_;
    pong_.clear();
    frame_into(wire, out);
    ec = co_await raw_write(wire);
  } else {
    ec = co_await raw_write(out);
  }
  out_.clear();
  co_return ec;
}

bool client::strip_response(char* data, std::size_t& n) {
  // Usually the whole header comes with the first payload bytes and is parsed in place.
  std::string_view have(data, n);
  if (!response_head_.empty()) {
    response_head_.append(data, n);
    have = response_head_;
  }
  const auto r = parse_response(have);
  if (r.invalid()) return false;
  if (r.need_more()) {
    if (response_head_.empty()) response_head_.assign(data, n);
    n = 0;
    return true;
  }
  // Every byte before this read belonged to the header, so the payload fits in data.
  const std::size_t payload = have.size() - r.consumed;
  std::memmove(data, have.data() + r.consumed, payload);
  n = payload;
  response_pending_ = false;
  response_head_.clear();
  return true;
}

awaitable<std::error_code> client::read_some(char* data, std::size_t size, std::size_t& n) {
  for (;;) {
    n = 0;
    if (upgrade_unread_) {
      if (upgrade_deferred_) co_return make_error_code(client_errc::bad_upgrade_response);  // nothing sent yet
      if (auto ec = co_await read_upgrade_response()) co_return ec;
    }
    if (eof_) co_return asio::error::eof;
    std::size_t got = 0;
    if (xhttp_) {
      if (auto ec = co_await xhttp_->read_some(data, size, got)) co_return ec;
    } else if (h2_) {
      std::string& in = h2_->received();
      if (in.empty()) {
        if (!h2_->error().empty()) co_return h2_error();
        if (h2_->ended()) co_return asio::error::eof;
        if (auto ec = co_await raw_read(data, size, got)) co_return ec;
        h2_->feed(data, got);
        // Acks and WINDOW_UPDATEs go out now: the server may be waiting for them.
        if (const std::string acks = h2_->take_output(); !acks.empty())
          if (auto ec = co_await raw_write(acks)) co_return ec;
        continue;
      }
      got = std::min(size, in.size());
      std::memcpy(data, in.data(), got);
      in.erase(0, got);
    } else if (auto ec = co_await raw_read(data, size, got)) {
      co_return ec;
    }
    if (decoder_) {
      const auto step = decoder_->decode(data, got);
      if (!step.reason.empty()) co_return make_error_code(client_errc::bad_frame);
      for (const auto& c : decoder_->controls()) {
        if (c.op == ws::opcode::close) eof_ = true;
        if (c.op != ws::opcode::ping) continue;
        // Answered with the next write (this client never writes while a read is pending).
        ws::mask_key key{};
        char head[ws::max_header_bytes];
        pong_.assign(head, ws::encode_frame_header(head, ws::opcode::pong, true, c.payload.size(), &key));
        pong_ += c.payload;  // a zero key leaves the payload as it is
      }
      decoder_->controls().clear();
      got = step.payload;
      if (got == 0) continue;
    }
    n = got;
    if (response_pending_ && !strip_response(data, n)) {
      n = 0;
      co_return make_error_code(client_errc::bad_response);
    }
    if (vision_ && n > 0)
      if (auto ec = vision_read(data, n)) co_return ec;
    if (n > 0) co_return std::error_code{};
  }
}

}  // namespace vlessbench::vless
