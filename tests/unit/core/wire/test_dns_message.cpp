#include <catch2/catch.hpp>

#include <string>

#include "bytes.hpp"
#include "core/wire/dns_message.hpp"

using namespace vlessbench;
using vlessbench::test::bytes;

namespace {
// Header: id 0x1234, RD, one question.
const std::string head = bytes({0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00});
}  // namespace

TEST_CASE("dns: a query parses to its id, name (lower case) and type", "[dns]") {
  const std::string q = dns::build_query(0x1234, "Www.VlessBench.test", dns::type_aaaa);
  CHECK(q.substr(0, 12) == head);
  auto r = dns::parse_query(q + "edns");
  REQUIRE(r.complete());
  CHECK(r.consumed == q.size());
  CHECK(r.value.id == 0x1234);
  CHECK(r.value.recursion_desired);
  CHECK(r.value.q.name == "www.vlessbench.test");
  CHECK(r.value.q.qtype == dns::type_aaaa);
  CHECK(r.value.q.qclass == dns::class_in);
}

TEST_CASE("dns: malformed queries are invalid with a reason", "[dns]") {
  auto reason = [](const std::string& m) { return std::string(dns::parse_query(m).reason); };
  CHECK(reason(head.substr(0, 11)) == "short_header");
  std::string resp = head;
  resp[2] = static_cast<char>(0x81);
  CHECK(reason(resp + bytes({0, 0, 1, 0, 1})) == "not_a_query");
  std::string op = head;
  op[2] = 0x11;  // opcode 2 (status)
  CHECK(reason(op + bytes({0, 0, 1, 0, 1})) == "bad_opcode");
  std::string two = head;
  two[5] = 2;
  CHECK(reason(two + bytes({0, 0, 1, 0, 1})) == "question_count");
  CHECK(reason(head + bytes({3}) + "ab") == "truncated_name");
  CHECK(reason(head + bytes({0x40, 0})) == "bad_label");
  // A dot byte inside a label ("\x02.a"): read as text it would be another
  // name, and writing the question back would fail (the reviewer's crash).
  CHECK(reason(head + bytes({2}) + ".a" + bytes({0, 0, 1, 0, 1})) == "bad_label");
  CHECK(reason(head + bytes({1}) + "." + bytes({0, 0, 1, 0, 1})) == "bad_label");
  CHECK(reason(head + bytes({1}) + "a" + bytes({0, 0})) == "truncated_question");
  std::string long_name;
  for (int i = 0; i < 5; ++i) long_name += bytes({63}) + std::string(63, 'a');
  CHECK(reason(head + long_name + bytes({0, 0, 1, 0, 1})) == "name_too_long");
}

TEST_CASE("dns: compression pointers only backwards, and a bounded number of them", "[dns]") {
  // A pointer to itself, forward, into the header: refused at once.
  CHECK(dns::parse_query(head + bytes({0xc0, 12, 0, 1, 0, 1})).reason == "bad_pointer");
  CHECK(dns::parse_query(head + bytes({0xc0, 40, 0, 1, 0, 1})).reason == "bad_pointer");
  CHECK(dns::parse_query(head + bytes({0xc0, 2, 0, 1, 0, 1})).reason == "bad_pointer");
  // A loop of backward pointers: "a" then a pointer back to the label before
  // it.
  //   12: 1 'a' | 14: 0xc0 12  -> reads "a", jumps to 12, reads "a", reaches 14
  //   again ...
  CHECK(dns::parse_query(head + bytes({1, 'a', 0xc0, 12, 0, 1, 0, 1})).reason == "pointer_loop");
  // A legitimate backward pointer: a name, then the question's name pointing
  // back at it. The question here is the first thing after the header, so put
  // the pointer at its end instead:
  //   12: 1 'x' 0xc0 -> not allowed (points at 12+, i.e. itself or later)
  CHECK(dns::parse_query(head + bytes({1, 'x', 0xc0, 14, 0, 1, 0, 1})).reason == "bad_pointer");
}

TEST_CASE("dns: responses echo the question and carry the answers", "[dns]") {
  dns::question q{"a.vlessbench.test", dns::type_a, dns::class_in};
  dns::answer_set set;
  set.addresses.push_back({127, 0, 0, 1});
  const std::string m = dns::build_response(7, true, &q, dns::rcode::noerror, set, 60);
  const std::string name = bytes({1}) + "a" + bytes({10}) + "vlessbench" + bytes({4}) + "test" + bytes({0});
  CHECK(m == bytes({0, 7, 0x85, 0x00, 0, 1, 0, 1, 0, 0, 0, 0}) + name + bytes({0, 1, 0, 1}) +
                 bytes({0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1}));
  // FORMERR without a question: the header alone.
  CHECK(dns::build_response(9, false, nullptr, dns::rcode::formerr) ==
        bytes({0, 9, 0x84, 0x01, 0, 0, 0, 0, 0, 0, 0, 0}));
  // REFUSED keeps the question, no answers.
  const std::string refused = dns::build_response(1, false, &q, dns::rcode::refused, set);
  CHECK(refused.substr(0, 12) == bytes({0, 1, 0x84, 0x05, 0, 1, 0, 0, 0, 0, 0, 0}));
  // What it builds, the parser reads back as a question (flags aside).
  std::string as_query = m;
  as_query[2] = 0x01;
  auto r = dns::parse_query(as_query);
  REQUIRE(r.complete());
  CHECK(r.value.q.name == "a.vlessbench.test");
  CHECK(dns::message_id(m) == 7);
  CHECK_FALSE(dns::message_id("x"));
}

TEST_CASE("dns: the zone's rules", "[dns]") {
  const dns::zone_rules z;
  auto ask = [&](const std::string& name, std::uint16_t type = dns::type_a) {
    return dns::answer_in_zone(z, dns::question{name, type, dns::class_in});
  };
  CHECK(ask("example.com").rc == dns::rcode::refused);
  CHECK(ask("xvlessbench.test").rc == dns::rcode::refused);
  CHECK(dns::answer_in_zone(z, {"a.vlessbench.test", dns::type_a, 3}).rc == dns::rcode::refused);
  auto a = ask("host.vlessbench.test");
  CHECK(a.rc == dns::rcode::noerror);
  REQUIRE(a.answers.addresses.size() == 1);
  CHECK(a.answers.addresses[0][0] == 127);
  CHECK(a.delay_ms == 0);
  auto six = ask("vlessbench.test", dns::type_aaaa);
  REQUIRE(six.answers.addresses.size() == 1);
  CHECK(six.answers.addresses[0][15] == 1);
  CHECK(ask("x.vlessbench.test", 16).answers.addresses.empty());  // TXT: NOERROR, no data
  CHECK(ask("x.vlessbench.test", 16).rc == dns::rcode::noerror);
  CHECK(ask("name.delay-250.vlessbench.test").delay_ms == 250);
  CHECK(ask("delay-40.vlessbench.test").delay_ms == 40);
  CHECK(ask("name.delay-999999.vlessbench.test").delay_ms == dns::max_delay_ms);
  CHECK(ask("name.delay-99999999999999999999.vlessbench.test").delay_ms == dns::max_delay_ms);
  CHECK(ask("delay-250.x.vlessbench.test").delay_ms == 0);  // only right under the zone
  CHECK(ask("name.delay-2x.vlessbench.test").delay_ms == 0);
}

TEST_CASE("dns: the route TXT record round-trips through a response", "[dns]") {
  const std::string txt = dns::format_route_txt("dns", "vless session=7 user=alice");
  CHECK(txt == "VLESSBENCH-DNS dns vless session=7 user=alice");
  const auto back = dns::parse_route_txt(txt);
  REQUIRE(back);
  CHECK(back->listener == "dns");
  CHECK(back->route == "vless session=7 user=alice");
  CHECK_FALSE(dns::parse_route_txt("VLESSBENCH-DNS "));
  CHECK_FALSE(dns::parse_route_txt("VLESSBENCH-DNS dns"));
  CHECK_FALSE(dns::parse_route_txt("v=spf1 -all"));
  // Cut at one character-string; the session, first, survives.
  const std::string long_txt = dns::format_route_txt("dns", "vless session=9 user=" + std::string(400, 'u'));
  CHECK(long_txt.size() == dns::max_txt_string);
  REQUIRE(dns::parse_route_txt(long_txt));

  dns::question q{"a.vlessbench.test", dns::type_a, dns::class_in};
  dns::answer_set set;
  set.addresses.push_back({127, 0, 0, 2});
  const std::string m = dns::build_response(0xbeef, true, &q, dns::rcode::noerror, set, 60, txt);
  CHECK(m.substr(0, 12) == bytes({0xbe, 0xef, 0x85, 0x00, 0, 1, 0, 1, 0, 0, 0, 1}));
  auto r = dns::parse_response(m);
  REQUIRE(r.complete());
  CHECK(r.consumed == m.size());
  CHECK(r.value.id == 0xbeef);
  CHECK(r.value.rc == dns::rcode::noerror);
  REQUIRE(r.value.q);
  CHECK(r.value.q->name == "a.vlessbench.test");
  REQUIRE(r.value.addresses.size() == 1);
  CHECK(r.value.address_types[0] == dns::type_a);
  CHECK(r.value.addresses[0][3] == 2);
  REQUIRE(r.value.additional_txt.size() == 1);
  CHECK(r.value.additional_txt[0] == txt);

  // REFUSED: the question and the TXT, no answer; AAAA: 16 bytes.
  const auto refused = dns::parse_response(dns::build_response(1, false, &q, dns::rcode::refused, set, 60, txt));
  REQUIRE(refused.complete());
  CHECK(refused.value.rc == dns::rcode::refused);
  CHECK(refused.value.addresses.empty());
  CHECK(refused.value.additional_txt.size() == 1);
  dns::question q6{"a.vlessbench.test", dns::type_aaaa, dns::class_in};
  dns::answer_set set6;
  set6.addresses.push_back({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  const auto six = dns::parse_response(dns::build_response(2, false, &q6, dns::rcode::noerror, set6));
  REQUIRE(six.complete());
  REQUIRE(six.value.address_types.size() == 1);
  CHECK(six.value.address_types[0] == dns::type_aaaa);
  CHECK(six.value.additional_txt.empty());
}

TEST_CASE("dns: malformed responses are refused with a reason", "[dns]") {
  CHECK(dns::parse_response("short").reason == "short_header");
  CHECK(dns::parse_response(dns::build_query(1, "a.test", dns::type_a)).reason == "not_a_response");
  dns::question q{"a.vlessbench.test", dns::type_a, dns::class_in};
  dns::answer_set set;
  set.addresses.push_back({127, 0, 0, 1});
  const std::string m =
      dns::build_response(3, false, &q, dns::rcode::noerror, set, 60, dns::format_route_txt("dns", "direct"));
  // Cut inside the last record.
  CHECK(dns::parse_response(m.substr(0, m.size() - 3)).reason == "truncated_record");
  // A TXT character-string longer than its record.
  std::string bad = m;
  bad[bad.size() - dns::format_route_txt("dns", "direct").size() - 1] = 100;
  CHECK(dns::parse_response(bad).reason == "bad_txt");
}

TEST_CASE("dns: rate limiting's truncated answer: TC, the question, nothing else, no longer than the query", "[dns]") {
  const std::string query = dns::build_query(0x4242, "Slip.VlessBench.test", dns::type_a);
  const auto q = dns::parse_query(query);
  REQUIRE(q.complete());
  const std::string tc = dns::build_truncated_response(q.value.id, q.value.recursion_desired, q.value.q);
  CHECK(tc.size() <= query.size());
  const auto r = dns::parse_response(tc);
  REQUIRE(r.complete());
  CHECK(r.value.id == 0x4242);
  CHECK(r.value.truncated);
  CHECK(r.value.rc == dns::rcode::noerror);
  REQUIRE(r.value.q.has_value());
  CHECK(r.value.q->name == "slip.vlessbench.test");
  CHECK(r.value.addresses.empty());
  CHECK(r.value.additional_txt.empty());  // no route proof: nothing but the question
  // A full answer is not truncated.
  CHECK_FALSE(dns::parse_response(dns::build_response(1, true, &q.value.q, dns::rcode::noerror)).value.truncated);
}
