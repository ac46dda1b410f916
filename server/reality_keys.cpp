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

// The certificate in memory: a key for this start (or the running daemon's, on a reload).
void resolve_in_memory(vless_listener_config& v, bool create, const config* running) {
  if (!create)
    throw std::runtime_error("listener " + v.name +
                             ": its REALITY key is made at each start (the certificate is in memory: no [tls] "
                             "generate folder to keep it in), so only the daemon's start-up lines carry its links "
                             "(pbk=); set private_key (`xray x25519` makes one), or [tls] cert with generate = true");
  if (running) {
    for (const auto& old : running->vless)
      if (old.name == v.name && old.reality && old.reality->key_generated) {
        v.reality->private_key = old.reality->private_key;
        return;
      }
  }
  v.reality->private_key = reality::generate_private_key();
}

// [tls] generate: the key kept beside the certificate, made there on the first start.
void resolve_in_file(const config& c, vless_listener_config& v, bool create) {
  const auto path = key_file(c, v.name);
  std::ifstream in(path);
  std::string line;
  if (in && std::getline(in, line)) {
    const auto key = reality::decode_key(line);
    if (!key)
      throw std::runtime_error(path.string() +
                               ": not a REALITY private key (base64url): delete it and the daemon makes a new one");
    v.reality->private_key = *key;
    return;
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

}  // namespace

std::optional<std::string> reality_key_problem(const config& c) {
  if (c.tls.cert.empty() || c.tls.generate) return std::nullopt;
  for (const auto& v : c.vless)
    if (v.reality && v.reality->key_generated)
      return "listener " + v.name +
             ": security = \"reality\" without private_key needs [tls] generate = true (the daemon keeps the key "
             "it makes beside the certificate); or set private_key (`xray x25519` makes one)";
  return std::nullopt;
}

void resolve_reality_keys(config& c, bool create, const config* running) {
  if (const auto problem = reality_key_problem(c)) throw std::runtime_error(*problem);
  for (auto& v : c.vless) {
    if (!v.reality || !v.reality->key_generated) continue;
    if (c.tls.cert.empty())
      resolve_in_memory(v, create, running && running->tls.cert.empty() ? running : nullptr);
    else
      resolve_in_file(c, v, create);
  }
}

}  // namespace vlessbench
