// What `vlessbenchd --check` and the start say about [tls] cert/key files (issue 30 item 9): each
// problem found before a file is opened for real, named with its key and file, with what to do.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/net/tls.hpp"

using namespace vlessbench;
using state = tls::certificate_check::state;

namespace {

struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    char templ[] = "/tmp/vlessbench-tls-XXXXXX";
    REQUIRE(::mkdtemp(templ) != nullptr);
    path = templ;
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all, ignored);
    std::filesystem::remove_all(path, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

tls_config files(const std::filesystem::path& dir, bool generate) {
  tls_config cfg;
  cfg.cert = (dir / "cert.pem").string();
  cfg.key = (dir / "key.pem").string();
  cfg.generate = generate;
  return cfg;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("certificate files: an in-memory certificate and a valid pair pass", "[tls]") {
  CHECK(tls::check_certificate_files(tls_config{}).result == state::ok);
  temp_dir dir;
  const auto cfg = files(dir.path, false);
  const auto pem = tls::make_self_signed({"localhost"}, {"127.0.0.1"});
  write(cfg.cert, pem.cert);
  write(cfg.key, pem.key);
  const auto checked = tls::check_certificate_files(cfg);
  CHECK(checked.result == state::ok);
  CHECK(checked.message.empty());
  (void)tls::make_server_context(cfg);
}

TEST_CASE("certificate files: generate = true needs a folder the daemon can write", "[tls]") {
  temp_dir dir;
  const auto missing = files(dir.path / "state", true);
  auto checked = tls::check_certificate_files(missing);
  CHECK(checked.result == state::problem);
  CHECK(contains(checked.message, "tls.cert: \"" + missing.cert + "\": the folder " + (dir.path / "state").string() +
                                      " does not exist, so tls.generate = true cannot write there: create it"));
  // The start says the same, not the key file's ENOENT.
  CHECK_THROWS_WITH(tls::ensure_certificate(missing), checked.message);

  const auto there = files(dir.path, true);
  checked = tls::check_certificate_files(there);
  CHECK(checked.result == state::will_generate);
  CHECK(contains(checked.message, "does not exist yet: the daemon generates a self-signed certificate there"));
  CHECK(!std::filesystem::exists(there.cert));  // --check writes nothing
  CHECK(tls::ensure_certificate(there));
  CHECK(tls::check_certificate_files(there).result == state::ok);

  if (::geteuid() != 0) {  // root writes anywhere
    temp_dir ro;
    std::filesystem::permissions(ro.path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    checked = tls::check_certificate_files(files(ro.path, true));
    CHECK(checked.result == state::problem);
    CHECK(contains(checked.message, "is not writable by this user (uid "));
  }
}

TEST_CASE("certificate files: a missing file says to set generate = true", "[tls]") {
  temp_dir dir;
  const auto cfg = files(dir.path, false);
  auto checked = tls::check_certificate_files(cfg);
  CHECK(checked.result == state::problem);
  CHECK(checked.message == "tls.cert: \"" + cfg.cert +
                               "\": no such file: set tls.generate = true and the daemon makes a self-signed "
                               "certificate there at its first start (keeping it across restarts), or point tls.cert "
                               "at your certificate (PEM)");
  CHECK_THROWS_WITH(tls::make_server_context(cfg), checked.message);
  CHECK(!contains(checked.message, "OPENSSL_internal"));

  const auto pem = tls::make_self_signed({"localhost"}, {"127.0.0.1"});
  write(cfg.cert, pem.cert);
  checked = tls::check_certificate_files(cfg);
  CHECK(contains(checked.message, "tls.key: \"" + cfg.key + "\": no such file: set tls.generate = true"));
}

TEST_CASE("certificate files: not PEM, a wrong key, an unreadable file", "[tls]") {
  temp_dir dir;
  const auto cfg = files(dir.path, false);
  const auto pem = tls::make_self_signed({"localhost"}, {"127.0.0.1"});
  write(cfg.cert, std::string("\x30\x82\x01\x0a\x02\x82", 6));  // DER starts so
  write(cfg.key, pem.key);
  auto checked = tls::check_certificate_files(cfg);
  CHECK(checked.result == state::problem);
  CHECK(checked.message == "tls.cert: \"" + cfg.cert +
                               "\": not PEM (no \"-----BEGIN CERTIFICATE-----\" line): if it is "
                               "DER, convert it (openssl x509 -inform der -in " +
                               cfg.cert + " -out " + cfg.cert + ".pem) and point tls.cert at the result");
  CHECK_THROWS_WITH(tls::make_server_context(cfg), checked.message);

  write(cfg.cert, pem.cert);
  write(cfg.key, pem.cert);  // a certificate where the key belongs
  checked = tls::check_certificate_files(cfg);
  CHECK(contains(checked.message, "tls.key: \"" + cfg.key + "\": not a PEM private key BoringSSL can read"));

  write(cfg.key, tls::make_self_signed({"other"}, {}).key);
  checked = tls::check_certificate_files(cfg);
  CHECK(checked.message == "tls.key: \"" + cfg.key + "\" does not match tls.cert \"" + cfg.cert +
                               "\": point both at the files of one pair");
  auto generated = cfg;
  generated.generate = true;
  CHECK(contains(tls::check_certificate_files(generated).message, "or delete both and the daemon makes a new pair"));

  std::filesystem::create_directory(dir.path / "folder");
  auto folder = cfg;
  folder.cert = (dir.path / "folder").string();
  CHECK(contains(tls::check_certificate_files(folder).message, "not a regular file"));

  if (::geteuid() != 0) {
    write(cfg.key, pem.key);
    std::filesystem::permissions(cfg.key, std::filesystem::perms::none);
    checked = tls::check_certificate_files(cfg);
    CHECK(contains(checked.message, "tls.key: \"" + cfg.key + "\": not readable by this user (uid "));
  }
}
