#pragma once
// A REALITY listener without a private_key gets one made on its first start and kept, like the
// generated certificate: in the state folder (tls.cert's folder) as reality-<listener>.key, the
// base64url key on one line; with the certificate in memory (the embedded default) a fresh key
// each start. `links` reads the same file (create = false makes none).
#include "core/config/config.hpp"

namespace vlessbench {

// Fills every REALITY listener's key that the config leaves to the daemon from its file beside the
// certificate ([tls] generate), made there when create is set and it is missing. Throws
// std::runtime_error with the reason and the remedy: no [tls] generate to keep a key, a file that
// holds no key or cannot be written, or (create unset: `links`) no key made yet.
void resolve_reality_keys(config& c, bool create);

}  // namespace vlessbench
