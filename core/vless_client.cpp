#include "core/vless_client.hpp"

#include <algorithm>
#include <cstring>

namespace vlessbench::vless {

request_header tcp_request(const uuid_bytes& uuid, std::string_view host, std::uint16_t port) {
  request_header h;
  h.uuid = uuid;
  h.command = static_cast<std::uint8_t>(command::tcp);
  h.port = port;
  std::error_code ec;
  const auto addr = asio::ip::make_address(std::string(host), ec);
  if (!ec && addr.is_v4()) {
    h.atyp = address_type::ipv4;
    const auto b = addr.to_v4().to_bytes();
    std::copy(b.begin(), b.end(), h.ip.begin());
  } else if (!ec && addr.is_v6()) {
    h.atyp = address_type::ipv6;
    const auto b = addr.to_v6().to_bytes();
    std::copy(b.begin(), b.end(), h.ip.begin());
  } else {
    h.atyp = address_type::domain;
    h.domain = std::string(host);
  }
  return h;
}

client_plan make_client_plan(const tcp::endpoint& server, const tls::client_options& tls,
                             const request_header& request) {
  client_plan plan;
  plan.server = server;
  plan.tls = tls;
  plan.tls_context = std::make_shared<asio::ssl::context>(tls::make_client_context(tls));
  plan.header = encode_request(request);
  return plan;
}

namespace {

class client_category_impl : public std::error_category {
 public:
  const char* name() const noexcept override { return "vless client"; }
  std::string message(int e) const override {
    return e == static_cast<int>(client_errc::bad_response) ? "vless response: bad_version" : "vless client error";
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
  tls_.emplace(socket_, *plan_.tls_context);
  tls::prepare_client(tls_->native_handle(), plan_.tls);
  auto [ec] = co_await tls_->async_handshake(asio::ssl::stream_base::client, as_tuple_awaitable);
  if (ec) co_return ec;
  header_pending_ = !plan_.split_header;
  response_pending_ = true;
  co_return std::error_code{};
}

awaitable<std::error_code> client::send_header() {
  auto [ec, n] = co_await asio::async_write(*tls_, asio::buffer(plan_.header), as_tuple_awaitable);
  (void)n;
  co_return ec;
}

awaitable<std::error_code> client::write(std::string_view data) {
  std::string_view out = data;
  if (header_pending_) {
    header_pending_ = false;
    out_.reserve(plan_.header.size() + data.size());
    out_ = plan_.header;
    out_ += data;
    out = out_;
  }
  auto [ec, n] = co_await asio::async_write(*tls_, asio::buffer(out.data(), out.size()), as_tuple_awaitable);
  (void)n;
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
    auto [ec, got] = co_await tls_->async_read_some(asio::buffer(data, size), as_tuple_awaitable);
    n = got;
    if (ec || !response_pending_) co_return ec;
    if (!strip_response(data, n)) {
      n = 0;
      co_return make_error_code(client_errc::bad_response);
    }
    if (n > 0) co_return std::error_code{};
  }
}

}  // namespace vlessbench::vless
