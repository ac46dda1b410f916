#include "runner/datagram.hpp"

#include "core/wire/net_address.hpp"
#include "core/wire/socks5_udp.hpp"
#include "core/wire/udp_framing.hpp"
#include "runner/proxy_protocol.hpp"

namespace vlessbench::runner {

using udp = asio::ip::udp;

datagram_tunnel::datagram_tunnel(asio::any_io_executor ex, const path_plan& plan, std::chrono::milliseconds timeout)
    : plan_(plan), tcp_(ex), udp_(ex), deadline_(ex, timeout), scratch_(65'536, '\0') {}

datagram_tunnel::~datagram_tunnel() {
  if (mux_ && sub_open_) {
    try {
      mux_->end(sub_);
    } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory; the server ends it with the connection
    }
  }
}

void datagram_tunnel::arm() {
  deadline_.arm(weak_from_this(), [](datagram_tunnel& t) {
    std::error_code ignored;
    t.tcp_.close(ignored);
    t.udp_.close(ignored);
    if (t.mux_) t.mux_->close();  // a stuck sub: the shared connection is remade
  });
}

void datagram_tunnel::disarm() { deadline_.disarm(); }

void datagram_tunnel::touch(const char* phase) { deadline_.touch(phase); }

void datagram_tunnel::close() {
  open_ = false;
  if (mux_) {
    if (sub_open_) mux_->end(sub_);
    sub_open_ = false;
    if (owns_mux_) mux_->close();
    mux_.reset();
  }
  std::error_code ignored;
  tcp_.close(ignored);
  udp_.close(ignored);
  deadline_.disarm();
}

std::string datagram_tunnel::describe(const std::error_code& ec) const {
  if (ec.category() == vless::client_category() || ec.category() == mux::category()) return ec.message();
  return deadline_.describe(ec);
}

std::string datagram_tunnel::direct_flow() const {
  if (plan_.spec->kind != path_kind::direct || !udp_.is_open()) return {};
  std::error_code ec;
  const auto local = udp_.local_endpoint(ec);
  if (ec) return {};
  return format_endpoint(tcp::endpoint(local.address(), local.port()));
}

awaitable<maybe_failure> datagram_tunnel::mux_connect() {
  touch("connect");
  if (const auto ec = co_await mux_->connect()) co_return failure{describe(ec)};
  touch("tls handshake");
  if (const auto ec = co_await mux_->handshake()) co_return failure{describe(ec)};
  // The shared connection's header goes alone, before any flow; an own one's with the first
  // sub unless the path splits writes.
  if (!owns_mux_ || plan_.vless.split_header) {
    touch("vless header");
    if (const auto ec = co_await mux_->send_header()) co_return failure{describe(ec)};
  }
  co_return std::nullopt;
}

awaitable<maybe_failure> datagram_tunnel::prepare(bool new_flow) {
  if (!plan_.mux || plan_.mux->own_per_flow || (new_flow && plan_.mux->fresh_per_new)) co_return std::nullopt;
  if (!plan_.entry) co_return failure{plan_.entry_error};
  bool made = false;
  mux_ = shared_connection(*plan_.mux, tcp_.get_executor(), plan_.vless, made);
  if (made) {
    if (auto f = co_await mux_connect()) {
      mux_->close();
      mux_.reset();
      co_return prefixed("mux connection: ", std::move(f));
    }
  }
  touch("mux flush");
  if (const auto ec = co_await mux_->flush()) {
    failure f{"mux connection: " + describe(ec)};
    mux_.reset();
    co_return f;
  }
  co_return std::nullopt;
}

awaitable<maybe_failure> datagram_tunnel::open() {
  if (!plan_.entry) co_return failure{plan_.entry_error};
  if (plan_.mux) {
    if (!mux_) {  // muxnew=connection or xudp alone: a mux connection of its own, inside the clock
      mux_ = std::make_shared<mux::connection>(tcp_.get_executor(), plan_.vless);
      owns_mux_ = true;
      ++plan_.mux->connections;
      open_ = true;
      if (auto f = co_await mux_connect()) co_return f;
    }
    open_ = true;
    co_return std::nullopt;
  }
  touch("connect");
  switch (plan_.spec->kind) {
    case path_kind::vless: {
      vless_.emplace(tcp_, plan_.vless);
      if (const auto ec = co_await vless_->connect()) co_return failure{describe(ec)};
      open_ = true;
      touch("tls handshake");
      if (const auto ec = co_await vless_->handshake()) co_return failure{describe(ec)};
      if (vless_->splits_header()) {
        touch("vless header");
        if (const auto ec = co_await vless_->send_header()) co_return failure{describe(ec)};
      }
      co_return std::nullopt;
    }
    case path_kind::socks5: co_return co_await open_socks5();
    default: {
      // direct: the target's address (make_plan resolved it as the entry).
      const udp::endpoint target(plan_.entry->address(), plan_.entry->port());
      std::error_code ec;
      udp_.open(target.protocol(), ec);
      if (!ec) udp_.connect(target, ec);
      if (ec) co_return failure{describe(ec)};
      open_ = true;
      co_return std::nullopt;
    }
  }
}

awaitable<maybe_failure> datagram_tunnel::open_socks5() {
  {
    auto [ec] = co_await tcp_.async_connect(*plan_.entry, as_tuple_awaitable);
    if (ec) co_return failure{describe(ec)};
  }
  open_ = true;
  std::error_code opt_ec;
  tcp_.set_option(tcp::no_delay(true), opt_ec);
  std::string in;
  std::size_t used = 0;  // bytes of in the last reply took
  auto read_until = [&](auto parse) -> awaitable<maybe_failure> {
    for (;;) {
      const auto r = parse(in);
      if (r.invalid()) co_return failure{std::string(r.reason)};
      if (r.complete()) {
        used = r.consumed;
        co_return std::nullopt;
      }
      auto [ec, n] = co_await tcp_.async_read_some(asio::buffer(scratch_), as_tuple_awaitable);
      if (ec) co_return failure{describe(ec)};
      in.append(scratch_.data(), n);
    }
  };
  touch("socks5 greeting");
  {
    const std::string hello = socks5_greeting();
    auto [ec, n] = co_await asio::async_write(tcp_, asio::buffer(hello), as_tuple_awaitable);
    if (ec) co_return failure{describe(ec)};
  }
  if (auto f = co_await read_until([](std::string_view b) { return parse_socks5_method_reply(b); })) co_return f;
  in.erase(0, used);
  touch("socks5 udp associate");
  {
    const std::string req = socks5_udp_associate_request();
    auto [ec, n] = co_await asio::async_write(tcp_, asio::buffer(req), as_tuple_awaitable);
    if (ec) co_return failure{describe(ec)};
  }
  if (auto f = co_await read_until([](std::string_view b) { return parse_socks5_connect_reply(b); })) co_return f;
  const auto bound = socks5_reply_bound(std::string_view(in).substr(0, used));
  std::error_code ec;
  auto relay_addr = asio::ip::make_address(bound.host, ec);
  if (ec) co_return failure{"socks5: the UDP relay's address is a name (" + bound.host + "), not supported"};
  // 0.0.0.0 / :: : "the address you reached me at" (RFC 1928 leaves it open; clients do this).
  if (relay_addr.is_unspecified()) relay_addr = plan_.entry->address();
  const udp::endpoint relay(relay_addr, bound.port);
  udp_.open(relay.protocol(), ec);
  if (!ec) udp_.connect(relay, ec);
  if (ec) co_return failure{describe(ec)};
  co_return std::nullopt;
}

awaitable<std::error_code> datagram_tunnel::send(std::string_view datagram) {
  const auto kind = plan_.spec->kind;
  if (mux_) {
    if (sub_open_) co_return co_await mux_->write_packet(sub_, datagram);
    sub_open_ = true;
    std::optional<std::array<std::uint8_t, 8>> global_id;
    if (plan_.mux->xudp) global_id = next_global_id(*plan_.mux);
    co_return co_await mux_->open_udp(plan_.mux->dest, datagram, plan_.mux->xudp, global_id, sub_);
  }
  if (kind == path_kind::vless) {
    frame_.clear();
    vless::encode_udp_packet(frame_, datagram);
    co_return co_await vless_->write(frame_);
  }
  std::string_view out = datagram;
  if (kind == path_kind::socks5) {
    frame_ = socks5::encode_udp_datagram(plan_.target_host, plan_.target_port, datagram);
    out = frame_;
  }
  auto [ec, n] = co_await udp_.async_send(asio::buffer(out.data(), out.size()), as_tuple_awaitable);
  co_return ec;
}

awaitable<maybe_failure> datagram_tunnel::receive(std::string& out) {
  const auto kind = plan_.spec->kind;
  if (mux_) {
    if (const auto ec = co_await mux_->read_packet(sub_, packet_)) co_return failure{describe(ec)};
    out.swap(packet_.data);
    co_return std::nullopt;
  }
  if (kind == path_kind::vless) {
    for (;;) {
      const auto p = vless::parse_udp_packet(stream_);
      if (p.complete()) {
        out.assign(p.value);
        stream_.erase(0, p.consumed);
        co_return std::nullopt;
      }
      if (p.invalid()) co_return failure{"vless udp: " + std::string(p.reason)};
      std::size_t n = 0;
      if (const auto ec = co_await vless_->read_some(scratch_.data(), scratch_.size(), n))
        co_return failure{describe(ec)};
      stream_.append(scratch_.data(), n);
    }
  }
  auto [ec, n] = co_await udp_.async_receive(asio::buffer(scratch_), as_tuple_awaitable);
  if (ec) co_return failure{describe(ec)};
  const std::string_view got(scratch_.data(), n);
  if (kind == path_kind::socks5) {
    const auto r = socks5::parse_udp_datagram(got);
    if (!r.complete()) co_return failure{"socks5 udp relay: " + std::string(r.reason)};
    out.assign(r.value.data);
  } else {
    out.assign(got);
  }
  co_return std::nullopt;
}

awaitable<maybe_failure> datagram_tunnel::round_trip(std::string_view datagram, const matcher& mine,
                                                     std::string& reply) {
  touch("send");
  if (const auto ec = co_await send(datagram)) {
    reusable_ = false;
    co_return failure{describe(ec)};
  }
  touch("reply");
  // Bounded by the watchdog: a reply that never comes ends in a timeout (the sockets close).
  for (;;) {
    if (auto f = co_await receive(reply)) {
      reusable_ = false;
      co_return f;
    }
    if (mine(reply)) co_return std::nullopt;
  }
}

}  // namespace vlessbench::runner
