#include "core/config/toml_reader.hpp"

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
    if (c < 0x20 || c == 0x7f)
      append_hex_escape(out, c);
    else
      out += ch;
  }
  return out;
}

// "\\u00E9": a code point of the Basic Multilingual Plane as a TOML escape.
std::string fmt_escape(char32_t c) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out = "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += hex[(c >> shift) & 0xFU];
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
// size: one scanner; its states (comment, string, header) all move one cursor, line count and bracket stack
std::optional<toml_defect> find_toml_defect(std::string_view text) {
  const std::size_t n = text.size();
  std::uint32_t line = 1;
  std::size_t line_offset = 0;
  std::string open;  // '[' and '{' not yet closed
  bool line_start = true;
  std::size_t i = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;  // toml++ skips a byte order mark
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
    if (c == '[' || c == '{')
      open += c;
    else if ((c == ']' || c == '}') && !open.empty())
      open.pop_back();
    ++i;
  }
  return std::nullopt;
}

// toml++ 3.3's is_non_ascii_horizontal_whitespace() reaches TOML_UNREACHABLE (undefined behaviour
// in a release build) for most code points in U+00A1..U+FEFE ('é', Cyrillic, ...): the bit test
// below is its own, and only the blocks it then switches on are handled. It is asked about every
// code point outside strings and comments (where any non-ASCII text is an error anyway), and about
// the first one after a backslash in a """ string (an escape or a line-ending backslash: valid
// TOML).
bool trips_whitespace_check(char32_t c) {
  if (c <= 0xA0 || c >= 0xFEFF || c == 0x3000) return false;
  const auto block = (static_cast<std::uint64_t>(c) - 0xA0) / 0x3FA;
  if (((1ULL << block) & 0x7FFFFFFFFFFFF75EULL) != 0) return false;
  return block != 5 && block != 7;
}

// The code point of the well-formed 2- or 3-byte UTF-8 sequence at text[i] (the only lengths
// trips_whitespace_check can be true for), and its length; 0 when there is none.
std::pair<char32_t, std::size_t> utf8_at(std::string_view text, std::size_t i) {
  const auto b = [&](std::size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0U; };
  const auto cont = [&](std::size_t k) { return (b(k) & 0xC0U) == 0x80; };
  const unsigned lead = b(0);
  if (lead >= 0xC2 && lead <= 0xDF && cont(1)) return {((lead & 0x1FU) << 6) | (b(1) & 0x3FU), 2};
  if (lead >= 0xE0 && lead <= 0xEF && cont(1) && cont(2)) {
    const char32_t c = ((lead & 0x0FU) << 12) | ((b(1) & 0x3FU) << 6) | (b(2) & 0x3FU);
    if (c >= 0x800 && (c < 0xD800 || c > 0xDFFF)) return {c, 3};
  }
  return {0, 0};
}

bool is_toml_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// What toml++ 3.3 also skips after a line-ending backslash (its list, none of them tripping).
bool is_non_ascii_horizontal_space(char32_t c) {
  return c == 0xA0 || c == 0x1680 || c == 0x180E || (c >= 0x2000 && c <= 0x200B) || c == 0x202F ||
         (c >= 0x205F && c <= 0x2060) || c == 0x3000 || c == 0xFEFF;
}

// The text toml++ may safely be given. Outside strings and comments each code point that trips it
// becomes '`', one per byte (toml++ treats '`' as it would the code point once fixed: no
// whitespace, no key character, no value, so it stops there with the same message); right after a
// backslash in a """ string too (an invalid escape either way); after a line-ending backslash it
// becomes its \uXXXX escape (the same string). Like find_toml_defect it only has to be exact up to
// toml++'s first error.
struct unicode_patch {
  std::string text;
  std::vector<std::pair<std::size_t, std::string>> placeholders;  // where in text, the bytes replaced
};

// size: one scanner; its states (outside strings, inside one, after a backslash) share one cursor and output
std::optional<unicode_patch> patch_unicode(std::string_view text) {
  const bool any = std::any_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) >= 0xC2; });
  if (!any) return std::nullopt;
  unicode_patch out;
  const std::size_t n = text.size();
  std::size_t i = 0;
  auto copy = [&](std::size_t count) {
    out.text.append(text.substr(i, count));
    i += count;
  };
  auto placeholder_if_tripping = [&]() {
    const auto [c, len] = utf8_at(text, i);
    if (len == 0 || !trips_whitespace_check(c)) return false;
    // As many bytes as it replaces: toml++ decodes ahead in blocks, and an invalid UTF-8 sequence
    // further on must fall in the same block as before.
    out.placeholders.emplace_back(out.text.size(), std::string(text.substr(i, len)));
    out.text.append(len, '`');
    i += len;
    return true;
  };
  // A quote starts a string only where a key or value starts: inside a bare value ("1.2'x") toml++
  // reads on to the next space, ',', ']', '}' or '#' before it reports the value as invalid.
  std::string open;      // '[' and '{' not yet closed
  bool keys = true;      // where a key, not a value, comes next
  char previous = '\n';  // the last character outside strings, comments and blanks
  while (i < n) {
    const char c = text[i];
    if (c == '#') {
      const auto end = std::min(text.find('\n', i), n);
      copy(end - i);
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      copy(1);
      continue;
    }
    const bool starts_string =
        (c == '"' || c == '\'') && (previous == '\n' || previous == '=' || previous == '[' || previous == '{' ||
                                    previous == ',' || (previous == '.' && keys));
    if (!starts_string) {
      if ((c == '\n' && open.empty()) || c == '{')
        keys = true;
      else if (c == '=')
        keys = false;
      else if (c == '[')
        keys = (open.empty() && previous == '\n') || (previous == '[' && keys);  // header or array
      else if (c == ',')
        keys = !open.empty() && open.back() == '{';
      if (c == '[' || c == '{')
        open += c;
      else if ((c == ']' || c == '}') && !open.empty())
        open.pop_back();
      previous = c;
      if (!placeholder_if_tripping()) copy(1);
      continue;
    }
    previous = c;
    const bool basic = c == '"';
    const bool multiline = i + 2 < n && text[i + 1] == c && text[i + 2] == c;
    copy(multiline ? 3 : 1);
    while (i < n) {
      if (basic && text[i] == '\\') {
        copy(1);
        if (!multiline) {
          copy(std::min<std::size_t>(1, n - i));
          continue;
        }
        if (placeholder_if_tripping()) continue;
        if (i < n && is_toml_space(text[i])) {
          while (i < n) {
            if (is_toml_space(text[i])) {
              copy(1);
              continue;
            }
            const auto [w, len] = utf8_at(text, i);
            if (len == 0 || !is_non_ascii_horizontal_space(w)) break;
            copy(len);
          }
          if (const auto [w, len] = utf8_at(text, i); len != 0 && trips_whitespace_check(w)) {
            out.text += fmt_escape(w);
            i += len;
          }
          continue;
        }
        copy(std::min<std::size_t>(1, n - i));
        continue;
      }
      if (text[i] == '\n' && !multiline) break;  // invalid TOML; toml++ reports it
      if (text[i] == c) {
        if (!multiline) {
          copy(1);
          break;
        }
        std::size_t run = 0;
        while (i + run < n && text[i + run] == c) ++run;
        if (run >= 3) {
          copy(std::min<std::size_t>(run, 5));  // up to two quotes may end the content
          break;
        }
        copy(run);
        continue;
      }
      copy(1);
    }
  }
  if (out.placeholders.empty() && out.text == text) return std::nullopt;
  return out;
}

// toml++ words a string left open as a control character ("unescaped control characters other
// than TAB ... prohibited": the line break) or as the end of the file: say it plainly.
std::string plain_syntax_error(std::string_view text, const toml::source_region& where, const std::string& said) {
  const bool in_string =
      said.find("parsing string") != std::string::npos || said.find("parsing literal string") != std::string::npos;
  if (in_string && said.find("end-of-file") != std::string::npos)
    return "a string is not closed: its closing quote is missing before the end of the file (toml++: " + said + ")";
  if (!in_string || said.find("control characters other than TAB") == std::string::npos) return said;
  std::size_t start = 0;
  for (std::uint32_t l = 1; l < where.begin.line && start != std::string_view::npos; ++l) {
    start = text.find('\n', start);
    if (start != std::string_view::npos) ++start;
  }
  if (start == std::string_view::npos) return said;
  const auto line = text.substr(start, text.find_first_of("\r\n", start) - start);
  const auto code_points =
      std::count_if(line.begin(), line.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0U) != 0x80; });
  if (static_cast<std::int64_t>(where.begin.column) <= code_points) return said;
  return "a string is not closed on its line: its closing quote is missing (a value in \"...\" or '...' ends on "
         "the line it starts; \"\"\"...\"\"\" spans lines)";
}

// One toml++ call; nullopt with the syntax error added to errors on failure. An error toml++
// reports at a placeholder of patch_unicode names the code point it stands for.
std::optional<toml::table> parse_toml(std::string_view text, std::string_view source_name, error_list& errors) {
  const auto patch = patch_unicode(text);
  if (patch) text = patch->text;
  auto fail = [&](const toml::source_region& where, std::string description) {
    for (const auto& [offset, original] :
         patch ? patch->placeholders : std::vector<std::pair<std::size_t, std::string>>{}) {
      // toml++ counts lines from 1 and columns in code points from 1.
      const auto before = text.substr(0, offset);
      const auto line_start = before.rfind('\n') == std::string_view::npos ? 0 : before.rfind('\n') + 1;
      const auto line = 1 + std::count(before.begin(), before.end(), '\n');
      const auto column = 1 + std::count_if(before.begin() + static_cast<std::ptrdiff_t>(line_start), before.end(),
                                            [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0U) != 0x80; });
      // At it, or at the backslash before it ("unknown escape sequence '\`'").
      if (static_cast<std::uint32_t>(line) != where.begin.line ||
          (where.begin.column != column && where.begin.column + 1 != column))
        continue;
      // toml++ prints the code point raw, except after a '\r' (as \uXXXX).
      const bool escaped = description.find("after '\\r', saw '`'") != std::string::npos;
      if (const auto at = description.find("`'"); at != std::string::npos)
        description.replace(at, 1, escaped ? fmt_escape(utf8_at(original, 0).first) : original);
      break;
    }
    errors.add(line_of(where), "syntax", escape_controls(plain_syntax_error(text, where, description)));
  };
#if TOML_EXCEPTIONS
  try {
    return toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    fail(e.source(), std::string(e.description()));
    return std::nullopt;
  }
#else
  toml::parse_result result = toml::parse(text, source_name);
  if (!result) {
    fail(result.error().source(), std::string(result.error().description()));
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
