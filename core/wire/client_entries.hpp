#pragma once
// The entries a user pastes into a real client for one VLESS node, from its share link: a
// Clash/mihomo `proxies:` item (YAML), a sing-box outbound and a v2ray/Xray outbound (JSON). One
// writer for `vlessbenchd links` (server/links.cpp) and `vlessbench clients` (runner/clients.cpp),
// so what the daemon prints is what the runner runs. Pure text: no sockets, no files.
#include <string>

#include "core/wire/share_link.hpp"

namespace vlessbench {

struct client_entry_options {
  std::string fingerprint;       // mihomo's certificate pin (SHA-256, hex with colons); empty: none
  std::string fingerprint_note;  // without a pin: why, as a YAML comment (empty: nothing said)
};

// ws early data is named in the header link.transport.early_data_header says (empty:
// Sec-WebSocket-Protocol).
// "  - name: ..." and its keys, one per line, ending in a newline (YAML under `proxies:`).
std::string mihomo_proxy(const share_link& link, const client_entry_options& opts = {});
// A JSON object, indented by 2.
std::string singbox_outbound(const share_link& link, const client_entry_options& opts = {});
std::string v2ray_outbound(const share_link& link, const client_entry_options& opts = {});

}  // namespace vlessbench
