#include "runner/tunnel.hpp"

#include "core/net/tcp_info.hpp"

#include "runner/proxy_protocol.hpp"

namespace vlessbench::runner {

namespace {

constexpr std::size_t scratch_size = 64 * 1024;

bool is_ip_literal(const std::string& host) {
  std::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// xhttp paths: packet-up's POST spacing (postinterval=) and, over h2 without mux=on, the shared
// connection reused samples ride (XMUX).
void plan_xhttp(path_plan& plan, const path_spec& spec) {
  if (spec.xhttp_post_interval_ms)
    plan.vless.xhttp_post_interval = std::chrono::milliseconds(*spec.xhttp_post_interval_ms);
  if (xhttp::version_for(plan.vless.transport) == xhttp::http_version::h2 && !plan.mux)
    plan.xmux = std::make_shared<path_plan::xmux_path>();
}

}  // namespace

path_plan make_plan(asio::io_context& io, const path_spec& spec, const target_url& target,
                    const vless_client_options& defaults) {
  path_plan plan;
  plan.spec = &spec;
  plan.target_authority = target.authority();
  plan.target_host = target.host;
  plan.target_port = target.port;
  // direct and a bare `tun` dial the target; everything else dials its own host:port.
  const bool dial_target = spec.kind == path_kind::direct || (spec.kind == path_kind::tun && spec.host.empty());
  const std::string host = dial_target ? target.host : spec.host;
  const std::uint16_t port = dial_target ? target.port : spec.port;
  try {
    tcp::resolver resolver(io);
    const auto results = resolver.resolve(host, std::to_string(port));
    // Prefer IPv4 like most clients' happy-eyeballs winners on loopback setups.
    for (const auto& r : results)
      if (!plan.entry || (r.endpoint().address().is_v4() && plan.entry->address().is_v6())) plan.entry = r.endpoint();
    if (!plan.entry) plan.entry_error = "resolve " + host + ": no addresses";
  } catch (const std::system_error& e) {
    plan.entry_error = "resolve " + host + ": " + e.code().message();
  }
  switch (spec.kind) {
    case path_kind::direct:
    case path_kind::forward:  // the forwarder dials the target; HTTP goes as if direct
    case path_kind::tun:      // the OS hands the socket to the client's TUN; HTTP as if direct
      break;
    case path_kind::http_connect: plan.proxy_request = format_connect_request(plan.target_authority); break;
    case path_kind::socks5: plan.proxy_request = socks5_connect_request(target.host, target.port); break;
    case path_kind::tls: {
      // The terminator's certificate is not checked (self-signed on a bench): what is measured
      // is the handshake's cost, not its trust.
      tls::client_options tls;
      tls.verify = false;
      tls.sni = is_ip_literal(spec.host) ? "" : spec.host;
      plan.vless = vless::make_bare_tls_plan(plan.entry.value_or(tcp::endpoint{}), tls);
      break;
    }
    case path_kind::vless: {
      const auto& link = *spec.link;
      tls::client_options tls;
      tls.verify = !link.allow_insecure;
      tls.sni = !link.sni.empty() ? link.sni : (is_ip_literal(link.host) ? "" : link.host);
      if (link.transport.kind == transport_kind::grpc)
        tls.alpn = "h2";  // gRPC is HTTP/2 (the server refuses http/1.1 there)
      if (link.transport.kind == transport_kind::xhttp)
        tls.alpn = std::string(xhttp::to_string(xhttp::version_for(link.transport)));
      // mux=on: a command 3 connection; every sample a sub to the target (runner/mux_tunnel.hpp).
      // packetEncoding=xudp alone: UDP flows as one XUDP sub each on a connection of their own.
      const bool datagram = is_datagram(target.scheme);
      const bool use_mux = spec.mux || (spec.xudp && datagram);
      auto request = use_mux ? mux::vless_request(link.uuid) : vless::tcp_request(link.uuid, target.host, target.port);
      if (!use_mux && datagram) request.command = static_cast<std::uint8_t>(vless::command::udp);
      request.flow = link.flow;  // xtls-rprx-vision or nothing (parse_share_link)
      plan.vless = vless::make_client_plan(plan.entry.value_or(tcp::endpoint{}), tls, request);
      plan.vless.vision = !link.flow.empty();
      if (use_mux) {
        plan.mux = std::make_shared<mux_path>();
        plan.mux->fresh_per_new = spec.mux_new == mux_new_mode::connection;
        plan.mux->xudp = spec.xudp && datagram;
        plan.mux->own_per_flow = !spec.mux;
        const auto net = is_datagram(target.scheme) ? mux::network::udp : mux::network::tcp;
        if (auto dest = mux::make_target(net, target.host, target.port)) plan.mux->dest = *dest;
      }
      const auto options = spec.client_options(defaults);
      plan.vless.nodelay = options.nodelay;
      plan.vless.split_header = options.writes == write_mode::split;
      plan.vless.transport = link.transport;
      if (link.transport.kind == transport_kind::xhttp) plan_xhttp(plan, spec);
      break;
    }
  }
  if (target.scheme == target_scheme::https) {
    plan.inner_tls.verify = false;
    plan.inner_tls.sni = is_ip_literal(target.host) ? "" : target.host;
    plan.inner_tls_context = std::make_shared<asio::ssl::context>(tls::make_client_context(plan.inner_tls));
  }
  return plan;
}

tunnel::tunnel(asio::any_io_executor ex, const path_plan& plan, std::chrono::milliseconds timeout)
    : plan_(plan), socket_(ex), deadline_(ex, timeout), scratch_(std::make_unique<char[]>(scratch_size)) {
  in_.reserve(16 * 1024);
}

// Not close(): steady_timer::cancel() may throw, and the members' own destructors close the socket
// and cancel the timer without throwing (no operation is pending: each holds a shared_ptr to us).
// A mux sub still open gets its End queued on the shared connection.
tunnel::~tunnel() {
  if (mux_ && sub_open_) {
    try {
      mux_->end(sub_);
    } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory; the server ends it with the connection
    }
  }
}

void tunnel::arm() {
  deadline_.arm(weak_from_this(), [](tunnel& t) {
    std::error_code ignored;
    t.socket_.close(ignored);
    if (t.vless_ && t.vless_->xhttp()) t.vless_->xhttp()->abort();  // its uplink connection too
    if (t.xmux_) t.xmux_->close();                                  // a stuck session: the shared connection is remade
    if (t.mux_) t.mux_->close();                                    // a stuck sub: the shared connection is remade
  });
}

void tunnel::disarm() { deadline_.disarm(); }

void tunnel::touch(const char* phase) { deadline_.touch(phase); }

std::optional<double> tunnel::path_rtt_ms() {
  switch (plan_.spec->kind) {
    case path_kind::direct:
    case path_kind::forward:
    case path_kind::tls:
    case path_kind::vless: break;
    case path_kind::http_connect:
    case path_kind::socks5:
    case path_kind::tun: return std::nullopt;
  }
  if (mux_ || !socket_.is_open()) return std::nullopt;
  const auto info = read_tcp_info(socket_.native_handle());
  if (!info || info->min_rtt_us == 0) return std::nullopt;
  return static_cast<double>(info->min_rtt_us) / 1e3;
}

void tunnel::close() {
  if (mux_) {
    if (sub_open_) mux_->end(sub_);  // queued: goes out before the next sample's clock starts
    if (owns_mux_) mux_->close();
    sub_open_ = false;
    mux_.reset();
  }
  open_ = false;
  std::error_code ignored;
  socket_.close(ignored);
  deadline_.disarm();
}

std::string tunnel::describe(const std::error_code& ec) const {
  if (ec.category() == vless::client_category()) {
    // XHTTP's refusals name the answer ("xhttp: the server refused a request: 404 Not Found").
    if (vless_ && vless_->xhttp() && !vless_->upgrade_error().empty())
      return ec.message() + ": " + vless_->upgrade_error();
    return ec.message();  // the whole reason
  }
  if (ec.category() == mux::category() && !deadline_.timed_out()) {
    if (ec == mux::errc::closed && mux_ && !mux_->failure().empty()) return "mux: " + mux_->failure();
    return ec.message();
  }
  return deadline_.describe(ec);
}

awaitable<std::error_code> tunnel::write_all(std::string_view data) {
  wrote_ = true;
  return tls_ ? tls_->write(data) : raw_write_all(data);
}

awaitable<std::error_code> tunnel::read_some(char* data, std::size_t size, std::size_t& n) {
  return tls_ ? tls_->read_some(data, size, n) : raw_read_some(data, size, n);
}

awaitable<std::error_code> tunnel::raw_write_all(std::string_view data) {
  if (mux_) return sub_open_ ? mux_->write(sub_, data) : mux_open(data);
  return vless_ ? vless_->write(data) : socket_write_all(data);
}

awaitable<std::error_code> tunnel::raw_read_some(char* data, std::size_t size, std::size_t& n) {
  if (mux_) return mux_->read_some(sub_, data, size, n);
  return vless_ ? vless_->read_some(data, size, n) : socket_read_some(data, size, n);
}

awaitable<std::error_code> tunnel::mux_open(std::string_view data) {
  sub_open_ = true;
  co_return co_await mux_->open(plan_.mux->dest, data, sub_);
}

awaitable<maybe_failure> tunnel::mux_connect() {
  touch("connect");
  if (const auto ec = co_await mux_->connect()) co_return failure{describe(ec)};
  touch("tls handshake");
  if (const auto ec = co_await mux_->handshake()) co_return failure{describe(ec)};
  // The shared connection's header goes alone, before any sample; an own one's with the first
  // sub unless the path splits writes.
  if (!owns_mux_ || plan_.vless.split_header) {
    touch("vless header");
    if (const auto ec = co_await mux_->send_header()) co_return failure{describe(ec)};
  }
  co_return std::nullopt;
}

// Reused samples on an xhttp h2 path: the shared HTTP/2 connection, made (or remade) here, and
// what earlier sessions left to send (their resets).
awaitable<maybe_failure> tunnel::prepare_xmux() {
  auto& path = *plan_.xmux;
  if (!path.shared || !path.shared->usable()) {
    path.shared.reset();
    const auto settings =
        xhttp::settings_for(plan_.vless.transport, vless::http_host(plan_.vless), plan_.vless.xhttp_post_interval);
    xmux_ = std::make_shared<xhttp::h2_connection>(socket_.get_executor(), settings);  // the watchdog closes it
    touch("xmux connection");
    if (const auto ec = co_await xmux_->connect(plan_.vless.server, *plan_.vless.tls_context, plan_.vless.tls,
                                                plan_.vless.nodelay)) {
      xmux_->close();
      xmux_.reset();
      co_return failure{"xmux connection: " + describe(ec)};
    }
    ++path.connections;
    path.shared = xmux_;
  }
  touch("xmux flush");
  if (const auto ec = co_await path.shared->flush()) {
    path.shared->close();
    co_return failure{"xmux connection: " + describe(ec)};
  }
  xmux_ = path.shared;
  co_return std::nullopt;
}

awaitable<maybe_failure> tunnel::prepare(bool new_connection) {
  if (plan_.xmux && !new_connection) co_return co_await prepare_xmux();
  if (!plan_.mux || (new_connection && plan_.mux->fresh_per_new)) co_return std::nullopt;
  bool made = false;
  mux_ = shared_connection(*plan_.mux, socket_.get_executor(), plan_.vless, made);
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

awaitable<std::error_code> tunnel::socket_write_all(std::string_view data) {
  auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(data.data(), data.size()), as_tuple_awaitable);
  (void)n;
  co_return ec;
}

awaitable<std::error_code> tunnel::socket_read_some(char* data, std::size_t size, std::size_t& n) {
  auto [ec, got] = co_await socket_.async_read_some(asio::buffer(data, size), as_tuple_awaitable);
  n = got;
  co_return ec;
}

awaitable<std::error_code> tunnel::read_more() {
  std::size_t n = 0;
  const auto ec = co_await read_some(scratch_.get(), scratch_size, n);
  in_.append(scratch_.get(), n);
  co_return ec;
}

awaitable<maybe_failure> tunnel::read_proxy_reply() {
  const auto kind = plan_.spec->kind;
  for (;;) {
    if (kind == path_kind::http_connect) {
      const auto r = http::parse_response(in_);
      if (r.complete()) {
        in_.erase(0, r.consumed);
        if (r.value.status / 100 != 2)
          co_return failure{"proxy: CONNECT answered " + std::to_string(r.value.status) + " " + r.value.reason};
        co_return std::nullopt;
      }
      if (r.invalid()) co_return failure{"proxy: bad CONNECT response: " + std::string(r.reason)};
    } else {
      const auto r = parse_socks5_connect_reply(in_);
      if (r.complete()) {
        in_.erase(0, r.consumed);
        co_return std::nullopt;
      }
      if (r.invalid()) co_return failure{std::string(r.reason)};
    }
    if (const auto ec = co_await read_more()) co_return failure{describe(ec)};
  }
}

awaitable<maybe_failure> tunnel::open() {
  if (!plan_.entry) co_return failure{plan_.entry_error};
  const auto kind = plan_.spec->kind;
  if (plan_.mux) {
    if (!mux_) {  // muxnew=connection: a mux connection of its own, inside the clock
      mux_ = std::make_shared<mux::connection>(socket_.get_executor(), plan_.vless);
      owns_mux_ = true;
      ++plan_.mux->connections;
      open_ = true;
      if (auto f = co_await mux_connect()) co_return f;
    }
    open_ = true;
    co_return std::nullopt;
  }
  if (xmux_) {  // a new XHTTP session on the shared HTTP/2 connection: no handshake
    vless_.emplace(socket_, plan_.vless);
    vless_->attach(xmux_);
    open_ = true;
    co_return std::nullopt;
  }
  touch("connect");
  if (kind == path_kind::vless || kind == path_kind::tls) {
    // The client applies the path's socket policy: only it may play Nagle-prone.
    vless_.emplace(socket_, plan_.vless);
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
  {
    auto [ec] = co_await socket_.async_connect(*plan_.entry, as_tuple_awaitable);
    if (ec) co_return failure{describe(ec)};
  }
  open_ = true;
  // The runner's own sockets send at once.
  std::error_code opt_ec;
  socket_.set_option(tcp::no_delay(true), opt_ec);

  if (kind == path_kind::http_connect) {
    touch("proxy connect");
    if (const auto ec = co_await write_all(plan_.proxy_request)) co_return failure{describe(ec)};
    if (auto f = co_await read_proxy_reply()) co_return f;
  } else if (kind == path_kind::socks5) {
    touch("socks5 greeting");
    if (const auto ec = co_await write_all(socks5_greeting())) co_return failure{describe(ec)};
    for (;;) {
      const auto r = parse_socks5_method_reply(in_);
      if (r.invalid()) co_return failure{std::string(r.reason)};
      if (r.complete()) {
        in_.erase(0, r.consumed);
        break;
      }
      if (const auto ec = co_await read_more()) co_return failure{describe(ec)};
    }
    touch("socks5 connect");
    if (const auto ec = co_await write_all(plan_.proxy_request)) co_return failure{describe(ec)};
    if (auto f = co_await read_proxy_reply()) co_return f;
  }
  co_return std::nullopt;
}

awaitable<maybe_failure> tunnel::start_tls() {
  touch("inner tls handshake");
  tls_ = std::make_unique<inner_tls>(
      *plan_.inner_tls_context, plan_.inner_tls, [this](std::string_view d) { return raw_write_all(d); },
      [this](char* d, std::size_t size, std::size_t& n) { return raw_read_some(d, size, n); });
  wrote_ = true;  // the ClientHello (with the VLESS header on vless paths)
  if (const auto ec = co_await tls_->handshake()) {
    reusable_ = false;
    const std::string why = tls_->last_error();
    co_return failure{describe(ec) + (why.empty() ? "" : " (" + why + ")")};
  }
  co_return std::nullopt;
}

awaitable<maybe_failure> tunnel::read_banner(banner_line& out, clock::time_point& first_byte) {
  if (vless_ && !wrote_ && !vless_->splits_header() && !plan_.vless.header.empty()) {
    touch("vless header");
    wrote_ = true;
    if (const auto ec = co_await vless_->write({})) co_return failure{describe(ec)};  // the header alone
  }
  if (mux_ && !sub_open_) {
    touch("mux new");
    wrote_ = true;
    if (const auto ec = co_await mux_open({})) co_return failure{describe(ec)};  // a New frame without data
  }
  touch("banner");
  bool first = in_.empty();
  if (!first) first_byte = clock::now();  // a proxy's reply brought it along
  for (;;) {
    const auto r = parse_banner_line(in_);
    if (r.complete()) {
      out = r.value;
      in_.erase(0, r.consumed);
      co_return std::nullopt;
    }
    if (r.invalid()) {
      reusable_ = false;
      co_return failure{"bad banner: " + std::string(r.reason)};
    }
    if (const auto ec = co_await read_more()) {
      reusable_ = false;
      co_return failure{describe(ec)};
    }
    if (first) {
      first = false;
      first_byte = clock::now();
    }
  }
}

awaitable<maybe_failure> tunnel::echo(std::string_view line) {
  touch("echo");
  if (const auto ec = co_await write_all(line)) {
    reusable_ = false;
    co_return failure{describe(ec)};
  }
  while (in_.size() < line.size()) {
    if (const auto ec = co_await read_more()) {
      reusable_ = false;
      co_return failure{describe(ec)};
    }
  }
  const bool same = std::string_view(in_).substr(0, line.size()) == line;
  in_.erase(0, line.size());
  if (!same) {
    reusable_ = false;
    co_return failure{"echo: the bytes that came back differ"};
  }
  co_return std::nullopt;
}

// size: the timed request (write, head, body) kept in one coroutine: no extra frame inside what it measures
awaitable<exchange_result> tunnel::exchange(const std::string& request, std::uint64_t upload_bytes) {
  exchange_result out;
  touch("request");
  // On a vless path the first request carries the VLESS header in the same TLS record.
  if (const auto ec = co_await write_all(request)) {
    reusable_ = false;
    out.error = failure{describe(ec)};
    co_return out;
  }
  if (upload_bytes > 0) {
    touch("request body");
    static const std::string block(scratch_size, 'u');
    for (std::uint64_t left = upload_bytes; left > 0;) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, block.size()));
      if (const auto ec = co_await write_all(std::string_view(block.data(), n))) {
        reusable_ = false;
        out.error = failure{describe(ec)};
        co_return out;
      }
      left -= n;
      touch("request body");
    }
  }

  touch("response head");
  std::size_t head_len = 0;
  for (;;) {
    // The VLESS response header never reaches in_: the client takes it off the first bytes.
    auto r = http::parse_response(in_);
    if (r.complete()) {
      head_len = r.consumed;
      out.head = std::move(r.value);
      break;
    }
    if (r.invalid()) {
      reusable_ = false;
      out.error = failure{"bad response: " + std::string(r.reason)};
      co_return out;
    }
    if (in_.size() > http::max_head_bytes) {
      reusable_ = false;
      out.error = failure{"bad response: head too large"};
      co_return out;
    }
    if (const auto rec = co_await read_more()) {
      reusable_ = false;
      out.error = failure{describe(rec)};
      co_return out;
    }
  }

  const auto& head = *out.head;
  if (!head.keep_alive) reusable_ = false;
  const bool no_body = head.status / 100 == 1 || head.status == 204 || head.status == 304;
  if (!no_body && !head.content_length) {
    // The daemon always sends Content-Length; anything else would make reuse ambiguous.
    reusable_ = false;
    out.error = failure{head.chunked ? "response is chunked (unsupported)" : "response has no Content-Length"};
    co_return out;
  }
  const std::uint64_t body = no_body ? 0 : *head.content_length;
  touch("response body");
  const std::uint64_t have = in_.size() - head_len;
  if (have >= body) {
    in_.erase(0, head_len + body);
    co_return out;
  }
  in_.clear();
  std::uint64_t remaining = body - have;
  // --timeout for each scratch block of the body, not for each read: a bulk body moves on, a body
  // dripped a byte at a time ends at the timeout like any stalled operation.
  std::uint64_t since_touch = 0;
  while (remaining > 0) {
    std::size_t n = 0;
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(remaining, scratch_size));
    if (const auto rec = co_await read_some(scratch_.get(), want, n)) {
      reusable_ = false;
      out.error = failure{describe(rec)};
      co_return out;
    }
    remaining -= n;
    since_touch += n;
    if (remaining > 0 && since_touch >= scratch_size) {
      touch("response body");
      since_touch = 0;
    }
  }
  co_return out;
}

}  // namespace vlessbench::runner
