#include "core/wire/dns_message.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>

namespace vlessbench::dns {

std::string_view to_string(rcode r) {
  switch (r) {
    case rcode::noerror: return "NOERROR";
    case rcode::formerr: return "FORMERR";
    case rcode::servfail: return "SERVFAIL";
    case rcode::nxdomain: return "NXDOMAIN";
    case rcode::notimp: return "NOTIMP";
    case rcode::refused: return "REFUSED";
  }
  return "RCODE?";
}

namespace {

std::uint16_t u16(std::string_view m, std::size_t at) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(m[at]) << 8 | static_cast<unsigned char>(m[at + 1]));
}

void put16(std::string& out, std::uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v & 0xff));
}

void put32(std::string& out, std::uint32_t v) {
  put16(out, static_cast<std::uint16_t>(v >> 16));
  put16(out, static_cast<std::uint16_t>(v & 0xffff));
}

// Reads the name at `at`; on success `end` is the offset after it in the
// message's own bytes (the first pointer ends it there). Returns the invalid
// reason, or empty.
std::string_view read_name(std::string_view m, std::size_t at, std::string& name, std::size_t& end) {
  std::size_t wire = 1;  // bytes of the name in uncompressed wire form (the root's zero byte)
  int jumps = 0;
  bool jumped = false;
  std::size_t pos = at;
  for (;;) {
    if (pos >= m.size()) return "truncated_name";
    const auto len = static_cast<unsigned char>(m[pos]);
    if ((len & 0xc0) == 0xc0) {
      if (pos + 1 >= m.size()) return "truncated_name";
      const std::size_t target = u16(m, pos) & 0x3fff;
      // Strictly backwards, to the start of a name seen earlier in the message:
      // no loops.
      if (target >= pos || target < header_bytes) return "bad_pointer";
      if (++jumps > max_pointers) return "pointer_loop";
      if (!jumped) end = pos + 2;
      jumped = true;
      pos = target;
      continue;
    }
    if ((len & 0xc0) != 0) return "bad_label";
    if (len == 0) {
      if (!jumped) end = pos + 1;
      return {};
    }
    if (pos + 1 + len > m.size()) return "truncated_name";
    wire += 1 + len;
    if (wire > 255) return "name_too_long";
    // A dot inside a label would make the text name another name (and one
    // that cannot be written back label by label): refused as no host name
    // has one.
    if (m.substr(pos + 1, len).find('.') != std::string_view::npos) return "bad_label";
    if (!name.empty()) name.push_back('.');
    for (std::size_t i = 0; i < len; ++i)
      name.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(m[pos + 1 + i]))));
    pos += 1 + len;
  }
}

void put_name(std::string& out, std::string_view name) {
  while (!name.empty()) {
    const auto dot = name.find('.');
    const auto label = name.substr(0, dot);
    if (label.empty() || label.size() > 63) throw std::invalid_argument("not a DNS name");
    out.push_back(static_cast<char>(label.size()));
    out.append(label);
    name = dot == std::string_view::npos ? std::string_view{} : name.substr(dot + 1);
  }
  out.push_back('\0');
}

}  // namespace

parse_result<query> parse_query(std::string_view m) {
  parse_result<query> r;
  auto refuse = [&r](std::string_view why) {
    r.status = parse_status::invalid;
    r.reason = why;
    return r;
  };
  if (m.size() < header_bytes) return refuse("short_header");
  const std::uint16_t flags = u16(m, 2);
  if (flags & 0x8000) return refuse("not_a_query");
  if (((flags >> 11) & 0xf) != 0) return refuse("bad_opcode");
  if (u16(m, 4) != 1) return refuse("question_count");
  r.value.id = u16(m, 0);
  r.value.recursion_desired = (flags & 0x0100) != 0;
  std::size_t end = 0;
  if (const auto why = read_name(m, header_bytes, r.value.q.name, end); !why.empty()) return refuse(why);
  if (end + 4 > m.size()) return refuse("truncated_question");
  r.value.q.qtype = u16(m, end);
  r.value.q.qclass = u16(m, end + 2);
  r.status = parse_status::complete;
  r.consumed = end + 4;
  return r;
}

std::optional<std::uint16_t> message_id(std::string_view m) {
  if (m.size() < 2) return std::nullopt;
  return u16(m, 0);
}

std::string build_truncated_response(std::uint16_t id, bool recursion_desired, const question& q) {
  std::string out = build_response(id, recursion_desired, &q, rcode::noerror);
  out[2] = static_cast<char>(static_cast<unsigned char>(out[2]) | 0x02);  // TC: bit 9 of the flags
  return out;
}

std::string build_response(std::uint16_t id, bool recursion_desired, const question* q, rcode rc,
                           const answer_set& answers, std::uint32_t ttl, std::string_view route_txt) {
  std::string out;
  put16(out, id);
  put16(out, static_cast<std::uint16_t>(0x8000 | 0x0400 | (recursion_desired ? 0x0100 : 0) |
                                        static_cast<std::uint16_t>(rc)));
  const bool with_answers = q != nullptr && rc == rcode::noerror && (q->qtype == type_a || q->qtype == type_aaaa);
  put16(out, q ? 1 : 0);
  put16(out, static_cast<std::uint16_t>(with_answers ? answers.addresses.size() : 0));
  put16(out, 0);
  const bool with_txt = q != nullptr && !route_txt.empty();
  put16(out, with_txt ? 1 : 0);
  if (q == nullptr) return out;
  put_name(out, q->name);
  put16(out, q->qtype);
  put16(out, q->qclass);
  if (with_answers) {
    const std::size_t len = q->qtype == type_a ? 4 : 16;
    for (const auto& a : answers.addresses) {
      put16(out, 0xc000 | header_bytes);  // the question's name
      put16(out, q->qtype);
      put16(out, class_in);
      put32(out, ttl);
      put16(out, static_cast<std::uint16_t>(len));
      out.append(reinterpret_cast<const char*>(a.data()), len);
    }
  }
  if (with_txt) {
    const std::string_view text = route_txt.substr(0, max_txt_string);
    put16(out, 0xc000 | header_bytes);
    put16(out, type_txt);
    put16(out, class_in);
    put32(out, 0);
    put16(out, static_cast<std::uint16_t>(1 + text.size()));
    out.push_back(static_cast<char>(text.size()));
    out.append(text);
  }
  return out;
}

std::string format_route_txt(std::string_view listener, std::string_view route_value) {
  std::string out(route_txt_prefix);
  out.append(listener).append(" ").append(route_value);
  if (out.size() > max_txt_string) out.resize(max_txt_string);
  return out;
}

std::optional<route_txt> parse_route_txt(std::string_view txt) {
  if (txt.substr(0, route_txt_prefix.size()) != route_txt_prefix) return std::nullopt;
  txt.remove_prefix(route_txt_prefix.size());
  const auto space = txt.find(' ');
  if (space == 0 || space == std::string_view::npos) return std::nullopt;
  return route_txt{std::string(txt.substr(0, space)), std::string(txt.substr(space + 1))};
}

parse_result<response> parse_response(std::string_view m) {
  parse_result<response> r;
  auto refuse = [&r](std::string_view why) {
    r.status = parse_status::invalid;
    r.reason = why;
    return r;
  };
  if (m.size() < header_bytes) return refuse("short_header");
  const std::uint16_t flags = u16(m, 2);
  if ((flags & 0x8000) == 0) return refuse("not_a_response");
  r.value.id = u16(m, 0);
  r.value.rc = static_cast<rcode>(flags & 0xf);
  r.value.truncated = (flags & 0x0200) != 0;
  const std::size_t qd = u16(m, 4), an = u16(m, 6), ns = u16(m, 8), ar = u16(m, 10);
  std::size_t pos = header_bytes;
  for (std::size_t i = 0; i < qd; ++i) {
    question q;
    std::size_t end = 0;
    if (const auto why = read_name(m, pos, q.name, end); !why.empty()) return refuse(why);
    if (end + 4 > m.size()) return refuse("truncated_question");
    q.qtype = u16(m, end);
    q.qclass = u16(m, end + 2);
    if (i == 0) r.value.q = std::move(q);
    pos = end + 4;
  }
  for (std::size_t i = 0; i < an + ns + ar; ++i) {
    std::string owner;
    std::size_t end = 0;
    if (const auto why = read_name(m, pos, owner, end); !why.empty()) return refuse(why);
    if (end + 10 > m.size()) return refuse("truncated_record");
    const std::uint16_t type = u16(m, end);
    const std::size_t rdlen = u16(m, end + 8);
    const std::size_t rdata = end + 10;
    if (rdata + rdlen > m.size()) return refuse("truncated_record");
    if (i < an && ((type == type_a && rdlen == 4) || (type == type_aaaa && rdlen == 16))) {
      std::array<std::uint8_t, 16> a{};
      std::copy_n(reinterpret_cast<const std::uint8_t*>(m.data() + rdata), rdlen, a.begin());
      r.value.addresses.push_back(a);
      r.value.address_types.push_back(type);
    } else if (i >= an + ns && type == type_txt) {
      std::string text;
      for (std::size_t at = rdata; at < rdata + rdlen;) {
        const std::size_t len = static_cast<unsigned char>(m[at]);
        if (at + 1 + len > rdata + rdlen) return refuse("bad_txt");
        text.append(m.substr(at + 1, len));
        at += 1 + len;
      }
      r.value.additional_txt.push_back(std::move(text));
    }
    pos = rdata + rdlen;
  }
  r.status = parse_status::complete;
  r.consumed = pos;
  return r;
}

zone_answer answer_in_zone(const zone_rules& z, const question& q) {
  zone_answer a;
  std::string_view name = q.name;
  const bool at_apex = name == z.zone;
  const bool under = name.size() > z.zone.size() && name.substr(name.size() - z.zone.size()) == z.zone &&
                     name[name.size() - z.zone.size() - 1] == '.';
  if (q.qclass != class_in || (!at_apex && !under)) return a;  // REFUSED: not ours
  a.rc = rcode::noerror;
  if (under) {
    // The label right under the zone: delay-MS.
    const std::string_view rest = name.substr(0, name.size() - z.zone.size() - 1);
    const auto dot = rest.rfind('.');
    const std::string_view label = dot == std::string_view::npos ? rest : rest.substr(dot + 1);
    constexpr std::string_view prefix = "delay-";
    if (label.substr(0, prefix.size()) == prefix) {
      std::uint32_t ms = 0;
      const auto digits = label.substr(prefix.size());
      const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ms);
      if (ec == std::errc::result_out_of_range || (ec == std::errc{} && p == digits.data() + digits.size()))
        a.delay_ms = ec == std::errc{} ? std::min(ms, max_delay_ms) : max_delay_ms;
    }
  }
  if (q.qtype == type_a) {
    std::array<std::uint8_t, 16> v{};
    std::copy(z.v4.begin(), z.v4.end(), v.begin());
    a.answers.addresses.push_back(v);
  } else if (q.qtype == type_aaaa) {
    a.answers.addresses.push_back(z.v6);
  }
  return a;
}

std::string build_query(std::uint16_t id, std::string_view name, std::uint16_t qtype) {
  std::string out;
  put16(out, id);
  put16(out, 0x0100);
  put16(out, 1);
  put16(out, 0);
  put16(out, 0);
  put16(out, 0);
  put_name(out, name);
  put16(out, qtype);
  put16(out, class_in);
  return out;
}

}  // namespace vlessbench::dns
