#include "server/vless_server.hpp"

#include <array>

#include "core/log/access_events.hpp"
#include "core/net/policy_stream.hpp"
#include "core/runtime/pending_set.hpp"
#include "server/transport/grpc_connection.hpp"
#include "server/transport/httpupgrade_stream.hpp"
#include "server/transport/opened_stream.hpp"
#include "server/transport/plain_stream.hpp"
#include "server/transport/tls_stream.hpp"
#include "server/transport/vision_stream.hpp"
#include "server/transport/ws_stream.hpp"
#include "server/transport/xhttp_h1.hpp"
#include "server/transport/xhttp_h2_connection.hpp"
#include "server/vless_session.hpp"

namespace vlessbench::vless_server {

std::string_view to_string(close_reason r) {
  switch (r) {
    case close_reason::client_eof: return "client_eof";
    case close_reason::upstream_eof: return "upstream_eof";
    case close_reason::client_error: return "client_error";
    case close_reason::upstream_error: return "upstream_error";
    case close_reason::timeout: return "timeout";
    case close_reason::rejected: return "rejected";
    case close_reason::drain: return "drain";
    case close_reason::user_removed: return "user_removed";
    case close_reason::slow_transfer: return "slow_transfer";
    case close_reason::udp_packet_too_large: return "udp_packet_too_large";
    case close_reason::udp_truncated_packet: return "udp_truncated_packet";
    case close_reason::mux_error: return "mux_error";
  }
  return "unknown";
}

listener_snapshot listener_snapshot::of(std::shared_ptr<listener_runtime> l, std::shared_ptr<asio::ssl::context> tls,
                                        std::shared_ptr<const config> cfg) {
  listener_snapshot s{.tls = std::move(tls),
                      .cfg = std::move(cfg),
                      .listener_name = l->name,
                      .transport = l->transport,
                      .policy = l->tcp.load(),
                      .upstream_policy = l->upstream_tcp.load(),
                      .generation = l->generation,
                      .emulate = l->emulate};
  s.listener = std::move(l);
  return s;
}

namespace {

// Over TLS or plain TCP: Stream<tls_stream> or Stream<plain_stream>.
template <template <class> class Stream>
awaitable<void> serve_upgraded(runtime& rt, session_start start, tcp::socket socket, transport_spec t) {
  if (t.tls) {
    return detail::serve<Stream<tls_stream>>(
        rt, std::move(start), std::move(socket),
        [t = std::move(t)](listener_runtime& l, asio::ssl::context& tls, tcp::socket s) {
          return Stream<tls_stream>(t, policy_stream(std::move(s), &l.tcp), tls);
        });
  }
  return detail::serve<Stream<plain_stream>>(
      rt, std::move(start), std::move(socket),
      [t = std::move(t)](listener_runtime& l, asio::ssl::context&, tcp::socket s) {
        return Stream<plain_stream>(t, policy_stream(std::move(s), &l.tcp));
      });
}

// A connection's place in the pending set ends with its coroutine however that ends (the hooks
// that hold its ticket may outlive it).
struct pending_leaver {
  explicit pending_leaver(session_start& s) : start(s) {}
  pending_leaver(const pending_leaver&) = delete;
  pending_leaver& operator=(const pending_leaver&) = delete;
  ~pending_leaver() { start.pending.leave(); }
  session_start& start;
};

// A gRPC connection's session ids (on its executor only).
class connection_ids {
 public:
  explicit connection_ids(std::uint64_t accepted) : accepted_(accepted) {}
  std::uint64_t take(runtime& rt) { return accepted_ != 0 ? std::exchange(accepted_, 0) : rt.next_session_id++; }
  // The id taken at accept has no line yet.
  bool unused() const { return accepted_ != 0; }

 private:
  std::uint64_t accepted_;
};

// A gRPC listener's connection (server/transport/grpc_connection.hpp): every stream it accepts
// becomes a session of its own (its own id, pending ticket and log line), served on its
// socketpair end by the same session template as every other transport.
template <class Lower, class... LowerArgs>
awaitable<void> serve_grpc_on(runtime& rt, std::shared_ptr<session_start> start, grpc::connection_limits limits,
                              std::string service_name, asio::any_io_executor ex, LowerArgs... lower) {
  grpc::connection_hooks hooks;
  // The id taken at accept goes to the connection's first line (its first stream's session or
  // its reject), every later line takes a new one: each id in the log, none without a line.
  auto ids = std::make_shared<connection_ids>(start->session_id);
  hooks.serve_stream = [&rt, start, ex, ids](tcp::socket end, const transport::facts& facts,
                                             std::shared_ptr<const grpc::h2_stream> stream) {
    // The connection's snapshot and budget ([limits] max_upstreams_per_connection), a stream's own id and ticket.
    session_start s{*start, ids->take(rt), start->client,
                    rt.pending.admit(ex, pending_cap(start->cfg->limits.max_pending, nofile_limit())), start->budget};
    asio::co_spawn(
        ex,
        detail::serve<grpc_stream>(rt, std::move(s), std::move(end),
                                   [facts, stream](listener_runtime& l, asio::ssl::context&, tcp::socket sock) {
                                     return grpc_stream(policy_stream(std::move(sock), &l.tcp), facts, stream);
                                   }),
        [](std::exception_ptr e) {
          if (e) spdlog::error("grpc stream session: unexpected exception");
        });
  };
  hooks.reject = [&rt, start, ids](std::string_view reason, std::string_view detail) {
    const auto client = format_endpoint(start->client);
    rt.events.emit(vless_reject_event{.session = ids->take(rt),
                                      .listener = start->listener_name,
                                      .client = client,
                                      .reason = reason,
                                      .phase = "h2",
                                      .detail = detail});
    spdlog::debug("vless {} grpc connection from {}: {} ({})", start->listener_name, client, reason, detail);
  };
  hooks.first_stream = [start] { start->pending.leave(); };
  auto conn =
      std::make_shared<grpc::connection<Lower>>(std::move(service_name), limits, std::move(hooks), std::move(lower)...);
  if constexpr (std::is_same_v<Lower, tls_stream>) tls::offer_h2(conn->lower().native_handle());
  if (auto err = apply_on_open(conn->socket().native_handle(), start->policy))
    spdlog::warn("vless {}: setsockopt: {}", start->listener_name, err.message());
  const connection_registration registered(rt.connections, ex, [conn](bool force) { conn->drain(force); });
  // The pending set keeps its closer for as long as the connection is pending, and the
  // connection's hooks own the ticket (in start): a closer owning the connection would be a
  // cycle that a connection without a stream never breaks. It leaves the set when it ends, too.
  const pending_leaver leaver{*start};
  auto evict = [weak = std::weak_ptr(conn)] {
    if (auto c = weak.lock()) c->drain(true);
  };
  if (!start->pending.arm(evict)) evict();
  // clang-tidy 14 reports the moved parameters on the next line, in a function template
  // coroutine only (as in vless_session.hpp); nothing on that line names them.
  // NOLINTNEXTLINE(bugprone-use-after-move)
  co_await conn->run();
}

awaitable<void> serve_grpc(runtime& rt, session_start start, tcp::socket socket, const transport_spec& t) {
  grpc::connection_limits limits;
  limits.handshake_timeout = start.cfg->limits.handshake_timeout;
  limits.idle_timeout = start.cfg->limits.idle_timeout;
  auto shared = std::make_shared<session_start>(std::move(start));
  const asio::any_io_executor ex = socket.get_executor();
  policy_stream next(std::move(socket), &shared->listener->tcp);
  // The context outlives the connection: the stream sessions' starts (in its hooks) hold it.
  if (t.tls)
    return serve_grpc_on<tls_stream>(rt, shared, limits, t.service_name, ex, std::move(next), std::ref(*shared->tls));
  return serve_grpc_on<plain_stream>(rt, shared, limits, t.service_name, ex, std::move(next));
}

// A listener's XHTTP sessions outlive the connection whose request made them (the GET and the
// POSTs may come on different connections): one hub per listener, held by its connections and
// its sessions' reapers (server/transport/xhttp_session.hpp), never past the io_context.
std::shared_ptr<xhttp::hub> xhttp_hub_of(runtime& rt, const std::shared_ptr<listener_runtime>& l) {
  // One per thread: a hub serves one executor; with [limits] threads > 1 the daemon accepts every
  // connection of an XHTTP listener into one context (daemon::accept_loop), so all a session's
  // requests find it.
  thread_local std::map<std::weak_ptr<listener_runtime>, std::weak_ptr<xhttp::hub>, std::owner_less<>> hubs;
  std::erase_if(hubs, [](const auto& e) { return e.first.expired() || e.second.expired(); });
  auto h = hubs[l].lock();
  if (!h) {
    h = std::make_shared<xhttp::hub>();
    hubs[l] = h;
    h->reject = [&rt, name = l->name](const xhttp::session_state& s, std::string_view reason, std::string_view detail) {
      const std::string text = "session " + s.id + ": " + std::string(detail);
      rt.events.emit(vless_reject_event{.session = rt.next_session_id++,
                                        .listener = name,
                                        .client = s.client,
                                        .reason = reason,
                                        .phase = "xhttp",
                                        .detail = text});
    };
  }
  return h;
}

// The hooks of an XHTTP listener's connection: every session its requests complete becomes a
// VLESS session of its own (its own id, pending ticket and log line), served on its socketpair end
// by the same session template as every other transport.
xhttp::connection_hooks xhttp_hooks(runtime& rt, const std::shared_ptr<session_start>& start,
                                    const asio::any_io_executor& ex) {
  xhttp::connection_hooks hooks;
  auto ids = std::make_shared<connection_ids>(start->session_id);
  hooks.serve = [&rt, start, ex, ids](tcp::socket end, const transport::facts& facts,
                                      std::shared_ptr<xhttp::session_state> state) {
    session_start s{*start, ids->take(rt), start->client,
                    rt.pending.admit(ex, pending_cap(start->cfg->limits.max_pending, nofile_limit())), start->budget};
    s.began = state->created;
    asio::co_spawn(
        ex,
        detail::serve<xhttp_stream>(rt, std::move(s), std::move(end),
                                    [facts, state](listener_runtime& l, asio::ssl::context&, tcp::socket sock) {
                                      return xhttp_stream(policy_stream(std::move(sock), &l.tcp), facts, state);
                                    }),
        [](std::exception_ptr e) {
          if (e) spdlog::error("xhttp session: unexpected exception");
        });
  };
  auto reject = [&rt, start, ids](std::string_view reason, std::string_view detail) {
    const auto client = format_endpoint(start->client);
    rt.events.emit(vless_reject_event{.session = ids->take(rt),
                                      .listener = start->listener_name,
                                      .client = client,
                                      .reason = reason,
                                      .phase = "xhttp",
                                      .detail = detail});
    spdlog::debug("vless {} xhttp connection from {}: {} ({})", start->listener_name, client, reason, detail);
  };
  hooks.reject = reject;
  hooks.first_request = [start] { start->pending.leave(); };
  hooks.ended = [&rt, start, ids](std::string_view http, std::optional<std::uint64_t> posts) {
    if (!ids->unused()) return;
    const auto client = format_endpoint(start->client);
    rt.events.emit(xhttp_connection_event{
        .session = ids->take(rt), .listener = start->listener_name, .client = client, .http = http, .posts = posts});
  };
  return hooks;
}

// Which HTTP an XHTTP connection speaks: HTTP/2 when its first bytes are HTTP/2's preface, over
// TLS (whose ALPN offers h2 first, then http/1.1) and plain TCP alike (h2c with prior knowledge).
// The bytes decide, not the ALPN: Xray with a uTLS fingerprint offers h2 in its ClientHello and
// speaks HTTP/1.1 when its config says so. The bytes read to decide are kept in first.
// nullopt: the handshake failed or the client went before saying enough.
template <class Lower>
awaitable<std::optional<bool>> xhttp_speaks_h2(Lower& lower, std::string& first) {
  if constexpr (std::is_same_v<Lower, tls_stream>) {
    session_phases phases;
    if (co_await lower.open(transport::open_clock{phases, steady_clock::now()})) co_return std::nullopt;
  }
  constexpr std::string_view preface = "PRI * HTTP/2.0";
  std::array<char, 4096> buf{};
  while (first.size() < preface.size() && preface.starts_with(first)) {
    auto [ec, n] = co_await lower.async_read_some(asio::buffer(buf), as_tuple_awaitable);
    if (ec) co_return std::nullopt;
    first.append(buf.data(), n);
  }
  co_return std::string_view(first).starts_with(preface);
}

template <class Lower>
awaitable<void> xhttp_opening(Lower& lower, std::optional<bool>& h2, std::string& first) {
  h2 = co_await xhttp_speaks_h2(lower, first);
}

// Serves the connection as HTTP/2 (server/transport/xhttp_h2_connection.hpp) or HTTP/1.1
// (xhttp_h1.hpp) over the opened stream; drains and evictions reach it through `route`.
template <template <class> class Connection, class Stream>
awaitable<void> run_xhttp_connection(runtime& rt, const std::shared_ptr<session_start>& start,
                                     xhttp::connection_limits limits, xhttp::connection_hooks hooks, Stream stream,
                                     std::function<void(bool)>& route) {
  const auto ended = hooks.ended;
  auto conn = std::make_shared<Connection<Stream>>(xhttp_hub_of(rt, start->listener), start->transport, limits,
                                                   std::move(hooks), start->client, std::move(stream));
  route = [weak = std::weak_ptr(conn)](bool force) {
    if (auto c = weak.lock()) c->drain(force);
  };
  // clang-tidy 14 reports the moved parameters on the next line, in a function template
  // coroutine only (as in vless_session.hpp); nothing on that line names them.
  // NOLINTNEXTLINE(bugprone-use-after-move)
  co_await conn->run();
  // A connection that carried only uplink POSTs (another connection's GET runs their session)
  // still ends its id with a line.
  if constexpr (requires { conn->posts(); })
    ended("1.1", conn->posts());
  else
    ended("2", std::nullopt);
}

// An XHTTP listener's connection: the opening (the TLS handshake, the first bytes) under the
// handshake deadline, then the connection of the HTTP it speaks.
template <class Lower, class... LowerArgs>
awaitable<void> serve_xhttp_on(runtime& rt, std::shared_ptr<session_start> start, xhttp::connection_limits limits,
                               asio::any_io_executor ex, LowerArgs... lower) {
  auto hooks = xhttp_hooks(rt, start, ex);
  auto stream = std::make_shared<Lower>(std::move(lower)...);
  if constexpr (std::is_same_v<Lower, tls_stream>) tls::offer_h2_and_http11(stream->native_handle());
  if (auto err = apply_on_open(stream->socket().native_handle(), start->policy))
    spdlog::warn("vless {}: setsockopt: {}", start->listener_name, err.message());
  // Until the connection is chosen a drain or an eviction closes the socket.
  auto route = std::make_shared<std::function<void(bool)>>([weak = std::weak_ptr(stream)](bool) {
    if (auto s = weak.lock()) {
      std::error_code ignored;
      s->socket().close(ignored);
    }
  });
  const connection_registration registered(rt.connections, ex, [route](bool force) { (*route)(force); });
  const pending_leaver leaver{*start};
  auto evict = [weak = std::weak_ptr(route)] {
    if (auto r = weak.lock()) (*r)(true);
  };
  if (!start->pending.arm(evict)) evict();
  watchdog_deadline deadline;
  deadline = steady_clock::now() + limits.handshake_timeout;
  std::optional<bool> h2;
  std::string first;
  co_await (xhttp_opening(*stream, h2, first) || watchdog(deadline, [&] {
              std::error_code ignored;
              stream->socket().close(ignored);
            }));
  if (!h2) {
    hooks.reject(stream->failure().value_or(stream->socket().is_open() ? "client_closed" : "handshake_timeout"), "");
    co_return;
  }
  opened_stream<Lower> opened(stream, std::move(first));
  if (*h2)
    co_await run_xhttp_connection<xhttp::h2_connection>(rt, start, limits, std::move(hooks), std::move(opened), *route);
  else
    co_await run_xhttp_connection<xhttp::h1_connection>(rt, start, limits, std::move(hooks), std::move(opened), *route);
}

awaitable<void> serve_xhttp(runtime& rt, session_start start, tcp::socket socket, const transport_spec& t) {
  xhttp::connection_limits limits;
  limits.handshake_timeout = start.cfg->limits.handshake_timeout;
  limits.idle_timeout = start.cfg->limits.idle_timeout;
  limits.body_timeout = start.cfg->limits.handshake_timeout;
  auto shared = std::make_shared<session_start>(std::move(start));
  const asio::any_io_executor ex = socket.get_executor();
  policy_stream next(std::move(socket), &shared->listener->tcp);
  if (t.tls) return serve_xhttp_on<tls_stream>(rt, shared, limits, ex, std::move(next), std::ref(*shared->tls));
  return serve_xhttp_on<plain_stream>(rt, shared, limits, ex, std::move(next));
}

}  // namespace

// The listener's transport picks the session's.
awaitable<void> serve_session(runtime& rt, session_start start, tcp::socket socket) {
  transport_spec t = start.transport;
  switch (t.kind) {
    case transport_kind::ws: return serve_upgraded<ws_stream>(rt, std::move(start), std::move(socket), std::move(t));
    case transport_kind::httpupgrade:
      return serve_upgraded<httpupgrade_stream>(rt, std::move(start), std::move(socket), std::move(t));
    case transport_kind::grpc: return serve_grpc(rt, std::move(start), std::move(socket), t);
    case transport_kind::xhttp: return serve_xhttp(rt, std::move(start), std::move(socket), t);
    case transport_kind::tls: break;
  }
  // Raw TLS, with XTLS Vision when a request names it (server/transport/vision_stream.hpp).
  return detail::serve<vision_stream>(rt, std::move(start), std::move(socket),
                                      [](listener_runtime& l, asio::ssl::context& tls, tcp::socket s) {
                                        return vision_stream(policy_stream(std::move(s), &l.tcp), tls);
                                      });
}

}  // namespace vlessbench::vless_server
