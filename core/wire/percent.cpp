#include "core/wire/percent.hpp"

namespace vlessbench {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

// RFC 3986 percent-decoding. '+' stays '+': the share-link proposal mandates encodeURIComponent,
// which writes a space as %20.
std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (s.size() - i < 3) return std::nullopt;
    const int hi = hex_value(s[i + 1]);
    const int lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi << 4 | lo));
    i += 2;
  }
  return out;
}

// Escapes all but RFC 3986 unreserved characters: a subset of what encodeURIComponent leaves
// alone, so every client decodes it the same way.
std::string percent_encode(std::string_view s) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 0x0f]);
    }
  }
  return out;
}

std::string percent_decode_lenient(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];  // '+' stays '+': a token may contain it
    }
  }
  return out;
}

bool parse_query(std::string_view query, std::map<std::string, std::string, std::less<>>& out, std::string& reason) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const auto pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    std::string key(pair.substr(0, eq));
    auto value = percent_decode(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1));
    if (!value) {
      reason = "bad percent-encoding in the value of " + key;
      return false;
    }
    if (!out.emplace(key, std::move(*value)).second) {
      reason = "repeated query key: " + key;
      return false;
    }
  }
  return true;
}

}  // namespace vlessbench
