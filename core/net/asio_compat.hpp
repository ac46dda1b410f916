#pragma once
// The one place that knows which Asio we build against (Debian 12: 1.22). Newer Asio moved
// these names out of experimental::; moving is a change to this file only.
#include <openssl/crypto.h>
// The daemon is built against BoringSSL only; the runner's client half may also use OpenSSL 3.
#if !defined(OPENSSL_IS_BORINGSSL) && !defined(VLESSBENCH_CLIENT_OPENSSL)
#error "vlessbench is built against BoringSSL: put /usr/include/android before the OpenSSL headers"
#endif
#include <asio.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/ssl.hpp>

namespace vlessbench {
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
constexpr auto as_tuple_awaitable = asio::experimental::as_tuple(asio::use_awaitable);
using namespace asio::experimental::awaitable_operators;
}  // namespace vlessbench
