#include "core/toml_reader.hpp"

#include <algorithm>

namespace vlessbench::toml_reader {

namespace {

void append_hex_escape(std::string& out, unsigned char c) {
  static constexpr char hex[] = "0123456789abcdef";
  out += "\\x";
  out += hex[c >> 4];
  out += hex[c & 0xf];
}

// toml++ may echo raw key text in its description; one error must stay one line.
std::string escape_controls(std::string_view s) {
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) append_hex_escape(out, c);
    else out += ch;
  }
  return out;
}

bool is_bare_key(std::string_view k) {
  if (k.empty()) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

}  // namespace

std::string quote(std::string_view s) {
  constexpr std::size_t max_bytes = 120;
  std::string out = "\"";
  std::size_t n = 0;
  for (; n < s.size() && n < max_bytes; ++n) {
    auto c = static_cast<unsigned char>(s[n]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      append_hex_escape(out, c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (n < s.size()) {
    // Do not cut a UTF-8 sequence in half.
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xc0) == 0x80) out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xc0) out.pop_back();
    out += "...";
  }
  out += '"';
  return out;
}

std::string_view type_name(toml::node_type t) {
  switch (t) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::string index_path(std::string_view parent, std::size_t i) {
  return std::string(parent) + "[" + std::to_string(i) + "]";
}

std::uint32_t line_of(const toml::source_region& r) { return r.begin.line == 0 ? 1 : r.begin.line; }

// --- error_list
// ----------------------------------------------------------------------------------

void error_list::add(std::uint32_t line, std::string_view key, std::string_view message) {
  std::string e = file_ + ":" + std::to_string(line) + ": ";
  if (!key.empty()) {
    e += key;
    e += ": ";
  }
  e += message;
  items_.emplace_back(line, std::move(e));
}

std::vector<std::string> error_list::sorted() {
  std::stable_sort(items_.begin(), items_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (auto& [line, text] : items_) out.push_back(std::move(text));
  return out;
}

// --- table_reader
// --------------------------------------------------------------------------------

std::string table_reader::key_path(std::string_view key) const {
  std::string k = is_bare_key(key) ? std::string(key) : quote(key);
  if (path_.empty()) return k;
  return path_ + "." + k;
}

std::uint32_t table_reader::line() const { return line_of(table_->source()); }

std::uint32_t table_reader::line(std::string_view key) const {
  const toml::node* n = find(key);
  return n ? line_of(n->source()) : line();
}

void table_reader::error(std::string_view key, std::string_view message) const {
  errors_->add(line(key), key_path(key), message);
}

void table_reader::reject_unknown(std::span<const std::string_view> known) const {
  for (auto&& [k, v] : *table_) {
    if (std::find(known.begin(), known.end(), k.str()) == known.end())
      errors_->add(line_of(k.source()), key_path(k.str()), "unknown key");
  }
}

const toml::node* table_reader::typed(std::string_view key, toml::node_type want) const {
  const toml::node* n = find(key);
  if (!n) return nullptr;
  if (n->type() != want) {
    error(key, std::string("expected ") + std::string(type_name(want)) + ", got " + std::string(type_name(n->type())));
    return nullptr;
  }
  return n;
}

std::optional<std::string> table_reader::string(std::string_view key) const {
  const toml::node* n = typed(key, toml::node_type::string);
  if (!n) return std::nullopt;
  return n->as_string()->get();
}

std::optional<bool> table_reader::boolean(std::string_view key) const {
  const toml::node* n = typed(key, toml::node_type::boolean);
  if (!n) return std::nullopt;
  return n->as_boolean()->get();
}

std::optional<std::int64_t> table_reader::integer(std::string_view key) const {
  const toml::node* n = typed(key, toml::node_type::integer);
  if (!n) return std::nullopt;
  return n->as_integer()->get();
}

std::optional<std::vector<std::string>> table_reader::strings(std::string_view key) const {
  const toml::node* n = typed(key, toml::node_type::array);
  if (!n) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& item : *n->as_array()) {
    if (!item.is_string()) {
      error(key, std::string("expected an array of strings, found a ") + std::string(type_name(item.type())));
      return std::nullopt;
    }
    out.push_back(item.as_string()->get());
  }
  return out;
}

std::optional<table_reader> table_reader::table(std::string_view key) const {
  const toml::node* n = typed(key, toml::node_type::table);
  if (!n) return std::nullopt;
  return table_reader(*n->as_table(), key_path(key), *errors_);
}

std::optional<std::string> table_reader::required_string(std::string_view key) const {
  if (!find(key)) {
    error(key, "missing");
    return std::nullopt;
  }
  auto s = string(key);
  if (s && s->empty()) {
    error(key, "must not be empty");
    return std::nullopt;
  }
  return s;
}

std::size_t table_reader::each_table(std::string_view key,
                                     const std::function<void(const table_reader&, std::size_t)>& each) const {
  const toml::node* n = find(key);
  if (!n) return 0;
  if (!n->is_array()) {
    error(key, std::string("expected an array of tables, got ") + std::string(type_name(n->type())));
    return 1;
  }
  const toml::array& arr = *n->as_array();
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const toml::node& item = *arr.get(i);
    std::string path = index_path(key_path(key), i);
    if (!item.is_table()) {
      errors_->add(line_of(item.source()), path,
                   std::string("expected a table, got ") + std::string(type_name(item.type())));
      continue;
    }
    each(table_reader(*item.as_table(), std::move(path), *errors_), i);
  }
  return arr.size();
}

// --- parse
// ---------------------------------------------------------------------------------------

namespace {

// Input that trips a toml++ 3.3 precondition, found before toml++ sees it.
struct toml_defect {
  enum kind { broken_header, stray_brace } what;
  std::size_t offset;  // broken_header: start of the header's line; stray_brace: the '}'
  std::uint32_t line;
  std::string description;
};

// toml++ 3.3 asserts (debug) or assumes (release, i.e. undefined behaviour) two things malformed
// input can break: the first non-blank character of a table header starts a key ("[{", "[ [", "[" +
// newline break it; fixed upstream in marzer/tomlplusplus#301), and a '}' never stands where an
// array expects a value ("a = [1, }"). This scanner finds the first such spot. It only has to be
// exact for text that is valid TOML up to that spot, since toml++ stops at its first error: it
// tracks strings, comments and open arrays/inline tables, which is all that decides where a header
// can start and what a '}' closes.
std::optional<toml_defect> find_toml_defect(std::string_view text) {
  const std::size_t n = text.size();
  std::uint32_t line = 1;
  std::size_t line_offset = 0;
  std::string open;  // '[' and '{' not yet closed
  bool line_start = true;
  std::size_t i = 0;
  auto newline = [&](std::size_t at) {
    ++line;
    line_offset = at + 1;
  };
  while (i < n) {
    const char c = text[i];
    if (c == '\n') {
      newline(i);
      line_start = true;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    const bool at_start = line_start;
    line_start = false;
    if (c == '#') {
      while (i < n && text[i] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      const bool basic = c == '"';
      const bool multiline = i + 2 < n && text[i + 1] == c && text[i + 2] == c;
      i += multiline ? 3 : 1;
      while (i < n) {
        if (basic && text[i] == '\\') {
          if (i + 1 < n && text[i + 1] == '\n') newline(i + 1);
          i += 2;
          continue;
        }
        if (text[i] == '\n') {
          if (!multiline) break;  // invalid TOML; toml++ reports it
          newline(i);
        }
        if (text[i] == c) {
          if (!multiline) {
            ++i;
            break;
          }
          std::size_t run = 0;
          while (i + run < n && text[i + run] == c) ++run;
          if (run >= 3) {
            i += std::min<std::size_t>(run, 5);  // up to two quotes may end the content
            break;
          }
          i += run;
          continue;
        }
        ++i;
      }
      continue;
    }
    if (c == '[' && open.empty() && at_start) {
      std::size_t j = i + 1;
      if (j < n && text[j] == '[') ++j;
      while (j < n && (text[j] == ' ' || text[j] == '\t')) ++j;
      if (j < n) {
        const char k = text[j];
        const bool key_start = (k >= 'a' && k <= 'z') || (k >= 'A' && k <= 'Z') || (k >= '0' && k <= '9') || k == '_' ||
                               k == '-' || k == '"' || k == '\'';
        if (!key_start) {
          return toml_defect{
              toml_defect::broken_header, line_offset, line,
              "Error while parsing table header: expected a key, saw " + quote(std::string_view(&text[j], 1))};
        }
      }
      while (i < n && text[i] != '\n') ++i;
      continue;
    }
    if (c == '}' && !open.empty() && open.back() == '[') return toml_defect{toml_defect::stray_brace, i, line, ""};
    if (c == '[' || c == '{') open += c;
    else if ((c == ']' || c == '}') && !open.empty()) open.pop_back();
    ++i;
  }
  return std::nullopt;
}

// One toml++ call; nullopt with the syntax error added to errors on failure.
std::optional<toml::table> parse_toml(std::string_view text, std::string_view source_name, error_list& errors) {
#if TOML_EXCEPTIONS
  try {
    return toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    errors.add(line_of(e.source()), "syntax", escape_controls(e.description()));
    return std::nullopt;
  }
#else
  toml::parse_result result = toml::parse(text, source_name);
  if (!result) {
    errors.add(line_of(result.error().source()), "syntax", escape_controls(result.error().description()));
    return std::nullopt;
  }
  return std::move(result).table();
#endif
}

}  // namespace

std::optional<toml::table> parse(std::string_view text, std::string_view source_name, error_list& errors) {
  std::string patched;
  if (auto defect = find_toml_defect(text)) {
    if (defect->what == toml_defect::broken_header) {
      // toml++ stops at its first error, so an earlier one in the text before the header wins.
      if (parse_toml(text.substr(0, defect->offset), source_name, errors))
        errors.add(defect->line, "syntax", defect->description);
      return std::nullopt;
    }
    // ')' is just as invalid there but takes toml++'s ordinary "could not determine value type"
    // path, so the error and its line come from toml++ as for any other typo.
    patched.assign(text);
    patched[defect->offset] = ')';
    text = patched;
  }
  return parse_toml(text, source_name, errors);
}

}  // namespace vlessbench::toml_reader
