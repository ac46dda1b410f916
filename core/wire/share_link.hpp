#pragma once
// vless:// share links (the v2rayN / Shadowrocket import format):
//   vless://UUID@HOST:PORT?encryption=none&security=tls&sni=NAME&allowInsecure=1&type=tcp#NAME
// Transports: type=ws (path=, host=, ed=N for early data), type=httpupgrade (path=, host=) and
// type=grpc (serviceName=, "gun" over HTTP/2); those three may also run over plain TCP
// (security=none; grpc is then h2c), behind a proxy that terminates TLS.
// Xray's form of early data in the path (path=/ws?ed=2048) is read as ed=2048.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/wire/transport_spec.hpp"
#include "core/wire/uuid.hpp"

namespace vlessbench {

// security=reality's parameters (Xray's link form): pbk= the server's X25519 public key
// (base64url), sid= a short id (hex), fp= the uTLS fingerprint the client imitates. sni= is the
// link's sni.
struct reality_params {
  std::string public_key;
  std::string short_id;
  std::string fingerprint = "chrome";
  bool operator==(const reality_params&) const = default;
};

struct share_link {
  uuid_bytes uuid{};
  std::string host;  // without brackets for IPv6
  std::uint16_t port = 0;
  std::string sni;  // empty: none
  bool allow_insecure = false;
  std::string flow;  // empty, or xtls-rprx-vision (type=tcp, security=tls only)
  // security=, type=, path=, host=, ed=, serviceName=, mode= (core/wire/transport_spec.hpp)
  transport_spec transport;
  std::string name;                       // fragment, percent-decoded
  std::optional<reality_params> reality;  // security=reality (raw TCP or grpc; transport.tls is true)
  bool operator==(const share_link&) const = default;
};

// Returns nullopt and sets reason on any malformation (bad uuid, port, scheme, unsupported type...).
std::optional<share_link> parse_share_link(std::string_view text, std::string& reason);
std::string format_share_link(const share_link& link);

}  // namespace vlessbench
