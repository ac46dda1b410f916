#pragma once
// DNS messages for the [[dns]] responder (docs/target.md): a pure parser for
// queries (RFC 1035 §4.1: header and one question) and a builder for the
// responses, plus the responder's zone rules. No sockets. Over TCP a message is
// framed as a VLESS UDP packet is (u16 big-endian length,
// core/wire/udp_framing.hpp).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire/parse_result.hpp"

namespace vlessbench::dns {

inline constexpr std::uint16_t type_a = 1;
inline constexpr std::uint16_t type_aaaa = 28;
inline constexpr std::uint16_t class_in = 1;
inline constexpr std::size_t header_bytes = 12;
// Compression pointers followed while reading one name: a query has no reason
// to use more than a couple, and a loop must end.
inline constexpr int max_pointers = 8;

enum class rcode : std::uint8_t { noerror = 0, formerr = 1, servfail = 2, nxdomain = 3, notimp = 4, refused = 5 };
std::string_view to_string(rcode r);  // "NOERROR", "FORMERR", ...

struct question {
  std::string name;  // lower case, labels joined by '.', no final dot; "" for the root
  std::uint16_t qtype = 0;
  std::uint16_t qclass = 0;
};

struct query {
  std::uint16_t id = 0;
  bool recursion_desired = false;
  question q;
};

// Parses one whole message (a datagram, or one TCP-framed message). complete:
// consumed = the header and question (anything after it, e.g. an EDNS record,
// is ignored); invalid reasons: "short_header", "not_a_query" (QR set),
// "bad_opcode" (not a standard query), "question_count" (not exactly one),
// "truncated_name", "bad_label" (a reserved label type, or a '.' byte in a label), "name_too_long" (over
// 255 bytes), "bad_pointer" (not strictly backwards into the message),
// "pointer_loop" (more than max_pointers), "truncated_question".
parse_result<query> parse_query(std::string_view message);

// The ID of a message too broken to parse, for its FORMERR (nullopt: under two
// bytes).
std::optional<std::uint16_t> message_id(std::string_view message);

// A response: the question echoed when there is one, then (NOERROR only) an
// answer of its type per address (4 bytes for A, 16 for AAAA), TTL ttl. Flags:
// QR, AA, RD copied, RA clear.
struct answer_set {
  std::vector<std::array<std::uint8_t, 16>> addresses;  // A uses the first 4 bytes
};
// route_txt, when not empty (the responder's route proof, format_route_txt):
// one TXT record in the additional section, owner the question's name, class
// IN, TTL 0 (nothing caches it), one character-string.
std::string build_response(std::uint16_t id, bool recursion_desired, const question* q, rcode rc,
                           const answer_set& answers = {}, std::uint32_t ttl = 60, std::string_view route_txt = {});
// Response rate limiting's "slip" (target/dns_rrl.hpp): NOERROR with TC set, the question and
// nothing else, so a resolver retries over TCP. Never longer than the query it answers when that
// query carried its name uncompressed (the caller checks).
std::string build_truncated_response(std::uint16_t id, bool recursion_desired, const question& q);

// The responder's route proof (docs/target.md), the DNS twin of the UDP echo's
// trailer: "VLESSBENCH-DNS <listener> <route header value>", e.g.
// "VLESSBENCH-DNS dns vless session=7 user=alice". At most 255 bytes (one TXT
// character-string): a longer one is cut, and parse_route_txt still reads the
// listener and what is left of the route (the session comes first).
inline constexpr std::string_view route_txt_prefix = "VLESSBENCH-DNS ";
inline constexpr std::size_t max_txt_string = 255;
inline constexpr std::uint16_t type_txt = 16;
std::string format_route_txt(std::string_view listener, std::string_view route_value);
struct route_txt {
  std::string listener;
  std::string route;  // the route header value, for parse_route_header
};
// nullopt when txt is not a route proof (another prefix, no listener).
std::optional<route_txt> parse_route_txt(std::string_view txt);

// Client side (the runner): a whole response message. complete: consumed = the
// whole message; invalid reasons: "short_header", "not_a_response" (QR clear),
// the name errors of parse_query, "truncated_record", "bad_txt" (a
// character-string past its record).
struct response {
  std::uint16_t id = 0;
  rcode rc = rcode::noerror;
  bool truncated = false;     // TC
  std::optional<question> q;  // the first question, when there is one
  // A (first 4 bytes used) and AAAA answers, in order; other types skipped.
  std::vector<std::array<std::uint8_t, 16>> addresses;
  std::vector<std::uint16_t> address_types;  // type_a / type_aaaa per address
  // TXT records of the additional section, each record's strings joined.
  std::vector<std::string> additional_txt;
};
parse_result<response> parse_response(std::string_view message);

// The responder's rules for one question in its zone: every name at or under
// zone is answered (A with v4, AAAA with v6, other types with no answer); a
// label `delay-MS` right under the zone asks for the answer after MS
// milliseconds (at most max_delay_ms); anything else is REFUSED.
inline constexpr std::uint32_t max_delay_ms = 5'000;
struct zone_rules {
  std::string zone = "vlessbench.test";
  std::array<std::uint8_t, 4> v4{127, 0, 0, 1};
  std::array<std::uint8_t, 16> v6{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  // Not configured: the responder puts the address each query arrived on in v4 / v6 when it
  // is of that family (target/dns_target.cpp), the defaults above otherwise.
  bool v4_from_arrival = false;
  bool v6_from_arrival = false;
};
struct zone_answer {
  rcode rc = rcode::refused;
  answer_set answers;
  std::uint32_t delay_ms = 0;
};
zone_answer answer_in_zone(const zone_rules& z, const question& q);

// Client side (tests, the runner): a query for name and type with id, RD set.
std::string build_query(std::uint16_t id, std::string_view name, std::uint16_t qtype);

}  // namespace vlessbench::dns
