#include "server/ports_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/wire/net_address.hpp"

namespace vlessbench {

namespace {

std::optional<asio::ip::tcp::endpoint> bound_under(const bound_ports& bound, const std::string& name) {
  for (const auto& [n, ep] : bound.listeners)
    if (n == name) return ep;
  return std::nullopt;
}

template <class Endpoint>
asio::ip::tcp::endpoint as_tcp(const Endpoint& ep) {
  return {ep.address(), ep.port()};
}

}  // namespace

std::vector<std::string> resolve_ports(config& c, const bound_ports& bound) {
  std::vector<std::string> missing;
  auto resolve = [&](const std::string& name, auto& listen) {
    if (listen.port() != 0) return;
    if (const auto ep = bound_under(bound, name))
      listen.port(ep->port());
    else
      missing.push_back(name);
  };
  for (auto& v : c.vless) resolve(v.name, v.listen);
  for (auto& t : c.target) resolve(t.name, t.listen);
  for (auto& u : c.udp_target) resolve(u.name, u.listen);
  for (auto& d : c.dns) resolve(d.name, d.listen);
  if (c.admin.listen && c.admin.listen->port() == 0) {
    if (bound.admin)
      c.admin.listen->port(bound.admin->port());
    else
      missing.emplace_back("admin");
  }
  return missing;
}

std::string format_ports_file(const config& c, std::uint64_t generation) {
  using nlohmann::json;
  json listeners = json::array();
  auto add = [&](std::string_view kind, const std::string& name, const asio::ip::tcp::endpoint& ep,
                 std::string_view protocols) {
    listeners.push_back({{"kind", kind}, {"name", name}, {"listen", format_endpoint(ep)}, {"protocols", protocols}});
  };
  for (const auto& v : c.vless) add(to_string(listener_kind::vless), v.name, v.listen, "tcp");
  for (const auto& t : c.target) add(to_string(t.kind()), t.name, t.listen, "tcp");
  for (const auto& u : c.udp_target) add("udp_target", u.name, as_tcp(u.listen), "udp");
  for (const auto& d : c.dns) add("dns", d.name, d.listen, "tcp+udp");
  json out{{"generation", generation},
           {"listeners", std::move(listeners)},
           {"admin", c.admin.listen ? json(format_endpoint(*c.admin.listen)) : json(nullptr)}};
  return out.dump() + "\n";
}

std::optional<bound_ports> parse_ports_file(std::string_view text, std::string& reason) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    reason = "not a JSON object";
    return std::nullopt;
  }
  bound_ports out;
  auto endpoint = [&](const nlohmann::json& v, std::string_view what) -> std::optional<asio::ip::tcp::endpoint> {
    asio::ip::tcp::endpoint ep;
    std::string why;
    if (!v.is_string() || !parse_endpoint(v.get<std::string>(), ep, why)) {
      reason = std::string(what) + ": not an ADDRESS:PORT" + (why.empty() ? "" : " (" + why + ")");
      return std::nullopt;
    }
    return ep;
  };
  const auto listeners = j.find("listeners");
  if (listeners == j.end() || !listeners->is_array()) {
    reason = "no \"listeners\" array";
    return std::nullopt;
  }
  for (const auto& l : *listeners) {
    if (!l.is_object() || !l.contains("name") || !l["name"].is_string() || !l.contains("listen")) {
      reason = "a listener without \"name\" and \"listen\"";
      return std::nullopt;
    }
    const auto name = l["name"].get<std::string>();
    const auto ep = endpoint(l["listen"], "listener \"" + name + "\"");
    if (!ep) return std::nullopt;
    out.listeners.emplace_back(name, *ep);
  }
  if (const auto admin = j.find("admin"); admin != j.end() && !admin->is_null()) {
    out.admin = endpoint(*admin, "admin");
    if (!out.admin) return std::nullopt;
  }
  return out;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
  auto tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.flush();
    if (!f) throw std::runtime_error("cannot write " + tmp.string() + ": " + std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw std::runtime_error("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  }
}

}  // namespace vlessbench
