#pragma once
// Reading a TOML file for a schema (core/config/config.cpp): toml++ behind one call that survives any
// input, typed access to a table's keys, and errors that name the file line and the key's full
// dotted path ("vless[1].tcp.quickack"), collected so that a file reports all its problems at once.
// Core-internal: it exposes toml++ types, which only core/config/*.cpp see (toml++ is a private
// dependency of vlessbench_config).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <toml++/toml.h>

namespace vlessbench::toml_reader {

// Values are echoed inside error messages: quoted, escaped so one error stays one line, and cut at
// 120 bytes (on a UTF-8 boundary) so a pasted certificate cannot flood the log.
std::string quote(std::string_view s);

// "a table", "an integer", ...: what a message says was found.
std::string_view type_name(toml::node_type t);

std::string index_path(std::string_view parent, std::size_t i);  // "vless[2]"

// The problems found in one file, each "FILE:LINE: KEY: message" (KEY left out when empty).
class error_list {
 public:
  explicit error_list(std::string_view file) : file_(file) {}

  void add(std::uint32_t line, std::string_view key, std::string_view message);
  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }
  // Reported top to bottom, as the reader scans the file; ties keep discovery order.
  std::vector<std::string> sorted();

 private:
  std::string file_;
  std::vector<std::pair<std::uint32_t, std::string>> items_;
};

// The line a node or key starts on (1 when toml++ does not know).
std::uint32_t line_of(const toml::source_region& r);

// Typed access to one TOML table; every problem lands in the shared error_list under the key's full
// dotted path and the line of the key (or of the table when the key is absent).
class table_reader {
 public:
  table_reader(const toml::table& table, std::string path, error_list& errors)
      : table_(&table), path_(std::move(path)), errors_(&errors) {}

  const std::string& path() const { return path_; }
  std::string key_path(std::string_view key) const;
  error_list& errors() const { return *errors_; }

  const toml::node* find(std::string_view key) const { return table_->get(key); }
  std::uint32_t line() const;
  std::uint32_t line(std::string_view key) const;

  void error(std::string_view key, std::string_view message) const;
  // "unknown key" for every key of the table not in known.
  void reject_unknown(std::span<const std::string_view> known) const;
  void reject_unknown(std::initializer_list<std::string_view> known) const {
    reject_unknown(std::span<const std::string_view>(known.begin(), known.size()));
  }

  // Absent: nullopt, silently. Present with another type: nullopt and an error.
  std::optional<std::string> string(std::string_view key) const;
  std::optional<bool> boolean(std::string_view key) const;
  std::optional<std::int64_t> integer(std::string_view key) const;
  std::optional<std::vector<std::string>> strings(std::string_view key) const;
  // The sub-table at key, read under "path.key".
  std::optional<table_reader> table(std::string_view key) const;
  // A required string: absent, wrong type and empty are all errors.
  std::optional<std::string> required_string(std::string_view key) const;

  // [[key]]: calls each(reader of key[i], i) for every entry that is a table (an entry that is not
  // is an error). Returns how many entries the file declares, valid or not (1 for a key that is not
  // an array at all), so that a typo never reads as "none declared".
  std::size_t each_table(std::string_view key, const std::function<void(const table_reader&, std::size_t)>& each) const;

 private:
  const toml::node* typed(std::string_view key, toml::node_type want) const;

  const toml::table* table_;
  std::string path_;
  error_list* errors_;
};

// toml::parse that survives any input: nullopt with the syntax error added to errors when the text
// is not TOML. toml++ 3.3 has undefined behaviour on some malformed input (see toml_reader.cpp);
// that input is caught before toml++ sees it and reported as toml++ would.
std::optional<toml::table> parse(std::string_view text, std::string_view source_name, error_list& errors);

}  // namespace vlessbench::toml_reader
