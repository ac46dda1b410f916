#pragma once
// DNS rebinding (docs/dashboard.md, "Which Host names the listener"): which Host header values name a
// listener. The admin listener and a target's index page (docs/target.md) both ask this one check.
#include <string>
#include <string_view>
#include <vector>

#include <asio/ip/address.hpp>

namespace vlessbench {

// An IP literal equal to the address the connection arrived on (so a listener on 0.0.0.0 accepts
// each of its local addresses), localhost, or one of `names` (normalize_host_name's form); any port
// (a forward, ssh -L, changes it). Anything parse_host_header refuses names nothing.
bool host_names_listener(std::string_view host_value, const asio::ip::address& local,
                         const std::vector<std::string>& names);

}  // namespace vlessbench
