#pragma once
// A REALITY listener without a private_key gets one made by the daemon. With [tls] generate it is
// made on the first start and kept in the state folder (tls.cert's folder) as
// reality-<listener>.key, the base64url key on one line, and `links` reads the same file. With
// the certificate in memory (the embedded default, a config without [tls] cert) there is no
// folder to keep it in: the key is made at each start, like the certificate, and a reload keeps
// the running one; the daemon's start-up lines carry its links.
#include <optional>
#include <string>

#include "core/config/config.hpp"

namespace vlessbench {

// Fills every REALITY listener's key that the config leaves to the daemon. create = false is
// `links`: nothing is made. running is the daemon's config on a reload (its in-memory keys are
// kept for listeners of the same name). Throws std::runtime_error with the reason and the remedy:
// a certificate file without [tls] generate, a key file that holds no key or cannot be written,
// no key made yet (`links` before the first start), or a key made at each start (`links`).
void resolve_reality_keys(config& c, bool create, const config* running = nullptr);

// What --check can say without writing: a REALITY listener that leaves its key to the daemon
// while the certificate is the user's own (no [tls] generate, so no folder of ours to keep it in).
std::optional<std::string> reality_key_problem(const config& c);

}  // namespace vlessbench
