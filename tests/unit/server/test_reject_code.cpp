// The server's own vless.reject reasons (server/reject_code.hpp): each enumerator has its own
// string, and each string is one docs/sessions.md documents (as `reason`).
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "server/reject_code.hpp"

using namespace vlessbench;

TEST_CASE("reject codes: every enumerator has a distinct, documented string", "[reject_code]") {
  std::ifstream in(std::filesystem::path(VLESSBENCH_SOURCE_DIR) / "docs" / "sessions.md");
  REQUIRE(in);
  const std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::set<std::string> seen;
  for (std::size_t i = 0; i < reject_code_count; ++i) {
    const std::string s(to_string(static_cast<reject_code>(i)));
    INFO("enumerator " << i << ": " << s);
    CHECK(s != "?");
    CHECK(s.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == std::string::npos);
    CHECK(seen.insert(s).second);
    CHECK(docs.find("`" + s + "`") != std::string::npos);
  }
  CHECK(seen.size() == reject_code_count);
  // The count ends at the last enumerator: one past it is no reason.
  CHECK(to_string(static_cast<reject_code>(reject_code_count)) == "?");
}

TEST_CASE("reject codes: the strings are the ones the log has always had", "[reject_code]") {
  CHECK(to_string(reject_code::unknown_user) == "unknown_user");
  CHECK(to_string(reject_code::too_many_sessions_from_client) == "too_many_sessions_from_client");
  CHECK(to_string(reject_code::header_timeout) == "header_timeout");
  CHECK(to_string(reject_code::route_conflict) == "route_conflict");
  CHECK(to_string(reject_code::fd_exhausted) == "fd_exhausted");
}
