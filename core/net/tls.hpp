#pragma once
// TLS contexts (BoringSSL through asio::ssl) for the daemon's listeners and the runner's client.
#include <string>

#include "core/net/asio_compat.hpp"
#include "core/net/tls_options.hpp"

namespace vlessbench::tls {

// Server context: certificate from cfg.cert/cfg.key, or an in-memory self-signed ECDSA P-256
// certificate for "localhost", 127.0.0.1 and ::1 when both are empty. ALPN http/1.1 is offered.
// Every ClientHello's JA4 is recorded on its SSL (ja4_received).
// Throws std::runtime_error with a reason (file missing, key mismatch, ...).
asio::ssl::context make_server_context(const tls_config& cfg);

// Makes a server connection's ALPN pick h2 (when the client offers it) instead of http/1.1:
// the gRPC listeners (transport = "grpc") speak HTTP/2 on the TLS context all listeners share.
void offer_h2(SSL* ssl);
// Makes it pick h2 when the client offers it, else http/1.1 (the XHTTP listeners serve both).
void offer_h2_and_http11(SSL* ssl);

struct client_options {
  bool verify = false;  // false = allowInsecure
  std::string sni;      // empty = no SNI
  std::string alpn = "http/1.1";
  bool tls13_only = false;
};
asio::ssl::context make_client_context(const client_options& opts);
// Applies per-connection client settings (SNI) to a fresh stream's SSL*.
void prepare_client(SSL* ssl, const client_options& opts);

// Version / cipher / ALPN / SNI of an established connection, for logs.
std::string version_name(const SSL* ssl);
std::string cipher_name(const SSL* ssl);
std::string alpn_selected(const SSL* ssl);
std::string sni_received(const SSL* ssl);
// The JA4 fingerprint (core/wire/ja4.hpp) of the ClientHello a server-side SSL received, recorded by
// the server context's early ClientHello callback; "" before one arrived or when the parser
// refused it (the handshake goes on either way: BoringSSL has accepted that ClientHello).
std::string ja4_received(const SSL* ssl);
// The same ClientHello's supported groups and key share groups, by name (core/wire/reality.hpp:
// group_name), comma-separated in the client's order, GREASE left out ("X25519MLKEM768,X25519").
std::string groups_received(const SSL* ssl);
std::string key_shares_received(const SSL* ssl);

#ifdef OPENSSL_IS_BORINGSSL
namespace detail {
// The daemon's context's callbacks, shared with REALITY's context (core/net/reality_auth.hpp).
ssl_select_cert_result_t record_client_hello(const SSL_CLIENT_HELLO* hello);
int select_alpn_cb(SSL* ssl, const uint8_t** out, uint8_t* out_len, const uint8_t* in, unsigned in_len, void* arg);
}  // namespace detail
#endif

// Self-signed certificate and key in PEM, for tests and persisted certificates.
struct pem_pair {
  std::string cert;
  std::string key;
};
pem_pair make_self_signed(const std::vector<std::string>& dns_names, const std::vector<std::string>& ip_addresses);

// What start will find at cfg.cert / cfg.key, judged without writing anything (`vlessbenchd
// --check`, and make_server_context and ensure_certificate before they open a file): each file
// readable, PEM, the key the certificate's; with cfg.generate and a file missing, a folder the
// daemon can write both into. A problem's message names the key and the file and says what to do.
struct certificate_check {
  enum class state { ok, will_generate, problem };
  state result = state::ok;
  std::string message;  // will_generate: where the certificate will be written; problem: the reason
};
certificate_check check_certificate_files(const tls_config& cfg);

// With cfg.generate: writes a self-signed certificate to cfg.cert / cfg.key unless both exist.
// SANs: cfg.names, localhost, the host name and every address of this machine. Returns true when
// it generated one. Throws std::runtime_error naming the file on I/O errors.
bool ensure_certificate(const tls_config& cfg);

// SHA-256 of the DER certificate in a PEM file, lower-case hex (what mihomo's `fingerprint` pins).
std::string certificate_sha256(const std::string& pem_file);

}  // namespace vlessbench::tls
