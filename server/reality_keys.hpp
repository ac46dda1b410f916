#pragma once
// A REALITY listener without a private_key gets one made on its first start and kept, like the
// generated certificate: in the state folder (tls.cert's folder) as reality-<listener>.key, the
// base64url key on one line; with the certificate in memory (the embedded default) a fresh key
// each start. `links` reads the same file (create = false makes none).
#include "core/config/config.hpp"

namespace vlessbench {

// Fills every generated key of c. Throws std::runtime_error naming the file on I/O errors.
void resolve_reality_keys(config& c, bool create);

}  // namespace vlessbench
