#include "server/reality_keys.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <sys/stat.h>

#include "core/net/reality_auth.hpp"

namespace vlessbench {

namespace {

std::filesystem::path key_file(const config& c, const std::string& listener) {
  return std::filesystem::path(c.tls.cert).parent_path() / ("reality-" + listener + ".key");
}

}  // namespace

void resolve_reality_keys(config& c, bool create) {
  for (auto& v : c.vless) {
    if (!v.reality || !v.reality->key_generated) continue;
    if (c.tls.cert.empty() || !c.tls.generate)
      throw std::runtime_error("listener " + v.name +
                               ": security = \"reality\" without private_key needs [tls] generate = true (the "
                               "daemon keeps the key it makes beside the certificate); or set private_key "
                               "(`xray x25519` makes one)");
    const auto path = key_file(c, v.name);
    std::ifstream in(path);
    std::string line;
    if (in && std::getline(in, line)) {
      const auto key = reality::decode_key(line);
      if (!key)
        throw std::runtime_error(path.string() +
                                 ": not a REALITY private key (base64url): delete it and the daemon makes a new one");
      v.reality->private_key = *key;
      continue;
    }
    if (!create)
      throw std::runtime_error("listener " + v.name + ": no REALITY key yet (" + path.string() +
                               "): the daemon makes it at its first start; start it once, or set private_key");
    v.reality->private_key = reality::generate_private_key();
    const auto old_mask = ::umask(077);
    std::ofstream out(path, std::ios::trunc);
    out << reality::encode_key(v.reality->private_key) << "\n";
    ::umask(old_mask);
    if (!out) throw std::runtime_error(path.string() + ": cannot write the REALITY key");
  }
}

}  // namespace vlessbench
