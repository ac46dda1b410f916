// REALITY's cryptography on BoringSSL (core/net/reality_auth.hpp).
#include "core/net/reality_auth.hpp"

#include <algorithm>
#include <stdexcept>

#include <openssl/aead.h>
#include <openssl/bytestring.h>
#include <openssl/curve25519.h>
#include <openssl/digest.h>
#include <openssl/evp.h>
#include <openssl/hkdf.h>
#include <openssl/hmac.h>
#include <openssl/mem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

namespace vlessbench::reality {

std::string_view to_string(refusal r) {
  switch (r) {
    case refusal::none: return "none";
    case refusal::bad_client_hello: return "reality_bad_client_hello";
    case refusal::not_tls13: return "reality_not_tls13";
    case refusal::server_name: return "reality_server_name";
    case refusal::no_x25519_share: return "reality_no_x25519_share";
    case refusal::mlkem_required: return "reality_mlkem_share_required";
    case refusal::auth_failed: return "reality_auth_failed";
    case refusal::unknown_short_id: return "reality_short_id";
    case refusal::time_diff: return "reality_time_diff";
    case refusal::replayed: return "reality_replayed";
  }
  return "reality_refused";
}

namespace {

auth_outcome refused(refusal why, std::string detail) {
  auth_outcome o;
  o.why = why;
  o.detail = std::move(detail);
  return o;
}

std::string hex(std::span<const std::uint8_t> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (const std::uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

// The checks that need no key: version, name, shares.
std::optional<auth_outcome> check_hello(const settings& s, const hello_facts& f) {
  if (!f.tls13) return refused(refusal::not_tls13, "the ClientHello does not offer TLS 1.3");
  if (std::find(s.server_names.begin(), s.server_names.end(), f.hello.server_name) == s.server_names.end())
    return refused(refusal::server_name, "SNI \"" + f.hello.server_name + "\" is not in server_names");
  std::vector<std::uint16_t> shares;
  for (const auto& k : f.hello.key_shares) shares.push_back(k.group);
  if (s.require_mlkem_share && !f.mlkem_share_first)
    return refused(refusal::mlkem_required, "require_mlkem_share: key shares " + group_names_json(shares) +
                                                " have no X25519MLKEM768 before X25519");
  if (f.x25519.size() != 32)
    return refused(refusal::no_x25519_share, "key shares " + group_names_json(shares) + " have no X25519 value");
  if (f.session_id.size() != 32)
    return refused(refusal::auth_failed, "a " + std::to_string(f.session_id.size()) + "-byte session id (REALITY: 32)");
  return std::nullopt;
}

}  // namespace

auth_outcome authenticate(const settings& s, const hello_facts& f, std::int64_t now_ms) {
  if (auto early = check_hello(s, f)) return std::move(*early);
  auth_outcome out;
  std::uint8_t shared[32];
  if (!X25519(shared, s.private_key.data(), f.x25519.data()))
    return refused(refusal::auth_failed, "the X25519 share is a low-order point");
  if (!HKDF(out.auth_key.data(), out.auth_key.size(), EVP_sha256(), shared, sizeof shared, f.random.data(), 20,
            reinterpret_cast<const std::uint8_t*>("REALITY"), 7))
    return refused(refusal::auth_failed, "HKDF failed");
  // The additional data is the whole handshake message with its session id zeroed.
  std::vector<std::uint8_t> aad(f.message.begin(), f.message.end());
  const auto at = static_cast<std::size_t>(f.session_id.data() - f.message.data());
  std::fill(aad.begin() + static_cast<std::ptrdiff_t>(at), aad.begin() + static_cast<std::ptrdiff_t>(at + 32), 0);
  EVP_AEAD_CTX ctx;
  if (!EVP_AEAD_CTX_init(&ctx, EVP_aead_aes_256_gcm(), out.auth_key.data(), out.auth_key.size(),
                         EVP_AEAD_DEFAULT_TAG_LENGTH, nullptr))
    return refused(refusal::auth_failed, "AES-GCM setup failed");
  std::array<std::uint8_t, 32> plain{};
  std::size_t plain_len = 0;
  const int opened = EVP_AEAD_CTX_open(&ctx, plain.data(), &plain_len, plain.size(), f.random.data() + 20, 12,
                                       f.session_id.data(), 32, aad.data(), aad.size());
  EVP_AEAD_CTX_cleanup(&ctx);
  if (!opened || plain_len != 16)
    return refused(refusal::auth_failed,
                   "the session id does not open with this listener's key (another public key, "
                   "or not a REALITY client)");
  out.claim = read_claim(std::span<const std::uint8_t, 16>(plain.data(), 16));
  if (std::find(s.short_ids.begin(), s.short_ids.end(), out.claim.short_id) == s.short_ids.end())
    return refused(refusal::unknown_short_id, "short id " + hex(out.claim.short_id) + " is not in short_ids");
  const std::int64_t diff_ms = now_ms - static_cast<std::int64_t>(out.claim.unix_time) * 1000;
  if (s.max_time_diff_ms != 0 && (diff_ms > s.max_time_diff_ms + 999 || -diff_ms > s.max_time_diff_ms))
    return refused(refusal::time_diff, "client time " + std::to_string(out.claim.unix_time) + " is " +
                                           std::to_string(diff_ms / 1000) + " s from ours (max_time_diff " +
                                           std::to_string(s.max_time_diff_ms) + " ms)");
  return out;
}

key32 public_key(const key32& private_key) {
  key32 out{};
  X25519_public_from_private(out.data(), private_key.data());
  return out;
}

key32 generate_private_key() {
  key32 pub{};
  key32 priv{};
  X25519_keypair(pub.data(), priv.data());
  return priv;
}

bool replay_memory::first_use(std::span<const std::uint8_t> random) {
  std::array<std::uint8_t, 32> key{};
  std::copy_n(random.begin(), std::min<std::size_t>(random.size(), 32), key.begin());
  const std::lock_guard lock(mutex_);
  if (!seen_.insert(key).second) return false;
  order_.push_back(key);
  if (order_.size() > capacity_) {
    seen_.erase(order_.front());
    order_.pop_front();
  }
  return true;
}

namespace {
struct pkey_free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct x509_free {
  void operator()(X509* p) const { X509_free(p); }
};
}  // namespace

listener_state::listener_state(settings s) : settings_(std::move(s)) {
  std::uint8_t seed[32];
  RAND_bytes(seed, sizeof seed);
  std::unique_ptr<EVP_PKEY, pkey_free> key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed, sizeof seed));
  OPENSSL_cleanse(seed, sizeof seed);
  std::size_t pub_len = ed25519_public_.size();
  if (!key || !EVP_PKEY_get_raw_public_key(key.get(), ed25519_public_.data(), &pub_len))
    throw std::runtime_error("REALITY: making the ed25519 key failed");
  std::unique_ptr<X509, x509_free> cert(X509_new());
  if (!cert) throw std::runtime_error("REALITY: X509_new failed");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 365L * 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  if (!X509_sign(cert.get(), key.get(), nullptr)) throw std::runtime_error("REALITY: signing the certificate failed");
  std::uint8_t* der = nullptr;
  const int der_len = i2d_X509(cert.get(), &der);
  if (der_len <= 64) throw std::runtime_error("REALITY: encoding the certificate failed");
  certificate_template_.assign(der, der + der_len);
  OPENSSL_free(der);
  ed25519_key_ = std::shared_ptr<EVP_PKEY>(key.release(), EVP_PKEY_free);
}

std::vector<std::uint8_t> listener_state::certificate_for(const key32& auth_key) const {
  // An ed25519 signature is the DER's last 64 bytes; the client compares exactly those.
  std::vector<std::uint8_t> out = certificate_template_;
  unsigned len = 0;
  HMAC(EVP_sha512(), auth_key.data(), auth_key.size(), ed25519_public_.data(), ed25519_public_.size(),
       out.data() + out.size() - 64, &len);
  return out;
}

void listener_state::set_fallback(std::string host, std::uint16_t port) {
  const std::lock_guard lock(fallback_mutex_);
  fallback_.emplace(std::move(host), port);
}

std::optional<std::pair<std::string, std::uint16_t>> listener_state::fallback() const {
  const std::lock_guard lock(fallback_mutex_);
  return fallback_;
}

}  // namespace vlessbench::reality
