#pragma once
// The config reader's shared pieces (core/config/config.cpp reads the global tables and the rules across
// them, core/config/config_listeners.cpp every listener table): not an interface for anything else.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <asio/ip/tcp.hpp>

#include "core/config/config.hpp"
#include "core/config/toml_reader.hpp"

namespace vlessbench::config_schema {

// Linux refuses to bind a.b.c.d:P next to a listening 0.0.0.0:P (and [x]:P next to [::]:P) even
// with SO_REUSEADDR, so those pairs are as much a clash as two identical endpoints.
bool endpoints_clash(const asio::ip::tcp::endpoint& a, const asio::ip::tcp::endpoint& b);

// A user or listener name: it travels in the X-Vlessbench-Route header and space-separated log
// fields. False (with the error added) when it may not be used.
bool check_name(const toml_reader::table_reader& r, const std::string& name);

// What the listener tables declared, for the rules across tables.
struct listeners_read {
  std::size_t declared = 0;  // entries in the file, valid or not
  struct exposed {
    std::string name;
    asio::ip::tcp::endpoint listen;
    std::uint32_t line;
  };
  std::optional<exposed> first_exposed;  // the first listener reachable from off this machine
};

// Reads [[vless]], [[target]], [[banner]], [[udp_target]] and [[dns]] into cfg (errors added to
// root's list): names and endpoints are unique across kinds.
listeners_read read_listeners(const toml_reader::table_reader& root, config& cfg);

}  // namespace vlessbench::config_schema
