#include "core/wire/net_address.hpp"

#include <algorithm>
#include <charconv>

#include "core/wire/host_check.hpp"

namespace vlessbench {

asio::ip::address unmapped(const asio::ip::address& a) {
  if (a.is_v4()) return a;
  const auto v6 = a.to_v6();
  if (v6.is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, v6);
  return asio::ip::address_v6(v6.to_bytes());  // scope id dropped: compared as bytes
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Characters that end or break a URL authority, or that no host name contains.
bool bad_name_char(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return c <= 0x20 || c == 0x7f || ch == '/' || ch == '?' || ch == '#' || ch == '@' || ch == '[' || ch == ']' ||
         ch == '%' || ch == '\\';
}

std::optional<host_port> fail(std::string& reason, const char* text) {
  reason = text;
  return std::nullopt;
}

}  // namespace

std::optional<host_port> parse_host_port(std::string_view text, host_rule rule, std::string& reason, port_zero zero) {
  const bool names = rule == host_rule::name_or_address;
  std::string_view host;
  std::string_view port;
  const bool bracketed = !text.empty() && text.front() == '[';
  if (bracketed) {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return fail(reason, "missing ']' after the IPv6 address");
    host = text.substr(1, close - 1);
    const auto rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return fail(reason, "expected [IPv6]:PORT");
    port = rest.substr(1);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return fail(reason, names ? "expected HOST:PORT" : "expected ADDRESS:PORT");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return fail(reason, "IPv6 addresses need brackets, e.g. [::1]:8443");
  }
  if (host.empty())
    return fail(reason, names ? "empty host" : "missing address (use 0.0.0.0 or [::] for every address)");
  if (port.empty()) return fail(reason, "missing port");
  if (!std::all_of(port.begin(), port.end(), is_digit)) return fail(reason, "port must be a number");
  // Leading zeros are allowed however many; the significant digits decide the range.
  const auto significant = port.substr(std::min(port.find_first_not_of('0'), port.size()));
  unsigned value = 0;
  const bool all_zeros = significant.empty();  // "0", "000": from_chars reads no digit
  if (significant.size() > 5 ||
      (!all_zeros &&
       std::from_chars(significant.data(), significant.data() + significant.size(), value).ec != std::errc{}) ||
      (value == 0 && zero == port_zero::refused) || value > 65535)
    return fail(reason, "port out of range");

  asio::error_code ec;
  if (bracketed) {
    (void)asio::ip::make_address_v6(std::string(host), ec);
    if (ec) return fail(reason, "not a valid IPv6 address");
  } else if (names) {
    if (std::any_of(host.begin(), host.end(), bad_name_char)) return fail(reason, "bad character in host");
  } else {
    (void)asio::ip::make_address_v4(std::string(host), ec);
    if (ec) {
      const bool numeric = std::all_of(host.begin(), host.end(), [](char c) { return is_digit(c) || c == '.'; });
      return fail(reason, numeric ? "not a valid IPv4 address"
                                  : "hostnames are not accepted, use an IP address (e.g. 127.0.0.1 or [::1])");
    }
  }
  reason.clear();
  return host_port{std::string(host), static_cast<std::uint16_t>(value)};
}

std::optional<std::string> normalize_host_name(std::string_view text, std::string& reason) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    asio::error_code ec;
    const auto a = asio::ip::make_address_v6(std::string(text.substr(1, text.size() - 2)), ec);
    if (ec) {
      reason = "not a valid IPv6 address";
      return std::nullopt;
    }
    return unmapped(a).to_string();
  }
  if (text.find(':') != std::string_view::npos) {
    asio::error_code ec;
    const auto a = asio::ip::make_address_v6(std::string(text), ec);
    if (ec) {
      reason = "not a host name (a port does not belong here) nor an IPv6 address";
      return std::nullopt;
    }
    return unmapped(a).to_string();
  }
  std::string name(text);
  if (!name.empty() && name.back() == '.') name.pop_back();
  if (name.empty() || name.size() > 253) {
    reason = "a host name is 1 to 253 characters";
    return std::nullopt;
  }
  std::size_t label = 0;
  for (char& c : name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c == '.') {
      if (label == 0) {
        reason = "empty label in host name";
        return std::nullopt;
      }
      label = 0;
      continue;
    }
    if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '_')) {
      reason = "bad character in host name";
      return std::nullopt;
    }
    if (++label > 63) {
      reason = "a label of a host name is at most 63 characters";
      return std::nullopt;
    }
  }
  if (label == 0) {  // "a.." (one trailing dot is the root's, taken off above)
    reason = "empty label in host name";
    return std::nullopt;
  }
  asio::error_code ec;
  const auto a = asio::ip::make_address_v4(name, ec);
  if (!ec) return a.to_string();
  return name;
}

std::optional<host_header> parse_host_header(std::string_view value, std::string& reason) {
  std::string_view host = value, port;
  if (!value.empty() && value.front() == '[') {
    const auto close = value.find(']');
    if (close == std::string_view::npos) {
      reason = "missing ']' after the IPv6 address";
      return std::nullopt;
    }
    host = value.substr(0, close + 1);
    const auto rest = value.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        reason = "expected [IPv6]:PORT";
        return std::nullopt;
      }
      port = rest.substr(1);
      if (port.empty()) {
        reason = "missing port after ':'";
        return std::nullopt;
      }
    }
  } else if (const auto colon = value.rfind(':'); colon != std::string_view::npos) {
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      reason = "IPv6 addresses need brackets";
      return std::nullopt;
    }
    if (port.empty()) {
      reason = "missing port after ':'";
      return std::nullopt;
    }
  }
  if (!port.empty()) {
    unsigned n = 0;
    const auto significant = port.substr(std::min(port.find_first_not_of('0'), port.size()));
    if (!std::all_of(port.begin(), port.end(), is_digit) || significant.size() > 5 ||
        std::from_chars(significant.data(), significant.data() + significant.size(), n).ec != std::errc{} || n < 1 ||
        n > 65535) {
      reason = "port out of range";
      return std::nullopt;
    }
  }
  auto name = normalize_host_name(host, reason);
  if (!name) return std::nullopt;
  host_header out{*name, std::nullopt};
  asio::error_code ec;
  const auto a = asio::ip::make_address(out.host, ec);
  if (!ec) out.address = a;
  return out;
}

std::string format_host_port(std::string_view host, std::uint16_t port) {
  std::string out;
  if (host.find(':') != std::string_view::npos) {
    out += '[';
    out += host;
    out += ']';
  } else {
    out += host;
  }
  out += ':';
  out += std::to_string(port);
  return out;
}

bool parse_endpoint(std::string_view text, asio::ip::tcp::endpoint& out, std::string& reason, port_zero zero) {
  const auto hp = parse_host_port(text, host_rule::address_only, reason, zero);
  if (!hp) return false;
  out = asio::ip::tcp::endpoint(asio::ip::make_address(hp->host), hp->port);
  return true;
}

std::string format_endpoint(const asio::ip::tcp::endpoint& ep) {
  return format_host_port(ep.address().to_string(), ep.port());
}

namespace {

// a with every bit past the first prefix bits cleared; IPv6 scope ids are dropped.
asio::ip::address network_part(const asio::ip::address& a, unsigned prefix) {
  if (a.is_v4()) {
    const std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - std::min(prefix, 32u));
    return asio::ip::address_v4(a.to_v4().to_uint() & mask);
  }
  auto bytes = a.to_v6().to_bytes();
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const std::size_t first_bit = i * 8;
    const unsigned bits = prefix > first_bit ? static_cast<unsigned>(std::min<std::size_t>(8, prefix - first_bit)) : 0;
    bytes[i] = static_cast<std::uint8_t>(bytes[i] & (bits == 0 ? 0 : 0xff << (8 - bits)));
  }
  return asio::ip::address_v6(bytes);
}

}  // namespace

bool ip_network::contains(const asio::ip::address& a) const {
  return a.is_v4() == address.is_v4() && network_part(a, prefix) == address;
}

bool parse_ip_network(std::string_view text, ip_network& out, std::string& reason) {
  const auto slash = text.find('/');
  const std::string host(text.substr(0, slash));
  asio::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec || host.empty() || host.find('%') != std::string::npos) {
    reason = "not an IP address or CIDR network (e.g. \"10.0.0.0/8\", \"fd00::/8\", \"0.0.0.0/0\")";
    return false;
  }
  const unsigned max_prefix = address.is_v4() ? 32 : 128;
  unsigned prefix = max_prefix;
  if (slash != std::string_view::npos) {
    const auto digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3 || !std::all_of(digits.begin(), digits.end(), is_digit)) {
      reason = "prefix length must be a number";
      return false;
    }
    prefix = 0;
    for (const char c : digits) prefix = prefix * 10 + static_cast<unsigned>(c - '0');
    if (prefix > max_prefix) {
      reason = "prefix length out of range (0.." + std::to_string(max_prefix) + ")";
      return false;
    }
  }
  // The network address itself: a set host bit usually means a typo in the address or prefix.
  const ip_network masked{network_part(address, prefix), prefix};
  if (masked.address != address) {
    // The suggestion is hex digits, dots, colons and a slash: quoted as is.
    reason = "host bits set past the prefix (did you mean \"" + format_ip_network(masked) + "\"?)";
    return false;
  }
  out = masked;
  return true;
}

std::string format_ip_network(const ip_network& n) { return n.address.to_string() + "/" + std::to_string(n.prefix); }

bool host_names_listener(std::string_view host_value, const asio::ip::address& local,
                         const std::vector<std::string>& names) {
  std::string reason;
  const auto h = parse_host_header(host_value, reason);
  if (!h) return false;
  if (h->address) return unmapped(*h->address) == unmapped(local) || std::ranges::find(names, h->host) != names.end();
  return h->host == "localhost" || std::ranges::find(names, h->host) != names.end();
}

}  // namespace vlessbench
