#pragma once
// `vlessbenchd links`: what a user pastes into each client, for every user x VLESS listener.
#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/config.hpp"
#include "core/wire/share_link.hpp"
#include "target/index_page.hpp"

namespace vlessbench {

struct links_options {
  std::string host;  // address clients dial; empty: the listener's own (must not be 0.0.0.0)
  std::string sni = "localhost";
  bool qr = true;  // terminal QR code of each share link
};

// The share link of one listener for one user: its transport's type, path, host and early data.
share_link listener_link(const vless_listener_config& l, const user_config& u, const std::string& host,
                         const std::string& sni, bool insecure);

// What the daemon prints at start for one listener and user: its link, and on a REALITY listener on
// raw TCP its Vision link (NAME-vision) too, as REALITY is deployed: its key may exist only in
// that process, so those lines are where a user finds it.
std::vector<share_link> startup_links(const vless_listener_config& l, const user_config& u, const std::string& host,
                                      bool insecure);

// Every link of one listener: each user's, and on raw TLS each user's again with flow
// xtls-rprx-vision (named NAME-vision), in that order.
struct user_link {
  const user_config* user;
  share_link link;
};
std::vector<user_link> listener_links(const vless_listener_config& l, const config& cfg, const std::string& host,
                                      const std::string& sni);

// What a transport is, as `links` names it: "tls", "ws", "ws over plain TCP", ...
std::string transport_words(const transport_spec& t);
// The listener's, naming REALITY when it has it.
std::string transport_words(const vless_listener_config& l);

// The index page of [[target]] `listener` (target/index_page.hpp) under cfg, whose listeners are
// bound (no port 0): every link of every [[vless]] listener, dialling the target's index_host or
// else host, with its QR code. index_links off (or no such target): no links.
// At most max_index_nodes nodes (a QR code each, about 0.4 ms a node on the target's thread); the
// rest are counted in left_out.
inline constexpr std::size_t max_index_nodes = 64;
target::index_content index_content_of(const config& cfg, std::string_view listener, std::string_view host);

// The index pages a daemon serves, rendered once per config (the running one's pointer: a reload
// makes a new one), target and host and then shared: a page costs a render (a QR code per node,
// milliseconds) only the first time. With links on, a Host that names neither the target's
// address, localhost, [admin] hosts nor the target's index_host is refused (misdirected) before
// anything is rendered, so the hosts a cache holds are the machine's own: a browser rotating Host
// names can neither read the links (DNS rebinding) nor make the target render again.
class index_cache {
 public:
  enum class outcome { rendered, cached, misdirected };
  struct result {
    target::index_answer answer;
    outcome how = outcome::rendered;
  };
  result get(const std::shared_ptr<const config>& cfg, std::string_view listener,
             std::optional<std::string_view> host_value, const asio::ip::address& local);
  static constexpr std::size_t max_pages = 32;  // past it (more local addresses and names than that), the oldest go

 private:
  struct entry {
    std::string listener, host;
    std::shared_ptr<const std::string> page;
  };
  std::shared_ptr<const config> cfg_;  // the config the pages were made under
  std::vector<entry> pages_;           // oldest first
};
std::string_view to_string(index_cache::outcome o);  // "rendered", "cached", "misdirected"

// Throws std::runtime_error when a listener has no usable address and no host was given.
void print_links(std::ostream& out, const config& cfg, const links_options& opts);

// The QR code of text as terminal lines (two modules per character, quiet zone included).
std::string terminal_qr(const std::string& text);
// Its modules (libqrencode, error correction L); throws std::runtime_error if it cannot be made.
target::qr_matrix qr_modules(const std::string& text);

}  // namespace vlessbench
