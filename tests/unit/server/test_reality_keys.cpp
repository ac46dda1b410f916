// server/reality_keys: where a REALITY listener's key comes from when the config has none. With the
// certificate in memory (the embedded default) the daemon makes one per start, a reload keeps the
// running one, and `links` cannot know it; with [tls] generate it is kept beside the certificate.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "core/config/config.hpp"
#include "server/reality_keys.hpp"

using namespace vlessbench;

namespace {

const reality::key32 zero_key{};

std::string message_of(config c, bool create) {
  try {
    resolve_reality_keys(c, create);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// The default's REALITY listener, found by name (other listeners come after it).
std::optional<reality::settings>& reality_of(config& c) {
  const auto it = std::find_if(c.vless.begin(), c.vless.end(), [](const auto& v) { return v.name == "reality"; });
  REQUIRE(it != c.vless.end());
  return it->reality;
}

}  // namespace

TEST_CASE("the embedded default's REALITY key: made at each start, kept by a reload", "[reality]") {
  config first = default_config();
  REQUIRE(reality_of(first));
  REQUIRE(reality_of(first)->private_key == zero_key);
  resolve_reality_keys(first, true);
  const auto made = reality_of(first)->private_key;
  CHECK(made != zero_key);

  config second = default_config();
  resolve_reality_keys(second, true);
  CHECK(reality_of(second)->private_key != made);  // another start, another key

  config reloaded = default_config();
  resolve_reality_keys(reloaded, true, &first);
  CHECK(reality_of(reloaded)->private_key == made);

  // `links` on a config whose key lives only in the running daemon says where the links are.
  const auto why = message_of(default_config(), false);
  CHECK(why.find("listener reality: its REALITY key is made at each start") != std::string::npos);
  CHECK(why.find("start-up lines") != std::string::npos);
  CHECK(why.find("private_key") != std::string::npos);
}

TEST_CASE("a REALITY key beside a generated certificate: made once, read after", "[reality]") {
  const auto dir = std::filesystem::temp_directory_path() / ("vlessbench-reality-keys-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  config c = default_config();
  c.tls.cert = (dir / "cert.pem").string();
  c.tls.key = (dir / "key.pem").string();
  c.tls.generate = true;
  CHECK(message_of(c, false).find("no REALITY key yet") != std::string::npos);
  config started = c;
  resolve_reality_keys(started, true);
  CHECK(std::filesystem::exists(dir / "reality-reality.key"));
  config read = c;
  resolve_reality_keys(read, false);
  CHECK(reality_of(read)->private_key == reality_of(started)->private_key);
  c.tls.generate = false;  // a certificate the user keeps: no folder of ours to write into
  CHECK(message_of(c, true).find("needs [tls] generate = true") != std::string::npos);
  // What --check and the start report before anything is written.
  REQUIRE(reality_key_problem(c));
  CHECK(reality_key_problem(c)->find("listener reality: security = \"reality\" without private_key needs [tls] "
                                     "generate = true") == 0);
  c.tls.generate = true;
  CHECK_FALSE(reality_key_problem(c));
  CHECK_FALSE(reality_key_problem(default_config()));
  std::filesystem::remove_all(dir);
}
