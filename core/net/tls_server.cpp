// The server half of core/net/tls.hpp: BoringSSL only (the daemon).
#include "core/net/tls.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/digest.h>
#include <spdlog/spdlog.h>

#include "core/net/reality_auth.hpp"
#include "core/wire/ja4.hpp"

#include <openssl/bio.h>
#include <openssl/ec_key.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace vlessbench::tls {
namespace {

template <class T, void (*F)(T*)>
struct deleter {
  void operator()(T* p) const { F(p); }
};
using pkey_ptr = std::unique_ptr<EVP_PKEY, deleter<EVP_PKEY, EVP_PKEY_free>>;
using x509_ptr = std::unique_ptr<X509, deleter<X509, X509_free>>;
using bio_ptr = std::unique_ptr<BIO, deleter<BIO, BIO_free_all>>;
using ec_key_ptr = std::unique_ptr<EC_KEY, deleter<EC_KEY, EC_KEY_free>>;
using ext_ptr = std::unique_ptr<X509_EXTENSION, deleter<X509_EXTENSION, X509_EXTENSION_free>>;

[[noreturn]] void fail(const std::string& what) {
  char buf[256] = "unknown error";
  if (unsigned long e = ERR_get_error(); e != 0) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  throw std::runtime_error(what + ": " + buf);
}

std::string bio_string(BIO* bio) {
  const uint8_t* data = nullptr;
  size_t len = 0;
  BIO_mem_contents(bio, &data, &len);
  return std::string(reinterpret_cast<const char*>(data), len);
}

// ALPN preference lists: protocols in wire format (length byte, name), best first, ended by 0.
constexpr unsigned char alpn_http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1', 0};
constexpr unsigned char alpn_h2[] = {2, 'h', '2', 0};
constexpr unsigned char alpn_h2_http11[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1', 0};

// The ex_data slot offer_h2 (and offer_h2_and_http11) marks a connection with: its preference list.
int h2_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// Server side of ALPN: pick http/1.1 when the client offers it (h2 instead on a gRPC listener's
// connection, h2 first then http/1.1 on an XHTTP listener's), otherwise negotiate none (a client
// that offers only h2 still gets a connection; VLESS does not care).
int select_alpn(SSL* ssl, const uint8_t** out, uint8_t* out_len, const uint8_t* in, unsigned in_len, void*) {
  const auto* marked = static_cast<const unsigned char*>(SSL_get_ex_data(ssl, h2_index()));
  for (const unsigned char* want = marked != nullptr ? marked : alpn_http11; want[0] != 0; want += 1 + want[0]) {
    for (unsigned i = 0; i < in_len;) {
      unsigned len = in[i];
      if (i + 1 + len > in_len) break;
      if (len == want[0] && std::equal(in + i + 1, in + i + 1 + len, want + 1)) {
        *out = in + i + 1;
        *out_len = static_cast<uint8_t>(len);
        return SSL_TLSEXT_ERR_OK;
      }
      i += 1 + len;
    }
  }
  return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

int detail::select_alpn_cb(SSL* ssl, const uint8_t** out, uint8_t* out_len, const uint8_t* in, unsigned in_len,
                           void* arg) {
  return select_alpn(ssl, out, out_len, in, in_len, arg);
}

void offer_h2(SSL* ssl) { SSL_set_ex_data(ssl, h2_index(), const_cast<unsigned char*>(alpn_h2)); }
void offer_h2_and_http11(SSL* ssl) { SSL_set_ex_data(ssl, h2_index(), const_cast<unsigned char*>(alpn_h2_http11)); }

namespace {
// What the SSL's ClientHello said (JA4, groups, key shares), owned by the SSL through ex_data and
// freed with it.
struct hello_record {
  std::string ja4;
  std::string groups;      // supported_groups by name, comma-separated, in order
  std::string key_shares;  // key_share groups by name, comma-separated, in order
};

int ja4_index() {
  static const int index = SSL_get_ex_new_index(
      0, nullptr, nullptr, nullptr,
      [](void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) { delete static_cast<hello_record*>(ptr); });
  return index;
}

std::string names(const std::vector<std::uint16_t>& groups) {
  std::string out;
  for (const auto g : groups) {
    if (reality::group_name(g) == "GREASE") continue;
    if (!out.empty()) out += ',';
    out += reality::group_name(g);
  }
  return out;
}

const hello_record* hello_of(const SSL* ssl) {
  const int index = ja4_index();
  if (ssl == nullptr || index < 0) return nullptr;
  return static_cast<const hello_record*>(SSL_get_ex_data(ssl, index));
}

// Runs before BoringSSL acts on the ClientHello. It only records: whatever the parser makes of
// the bytes, the handshake continues. A HelloRetryRequest's second ClientHello keeps the first's.
ssl_select_cert_result_t record_ja4(const SSL_CLIENT_HELLO* hello) { return detail::record_client_hello(hello); }

}  // namespace

ssl_select_cert_result_t detail::record_client_hello(const SSL_CLIENT_HELLO* hello) {
  const int index = ja4_index();
  if (index < 0 || SSL_get_ex_data(hello->ssl, index) != nullptr) return ssl_select_cert_success;
  try {
    auto rec = std::make_unique<hello_record>();
    const auto parsed = parse_client_hello(std::span(hello->client_hello, hello->client_hello_len));
    if (parsed.complete()) {
      rec->ja4 = ja4_fingerprint(parsed.value);
      rec->groups = names(parsed.value.supported_groups);
      std::vector<std::uint16_t> shares;
      for (const auto& k : parsed.value.key_shares) shares.push_back(k.group);
      rec->key_shares = names(shares);
    } else {
      spdlog::debug("ja4: ClientHello not fingerprinted: {}", parsed.reason);
    }
    if (SSL_set_ex_data(hello->ssl, index, rec.get())) (void)rec.release();
  } catch (const std::exception&) {  // out of memory: no fingerprint, the connection goes on
  }
  return ssl_select_cert_success;
}

namespace {

uint16_t to_protocol_version(const std::string& v) { return v == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION; }

}  // namespace

pem_pair make_self_signed(const std::vector<std::string>& dns_names, const std::vector<std::string>& ip_addresses) {
  ec_key_ptr ec(EC_KEY_new_by_curve_name(NID_X9_62_prime256v1));
  if (!ec || !EC_KEY_generate_key(ec.get())) fail("generating EC key");
  pkey_ptr key(EVP_PKEY_new());
  if (!key || !EVP_PKEY_assign_EC_KEY(key.get(), ec.release())) fail("wrapping EC key");

  x509_ptr cert(X509_new());
  if (!cert) fail("X509_new");
  X509_set_version(cert.get(), 2);
  uint8_t serial_bytes[16];
  RAND_bytes(serial_bytes, sizeof serial_bytes);
  serial_bytes[0] &= 0x7f;  // positive
  BIGNUM* serial = BN_bin2bn(serial_bytes, sizeof serial_bytes, nullptr);
  BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get()));
  BN_free(serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 365L * 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  const std::string cn = dns_names.empty() ? "vlessbench" : dns_names.front();
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const uint8_t*>(cn.c_str()), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const uint8_t*>("vlessbench"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);

  std::string san;
  for (const auto& d : dns_names) san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
  for (const auto& ip : ip_addresses) san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
  if (!san.empty()) {
    ext_ptr ext(X509V3_EXT_nconf_nid(nullptr, nullptr, NID_subject_alt_name, san.c_str()));
    if (!ext || !X509_add_ext(cert.get(), ext.get(), -1)) fail("adding subjectAltName " + san);
  }
  if (!X509_sign(cert.get(), key.get(), EVP_sha256())) fail("signing certificate");

  bio_ptr cert_bio(BIO_new(BIO_s_mem()));
  bio_ptr key_bio(BIO_new(BIO_s_mem()));
  if (!PEM_write_bio_X509(cert_bio.get(), cert.get()) ||
      !PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr))
    fail("writing PEM");
  return {bio_string(cert_bio.get()), bio_string(key_bio.get())};
}

namespace {

void write_file(const std::string& path, const std::string& data, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw std::runtime_error(path + ": " + std::strerror(err));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  ::close(fd);
}

std::string quoted(const std::string& path) { return "\"" + path + "\""; }

std::string this_user() { return "uid " + std::to_string(::geteuid()); }

// The folder the daemon writes a generated file into: there, a folder, and writable by this user.
std::optional<std::string> folder_problem(const char* key, const std::string& path) {
  namespace fs = std::filesystem;
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  std::error_code ec;
  const auto st = fs::status(folder, ec);
  const std::string head = std::string("tls.") + key + ": " + quoted(path) + ": ";
  if (!fs::exists(st))
    return head + "the folder " + folder.string() +
           " does not exist, so tls.generate = true cannot write there: " + "create it (mkdir -p " + folder.string() +
           "; the package's unit has systemd make " +
           "/var/lib/vlessbench, its StateDirectory) or point tls.cert and tls.key into a folder that exists";
  if (!fs::is_directory(st))
    return head + folder.string() + " is not a folder: point tls.cert and tls.key into a folder";
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    return head + "the folder " + folder.string() + " is not writable by this user (" + this_user() +
           "), so tls.generate = true cannot write there: make it writable by the user that runs vlessbenchd, "
           "or point tls.cert and tls.key into a folder it owns";
  return std::nullopt;
}

// A PEM file's bytes, or why it cannot be read, with what to do.
struct file_read {
  std::string data;
  std::optional<std::string> problem;
};

file_read read_pem_file(const char* key, const std::string& path, bool generate) {
  constexpr std::size_t max_bytes = 1u << 20;  // a certificate chain is a few kB
  const std::string head = std::string("tls.") + key + ": " + quoted(path) + ": ";
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      const std::string what = std::string(key) == "cert" ? "certificate" : "key";
      std::string out = head + "no such file";
      if (!std::filesystem::exists(std::filesystem::path(path).parent_path()))
        out += " (its folder " + std::filesystem::path(path).parent_path().string() + " does not exist either)";
      if (generate) return {{}, out + ": delete the other file of the pair too and the daemon makes both at start"};
      return {{},
              out + ": set tls.generate = true and the daemon makes a self-signed " + what +
                  " there at its first start (keeping it across restarts), or point tls." + key + " at your " + what +
                  " (PEM)"};
    }
    if (err == EACCES)
      return {{},
              head + "not readable by this user (" + this_user() +
                  "): make it readable by the user that runs "
                  "vlessbenchd (chown or chmod; the key may stay 0600 when that user owns it)"};
    return {{}, head + std::strerror(err)};
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return {{}, head + "not a regular file: point tls." + key + " at a PEM file"};
  }
  file_read out;
  char buf[16384];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof buf)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      out.problem = head + std::strerror(errno);
      break;
    }
    out.data.append(buf, static_cast<std::size_t>(n));
    if (out.data.size() > max_bytes) {
      out.problem = head + "larger than 1 MiB: not a certificate or key file";
      break;
    }
  }
  ::close(fd);
  return out;
}

std::string boringssl_reason() {
  char buf[256] = "unknown error";
  if (unsigned long e = ERR_get_error(); e != 0) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

std::vector<std::string> machine_addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char host[NI_MAXHOST];
    const socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (::getnameinfo(i->ifa_addr, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) continue;
    std::string h = host;
    if (auto pct = h.find('%'); pct != std::string::npos) continue;  // link-local with a zone
    if (std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  }
  ::freeifaddrs(list);
  return out;
}

}  // namespace

certificate_check check_certificate_files(const tls_config& cfg) {
  using state = certificate_check::state;
  if (cfg.cert.empty()) return {};  // in memory
  namespace fs = std::filesystem;
  if (cfg.generate && !(fs::exists(cfg.cert) && fs::exists(cfg.key))) {
    for (const auto& [key, path] : {std::pair{"cert", cfg.cert}, std::pair{"key", cfg.key}})
      if (auto problem = folder_problem(key, path)) return {state::problem, *problem};
    return {state::will_generate, "tls.cert " + quoted(cfg.cert) +
                                      " does not exist yet: the daemon generates a "
                                      "self-signed certificate there (key " +
                                      quoted(cfg.key) + ") at start"};
  }
  const file_read cert_file = read_pem_file("cert", cfg.cert, cfg.generate);
  if (cert_file.problem) return {state::problem, *cert_file.problem};
  const file_read key_file = read_pem_file("key", cfg.key, cfg.generate);
  if (key_file.problem) return {state::problem, *key_file.problem};

  auto not_pem = [&](const char* key, const std::string& path, const std::string& data, const char* begin,
                     const char* convert) {
    const std::string head = std::string("tls.") + key + ": " + quoted(path) + ": ";
    if (data.find("-----BEGIN ") == std::string::npos)
      return head + "not PEM (no \"-----BEGIN " + begin + "-----\" line): if it is DER, convert it (" + convert +
             " -inform der -in " + path + " -out " + path + ".pem) and point tls." + key + " at the result" +
             (cfg.generate ? "; or delete both files and the daemon makes a new pair at start" : "");
    return head + "not a PEM " + (std::string(key) == "cert" ? "certificate" : "private key") +
           " BoringSSL can read (" + boringssl_reason() + ")" +
           (std::string(key) == "key" ? ": a passphrase-protected key must be decrypted first (openssl pkey -in " +
                                            path + " -out " + path + ".plain)"
                                      : "");
  };
  bio_ptr cert_bio(BIO_new_mem_buf(cert_file.data.data(), cert_file.data.size()));
  x509_ptr cert(cert_bio ? PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) return {state::problem, not_pem("cert", cfg.cert, cert_file.data, "CERTIFICATE", "openssl x509")};
  ERR_clear_error();
  bio_ptr key_bio(BIO_new_mem_buf(key_file.data.data(), key_file.data.size()));
  pkey_ptr key(key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) return {state::problem, not_pem("key", cfg.key, key_file.data, "PRIVATE KEY", "openssl pkey")};
  ERR_clear_error();
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return {state::problem, "tls.key: " + quoted(cfg.key) + " does not match tls.cert " + quoted(cfg.cert) +
                                ": point both at the files of one pair" +
                                (cfg.generate ? ", or delete both and the daemon makes a new pair at start" : "")};
  }
  return {};
}

bool ensure_certificate(const tls_config& cfg) {
  if (!cfg.generate) return false;
  namespace fs = std::filesystem;
  if (fs::exists(cfg.cert) && fs::exists(cfg.key)) return false;
  for (const auto& [key, path] : {std::pair{"cert", cfg.cert}, std::pair{"key", cfg.key}})
    if (auto problem = folder_problem(key, path)) throw std::runtime_error(*problem);
  std::vector<std::string> names = cfg.names;
  names.emplace_back("localhost");
  char hostname[256] = {};
  if (::gethostname(hostname, sizeof hostname - 1) == 0 && hostname[0] &&
      std::find(names.begin(), names.end(), hostname) == names.end())
    names.emplace_back(hostname);
  auto ips = machine_addresses();
  if (ips.empty()) ips = {"127.0.0.1", "::1"};
  const auto pem = make_self_signed(names, ips);
  write_file(cfg.key, pem.key, 0600);
  write_file(cfg.cert, pem.cert, 0644);
  return true;
}

std::string ja4_received(const SSL* ssl) {
  const auto* rec = hello_of(ssl);
  return rec ? rec->ja4 : std::string();
}

std::string groups_received(const SSL* ssl) {
  const auto* rec = hello_of(ssl);
  return rec ? rec->groups : std::string();
}

std::string key_shares_received(const SSL* ssl) {
  const auto* rec = hello_of(ssl);
  return rec ? rec->key_shares : std::string();
}

std::string certificate_sha256(const std::string& pem_file) {
  bio_ptr bio(BIO_new_file(pem_file.c_str(), "r"));
  if (!bio) fail(pem_file);
  x509_ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) fail(pem_file);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (!X509_digest(cert.get(), EVP_sha256(), md, &len)) fail(pem_file);
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

asio::ssl::context make_server_context(const tls_config& cfg) {
  asio::ssl::context ctx(asio::ssl::context::tls_server);
  SSL_CTX* native = ctx.native_handle();
  SSL_CTX_set_min_proto_version(native, to_protocol_version(cfg.min_version));
  SSL_CTX_set_max_proto_version(native, TLS1_3_VERSION);
  SSL_CTX_set_options(native, SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (!cfg.session_tickets) {
    SSL_CTX_set_options(native, SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(native, 0);
    SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  }
  SSL_CTX_set_alpn_select_cb(native, select_alpn, nullptr);
  SSL_CTX_set_select_certificate_cb(native, record_ja4);

  std::error_code ec;
  if (cfg.cert.empty()) {
    const auto pem = make_self_signed({"localhost"}, {"127.0.0.1", "::1"});
    ctx.use_certificate_chain(asio::buffer(pem.cert), ec);
    if (!ec) ctx.use_private_key(asio::buffer(pem.key), asio::ssl::context::pem, ec);
    if (ec) throw std::runtime_error("in-memory certificate: " + ec.message());
  } else {
    if (const auto checked = check_certificate_files(cfg); checked.result == certificate_check::state::problem)
      throw std::runtime_error(checked.message);
    ctx.use_certificate_chain_file(cfg.cert, ec);
    if (ec) throw std::runtime_error("tls.cert: " + cfg.cert + ": " + ec.message());
    ctx.use_private_key_file(cfg.key, asio::ssl::context::pem, ec);
    if (ec) throw std::runtime_error("tls.key: " + cfg.key + ": " + ec.message());
    if (!SSL_CTX_check_private_key(native))
      throw std::runtime_error("tls.key: " + cfg.key + " does not match tls.cert " + cfg.cert);
  }
  return ctx;
}

}  // namespace vlessbench::tls

namespace vlessbench::reality {
namespace {

// The listener state a REALITY context keeps alive, and the one it hands each connection.
int state_index() {
  static const int index =
      SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, [](void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
        delete static_cast<std::shared_ptr<listener_state>*>(ptr);
      });
  return index;
}

// An authenticated connection's signature_algorithms patch: where the entry that stands in for
// ed25519 lies in BoringSSL's ClientHello buffer, and what it held.
struct sigalg_patch {
  std::uint8_t* at = nullptr;
  std::uint8_t was[2] = {};
};

int patch_index() {
  static const int index = SSL_get_ex_new_index(
      0, nullptr, nullptr, nullptr,
      [](void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) { delete static_cast<sigalg_patch*>(ptr); });
  return index;
}

constexpr std::uint16_t sigalg_ed25519 = 0x0807;

// REALITY servers sign CertificateVerify with ed25519 even when the client's list (a browser's,
// as uTLS's chrome fingerprint sends) does not name it, and REALITY clients accept that (Go's
// crypto/tls checks the algorithm against what it supports, not what it sent). BoringSSL signs
// only with an algorithm the peer listed and has no API to do otherwise, so for an authenticated
// connection the list's last entry reads ed25519 while BoringSSL copies the extensions, and the
// two bytes are put back before the ClientHello enters the transcript (else the Finished would
// not match the client's). It rests on this order of BoringSSL's server handshake:
//   1. select_certificate_cb (select_reality) runs on the ClientHello buffer before the
//      extensions are parsed (documented: "before most ClientHello processing");
//   2. parsing copies signature_algorithms into the handshake's peer list;
//   3. the certificate callback (restore_sigalgs) runs, and only then the ClientHello is hashed.
// What guards it: the patch must lie inside the buffer handed to the callback (checked, else no
// patch); restore_sigalgs always puts the bytes back and checks that the parsed copy did take
// ed25519 (SSL_get0_peer_verify_algorithms), failing the handshake with an error naming this if
// not; a change of 3 fails every REALITY handshake at the client's Finished, never silently. The
// order was checked against the BoringSSL this builds with (test_reality: Xray and mihomo
// through REALITY, BoringSSL API version 17: Debian's android-libboringssl 13); on another
// BoringSSL, test_reality is the check (a Debian security update must not stop the build).

ssl_select_cert_result_t select_reality(const SSL_CLIENT_HELLO* hello) {
  (void)tls::detail::record_client_hello(hello);
  auto* patch = static_cast<sigalg_patch*>(SSL_get_ex_data(hello->ssl, patch_index()));
  if (patch == nullptr || patch->at != nullptr) return ssl_select_cert_success;
  const std::uint8_t* data = nullptr;
  std::size_t len = 0;
  if (!SSL_early_callback_ctx_extension_get(hello, TLSEXT_TYPE_signature_algorithms, &data, &len) || len < 4)
    return ssl_select_cert_success;
  const std::size_t list = static_cast<std::size_t>(data[0]) << 8 | data[1];
  if (list + 2 != len || list % 2 != 0) return ssl_select_cert_success;
  const std::uint8_t* const begin = hello->client_hello;
  if (data < begin || data + len > begin + hello->client_hello_len) return ssl_select_cert_success;
  for (std::size_t i = 2; i < len; i += 2)
    if ((static_cast<std::uint16_t>(data[i] << 8 | data[i + 1])) == sigalg_ed25519) return ssl_select_cert_success;
  // The buffer is BoringSSL's own (the handshake message it read), writable; it hands it as const.
  patch->at = const_cast<std::uint8_t*>(data + len - 2);
  patch->was[0] = patch->at[0];
  patch->was[1] = patch->at[1];
  patch->at[0] = sigalg_ed25519 >> 8;
  patch->at[1] = sigalg_ed25519 & 0xff;
  return ssl_select_cert_success;
}

int restore_sigalgs(SSL* ssl, void*) {
  auto* patch = static_cast<sigalg_patch*>(SSL_get_ex_data(ssl, patch_index()));
  if (patch == nullptr || patch->at == nullptr) return 1;
  patch->at[0] = patch->was[0];
  patch->at[1] = patch->was[1];
  patch->at = nullptr;
  const std::uint16_t* parsed = nullptr;
  const std::size_t n = SSL_get0_peer_verify_algorithms(ssl, &parsed);
  if (std::find(parsed, parsed + n, sigalg_ed25519) != parsed + n) return 1;
  OPENSSL_PUT_ERROR(SSL, SSL_R_NO_COMMON_SIGNATURE_ALGORITHMS);
  ERR_add_error_data(1, "REALITY: this BoringSSL parsed signature_algorithms before select_certificate_cb");
  return 0;
}

}  // namespace

asio::ssl::context make_context(std::shared_ptr<listener_state> state) {
  asio::ssl::context ctx(asio::ssl::context::tls_server);
  SSL_CTX* native = ctx.native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(native, TLS1_3_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(native, 0);
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_alpn_select_cb(native, tls::detail::select_alpn_cb, nullptr);
  SSL_CTX_set_select_certificate_cb(native, select_reality);
  SSL_CTX_set_cert_cb(native, restore_sigalgs, nullptr);
  auto holder = std::make_unique<std::shared_ptr<listener_state>>(std::move(state));
  if (!SSL_CTX_set_ex_data(native, state_index(), holder.get()))
    throw std::runtime_error("REALITY: SSL_CTX_set_ex_data");
  (void)holder.release();
  return ctx;
}

listener_state* state_of(SSL* ssl) {
  if (ssl == nullptr) return nullptr;
  const auto* holder =
      static_cast<std::shared_ptr<listener_state>*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), state_index()));
  return holder ? holder->get() : nullptr;
}

bool use_certificate(SSL* ssl, const listener_state& state, const key32& auth_key) {
  const auto cert = state.certificate_for(auth_key);
  if (!SSL_use_certificate_ASN1(ssl, cert.data(), cert.size())) return false;
  if (!SSL_use_PrivateKey(ssl, state.signing_key())) return false;
  auto patch = std::make_unique<sigalg_patch>();
  if (!SSL_set_ex_data(ssl, patch_index(), patch.get())) return false;
  (void)patch.release();
  return true;
}

}  // namespace vlessbench::reality
