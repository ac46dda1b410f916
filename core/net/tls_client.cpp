// The client half of core/net/tls.hpp: portable to OpenSSL 3 (the runner's macOS build), so it uses
// only calls both libraries have.
#include "core/net/tls.hpp"

namespace vlessbench::tls {

asio::ssl::context make_client_context(const client_options& opts) {
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  SSL_CTX* native = ctx.native_handle();
  SSL_CTX_set_min_proto_version(native, opts.tls13_only ? TLS1_3_VERSION : TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(native, TLS1_3_VERSION);
  // Every new-connection sample must pay a full handshake, as a fresh client would.
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  if (!opts.alpn.empty()) {
    std::string wire(1, static_cast<char>(opts.alpn.size()));
    wire += opts.alpn;
    SSL_CTX_set_alpn_protos(native, reinterpret_cast<const uint8_t*>(wire.data()), wire.size());
  }
  if (opts.verify) {
    ctx.set_default_verify_paths();
    ctx.set_verify_mode(asio::ssl::verify_peer);
  } else {
    ctx.set_verify_mode(asio::ssl::verify_none);
  }
  return ctx;
}

void prepare_client(SSL* ssl, const client_options& opts) {
  if (!opts.sni.empty()) SSL_set_tlsext_host_name(ssl, opts.sni.c_str());
}

std::string version_name(const SSL* ssl) { return SSL_get_version(ssl); }

std::string cipher_name(const SSL* ssl) {
  const SSL_CIPHER* c = SSL_get_current_cipher(ssl);
  return c ? SSL_CIPHER_standard_name(c) : "";
}

std::string alpn_selected(const SSL* ssl) {
  const uint8_t* data = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(ssl, &data, &len);
  return std::string(reinterpret_cast<const char*>(data), len);
}

std::string sni_received(const SSL* ssl) {
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  return name ? name : "";
}

}  // namespace vlessbench::tls
