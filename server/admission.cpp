#include "server/admission.hpp"

#include "core/wire/vision.hpp"
#include "server/reject_code.hpp"

namespace vlessbench {

bool valid_dns_name(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);  // absolute form
  if (name.empty() || name.size() > 253) return false;
  std::size_t label = 0;
  for (const char c : name) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
    } else if (++label > 63) {
      return false;
    }
  }
  return label > 0;
}

bool is_sing_mux_request(const vless::request_header& header) {
  return header.command == static_cast<std::uint8_t>(vless::command::tcp) && header.dest.type == address_type::domain &&
         header.dest.address == sing_mux_domain;
}

admission_verdict admit_request(const config& cfg, const vless::request_header& header) {
  admission_verdict v;
  for (const auto& u : cfg.users) {
    const bool eq = vless::uuid_equal(u.uuid, header.uuid);
    v.user = eq ? &u : v.user;
  }
  auto refuse = [&v](reject_code reason, std::string detail = {}) {
    v.refused = refusal{.reason = to_string(reason), .detail = std::move(detail)};
    return v;
  };
  if (v.user == nullptr) return refuse(reject_code::unknown_user);
  // Vision is served on raw TLS (server/vision_session.hpp refuses it on other transports).
  if (!header.flow.empty() && header.flow != vision::flow_name)
    return refuse(reject_code::flow_unsupported, header.flow);
  // sing-mux (sing-box's and mihomo's multiplex) dials this name over a TCP request; each stream names its
  // own destination. Over UDP it means nothing: refused by name, not as a name that does not resolve.
  if (header.dest.type == address_type::domain && header.dest.address == sing_mux_domain) {
    if (is_sing_mux_request(header)) return v;
    return refuse(
        reject_code::sing_mux_not_tcp,
        "sing-mux runs over a VLESS TCP request (command 1), this one is command " + std::to_string(header.command));
  }
  switch (header.command) {
    case 1:
    case 2: break;
    case 3: return v;  // Mux.Cool: no destination in the header; each New frame names one

    default: return refuse(reject_code::bad_command, std::to_string(header.command));
  }
  if (header.dest.port == 0) return refuse(reject_code::bad_port);
  if (header.dest.type == address_type::domain && !valid_dns_name(header.dest.address))
    return refuse(reject_code::bad_domain, "not a DNS name (at most 253 bytes, labels of 1..63)");
  return v;
}

}  // namespace vlessbench
