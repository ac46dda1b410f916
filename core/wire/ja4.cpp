#include "core/wire/ja4.hpp"

#include <algorithm>
#include <cstdio>

#include <openssl/sha.h>

namespace vlessbench {

namespace {

// A bounds-checked cursor over the input: every read says whether the bytes were there.
class reader {
 public:
  explicit reader(std::span<const std::uint8_t> in) : in_(in) {}
  std::size_t left() const { return in_.size() - pos_; }
  bool u8(std::uint8_t& v) {
    if (left() < 1) return false;
    v = in_[pos_++];
    return true;
  }
  bool u16(std::uint16_t& v) {
    if (left() < 2) return false;
    v = static_cast<std::uint16_t>(in_[pos_] << 8 | in_[pos_ + 1]);
    pos_ += 2;
    return true;
  }
  // The next n bytes as a reader of their own.
  bool sub(std::size_t n, reader& out) {
    if (left() < n) return false;
    out = reader(in_.subspan(pos_, n));
    out.set_base(position());
    pos_ += n;
    return true;
  }
  bool skip(std::size_t n) {
    if (left() < n) return false;
    pos_ += n;
    return true;
  }
  // A vector of length-prefixed (8- or 16-bit) 16-bit values that fills its length exactly.
  template <bool Long>
  bool u16_list(std::vector<std::uint16_t>& out) {
    std::size_t n = 0;
    if constexpr (Long) {
      std::uint16_t len = 0;
      if (!u16(len)) return false;
      n = len;
    } else {
      std::uint8_t len = 0;
      if (!u8(len)) return false;
      n = len;
    }
    if (n % 2 != 0 || left() < n) return false;
    out.clear();
    out.reserve(n / 2);
    for (std::size_t i = 0; i < n; i += 2) {
      std::uint16_t v = 0;
      u16(v);
      out.push_back(v);
    }
    return true;
  }
  std::span<const std::uint8_t> rest() const { return in_.subspan(pos_); }
  // Where the cursor is, counted from the start of the outermost input.
  std::size_t position() const { return base_ + pos_; }
  void set_base(std::size_t base) { base_ = base; }

 private:
  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
  std::size_t base_ = 0;
};

parse_result<client_hello> refuse(std::string_view reason) {
  parse_result<client_hello> r;
  r.status = parse_status::invalid;
  r.reason = reason;
  return r;
}

constexpr std::uint16_t ext_server_name = 0x0000;
constexpr std::uint16_t ext_signature_algorithms = 0x000d;
constexpr std::uint16_t ext_alpn = 0x0010;
constexpr std::uint16_t ext_supported_versions = 0x002b;
constexpr std::uint16_t ext_supported_groups = 0x000a;
constexpr std::uint16_t ext_key_share = 0x0033;

// server_name (RFC 6066): a list of (type, name); the first host_name (type 0) is kept.
std::string_view read_server_name(reader body, client_hello& h) {
  if (body.left() == 0) return {};  // empty: the SNI is there, without a name
  std::uint16_t list_len = 0;
  reader list(std::span<const std::uint8_t>{});
  if (!body.u16(list_len) || !body.sub(list_len, list) || body.left() != 0) return "bad server_name";
  while (list.left() > 0) {
    std::uint8_t type = 0;
    std::uint16_t len = 0;
    if (!list.u8(type) || !list.u16(len) || list.left() < len) return "bad server_name";
    const auto name = list.rest().first(len);
    list.skip(len);
    if (type == 0 && h.server_name.empty()) h.server_name.assign(name.begin(), name.end());
  }
  return {};
}

// key_share (RFC 8446 4.2.8): a list of (group, key exchange bytes), kept as offsets.
std::string_view read_key_shares(reader body, client_hello& h) {
  std::uint16_t list_len = 0;
  reader list(std::span<const std::uint8_t>{});
  if (!body.u16(list_len) || !body.sub(list_len, list) || body.left() != 0) return "bad key_share";
  while (list.left() > 0) {
    key_share_entry e;
    std::uint16_t len = 0;
    if (!list.u16(e.group) || !list.u16(len) || list.left() < len) return "bad key_share";
    e.offset = list.position();
    e.length = len;
    list.skip(len);
    h.key_shares.push_back(e);
  }
  return {};
}

// The extension bodies JA4 reads; every other one is only counted.
std::string_view read_extension(std::uint16_t type, reader body, client_hello& h) {
  switch (type) {
    case ext_server_name: h.has_sni = true; return read_server_name(body, h);
    case ext_supported_groups:
      if (!body.u16_list<true>(h.supported_groups) || body.left() != 0) return "bad supported_groups";
      return {};
    case ext_key_share: return read_key_shares(body, h);
    case ext_supported_versions:
      if (!body.u16_list<false>(h.supported_versions) || body.left() != 0) return "bad supported_versions";
      return {};
    case ext_signature_algorithms:
      if (!body.u16_list<true>(h.signature_algorithms) || body.left() != 0) return "bad signature_algorithms";
      return {};
    case ext_alpn: {
      std::uint16_t list_len = 0;
      reader list(std::span<const std::uint8_t>{});
      if (!body.u16(list_len) || !body.sub(list_len, list) || body.left() != 0) return "bad alpn";
      std::uint8_t first_len = 0;
      if (!list.u8(first_len)) return {};  // an empty list: no value
      const auto first = list.rest();
      if (!list.skip(first_len)) return "bad alpn";
      h.alpn_first.assign(first.begin(), first.begin() + first_len);
      return {};
    }
    default: return {};
  }
}

std::string_view version_chars(const client_hello& h) {
  std::uint16_t v = 0;
  for (const std::uint16_t s : h.supported_versions)
    if (!is_grease(s)) v = std::max(v, s);
  if (v == 0) v = h.legacy_version;
  switch (v) {
    case 0x0304: return "13";
    case 0x0303: return "12";
    case 0x0302: return "11";
    case 0x0301: return "10";
    case 0x0300: return "s3";
    case 0x0002: return "s2";
    case 0xfeff: return "d1";
    case 0xfefd: return "d2";
    case 0xfefc: return "d3";
    default: return "00";
  }
}

bool alphanumeric(std::uint8_t c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

constexpr char hex_digits[] = "0123456789abcdef";

// First and last character of the first ALPN value; when either byte is not alphanumeric, the
// first and last hex digit of the value instead ("00" when there is none).
std::string alpn_chars(const std::string& v) {
  if (v.empty()) return "00";
  const auto first = static_cast<std::uint8_t>(v.front());
  const auto last = static_cast<std::uint8_t>(v.back());
  if (alphanumeric(first) && alphanumeric(last)) return {static_cast<char>(first), static_cast<char>(last)};
  return {hex_digits[first >> 4], hex_digits[last & 0x0f]};
}

void append_hex16(std::string& out, std::uint16_t v) {
  out += hex_digits[(v >> 12) & 0xf];
  out += hex_digits[(v >> 8) & 0xf];
  out += hex_digits[(v >> 4) & 0xf];
  out += hex_digits[v & 0xf];
}

std::string joined(const std::vector<std::uint16_t>& values) {
  std::string out;
  out.reserve(values.size() * 5);
  for (const std::uint16_t v : values) {
    if (!out.empty()) out += ',';
    append_hex16(out, v);
  }
  return out;
}

std::string truncated_sha256(const std::string& text) {
  std::uint8_t md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const std::uint8_t*>(text.data()), text.size(), md);
  std::string out;
  for (std::size_t i = 0; i < 6; ++i) {
    out += hex_digits[md[i] >> 4];
    out += hex_digits[md[i] & 0xf];
  }
  return out;
}

std::vector<std::uint16_t> without_grease(const std::vector<std::uint16_t>& values) {
  std::vector<std::uint16_t> out;
  out.reserve(values.size());
  for (const std::uint16_t v : values)
    if (!is_grease(v)) out.push_back(v);
  return out;
}

std::string two_digits(std::size_t n) {
  n = std::min<std::size_t>(n, 99);
  return {static_cast<char>('0' + n / 10), static_cast<char>('0' + n % 10)};
}

}  // namespace

parse_result<client_hello> parse_client_hello(std::span<const std::uint8_t> body) {
  reader in(body);
  client_hello h;
  std::uint8_t session_id_len = 0;
  if (!in.u16(h.legacy_version) || !in.skip(32)) return refuse("truncated before the session id");
  if (!in.u8(session_id_len) || session_id_len > 32 || !in.skip(session_id_len)) return refuse("bad session id");
  h.session_id_length = session_id_len;
  if (!in.u16_list<true>(h.cipher_suites)) return refuse("bad cipher suites");
  std::uint8_t compression_len = 0;
  if (!in.u8(compression_len) || !in.skip(compression_len)) return refuse("bad compression methods");
  if (in.left() > 0) {  // no extensions at all is a valid (old) ClientHello
    std::uint16_t total = 0;
    reader exts(std::span<const std::uint8_t>{});
    if (!in.u16(total) || !in.sub(total, exts)) return refuse("bad extensions length");
    if (in.left() != 0) return refuse("trailing bytes after the extensions");
    while (exts.left() > 0) {
      std::uint16_t type = 0;
      std::uint16_t len = 0;
      reader ext(std::span<const std::uint8_t>{});
      if (!exts.u16(type) || !exts.u16(len) || !exts.sub(len, ext)) return refuse("truncated extension");
      h.extensions.push_back(type);
      if (const auto why = read_extension(type, ext, h); !why.empty()) return refuse(why);
    }
  }
  parse_result<client_hello> r;
  r.status = parse_status::complete;
  r.value = std::move(h);
  r.consumed = body.size();
  return r;
}

std::string ja4_fingerprint(const client_hello& h, ja4_protocol protocol) {
  std::vector<std::uint16_t> ciphers = without_grease(h.cipher_suites);
  const std::vector<std::uint16_t> all_extensions = without_grease(h.extensions);
  std::string out(1, static_cast<char>(protocol));
  out += version_chars(h);
  out += h.has_sni ? 'd' : 'i';
  out += two_digits(ciphers.size());
  out += two_digits(all_extensions.size());
  out += alpn_chars(h.alpn_first);

  std::sort(ciphers.begin(), ciphers.end());
  out += '_';
  out += ciphers.empty() ? std::string(12, '0') : truncated_sha256(joined(ciphers));

  std::vector<std::uint16_t> extensions;
  for (const std::uint16_t e : all_extensions)
    if (e != ext_server_name && e != ext_alpn) extensions.push_back(e);
  std::sort(extensions.begin(), extensions.end());
  out += '_';
  if (extensions.empty()) {
    out += std::string(12, '0');
  } else {
    std::string text = joined(extensions);
    const std::vector<std::uint16_t> sigalgs = without_grease(h.signature_algorithms);
    if (!sigalgs.empty()) text += '_' + joined(sigalgs);
    out += truncated_sha256(text);
  }
  return out;
}

std::string ja4_of_client_hello(std::span<const std::uint8_t> body, std::string_view* reason) {
  const auto parsed = parse_client_hello(body);
  if (!parsed.complete()) {
    if (reason) *reason = parsed.reason;
    return {};
  }
  return ja4_fingerprint(parsed.value);
}

}  // namespace vlessbench
