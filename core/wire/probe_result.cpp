#include "core/wire/probe_result.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>

#include "core/wire/quantile.hpp"
#include "core/wire/route_header.hpp"

namespace vlessbench {
namespace {

// A JSON value as far as this document needs one. Strings are capped at probe_max_string.
struct value {
  enum class kind { null, boolean, number, string, object, array } type = kind::null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<std::string> keys;  // an object's member names; their values are in items
  std::vector<value> items;       // an array's elements, or an object's member values
};

class reader {
 public:
  explicit reader(std::string_view in) : in_(in) {}

  // Parses one value and the end of input; on failure reason() says why.
  bool document(value& out) {
    skip_ws();
    if (!parse(out, 1)) return false;
    skip_ws();
    return pos_ == in_.size() || fail("trailing bytes after the document");
  }
  std::string_view reason() const { return reason_; }

 private:
  bool fail(std::string_view why) {
    if (reason_.empty()) reason_ = why;
    return false;
  }
  bool at_end() const { return pos_ >= in_.size(); }
  char peek() const { return in_[pos_]; }
  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }
  bool literal(std::string_view word) {
    if (in_.substr(pos_, word.size()) != word) return fail("bad literal");
    pos_ += word.size();
    return true;
  }

  bool parse(value& out, std::size_t depth) {
    if (depth > probe_max_depth) return fail("nested too deep");
    if (at_end()) return fail("unexpected end of body");
    switch (peek()) {
      case '{': return object(out, depth);
      case '[': return array(out, depth);
      case '"': out.type = value::kind::string; return string(out.str);
      case 't':
        out.type = value::kind::boolean;
        out.b = true;
        return literal("true");
      case 'f':
        out.type = value::kind::boolean;
        out.b = false;
        return literal("false");
      case 'n': out.type = value::kind::null; return literal("null");
      default: out.type = value::kind::number; return number(out.num);
    }
  }

  bool object(value& out, std::size_t depth) {
    out.type = value::kind::object;
    ++pos_;  // '{'
    skip_ws();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (at_end() || peek() != '"') return fail("expected a member name");
      std::string key;
      if (!string(key)) return false;
      for (const auto& k : out.keys)
        if (k == key) return fail("duplicate member");
      skip_ws();
      if (at_end() || peek() != ':') return fail("expected ':'");
      ++pos_;
      skip_ws();
      if (out.keys.size() >= 32) return fail("too many members");
      out.keys.push_back(std::move(key));
      out.items.emplace_back();
      if (!parse(out.items.back(), depth + 1)) return false;
      skip_ws();
      if (at_end()) return fail("unexpected end of body");
      if (peek() == '}') {
        ++pos_;
        return true;
      }
      if (peek() != ',') return fail("expected ',' or '}'");
      ++pos_;
    }
  }

  bool array(value& out, std::size_t depth) {
    out.type = value::kind::array;
    ++pos_;  // '['
    skip_ws();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (out.items.size() >= probe_max_samples) return fail("too many array elements");
      out.items.emplace_back();
      if (!parse(out.items.back(), depth + 1)) return false;
      skip_ws();
      if (at_end()) return fail("unexpected end of body");
      if (peek() == ']') {
        ++pos_;
        return true;
      }
      if (peek() != ',') return fail("expected ',' or ']'");
      ++pos_;
    }
  }

  // Escapes are accepted for ASCII only (\uXXXX < 0x80): nothing in this document needs more.
  bool string(std::string& out) {
    ++pos_;  // '"'
    for (;;) {
      if (at_end()) return fail("unterminated string");
      const auto c = static_cast<unsigned char>(in_[pos_++]);
      if (c == '"') return true;
      if (c < 0x20) return fail("control byte in string");
      char add = static_cast<char>(c);
      if (c == '\\') {
        if (at_end()) return fail("unterminated string");
        switch (in_[pos_++]) {
          case '"': add = '"'; break;
          case '\\': add = '\\'; break;
          case '/': add = '/'; break;
          case 'b': add = '\b'; break;
          case 'f': add = '\f'; break;
          case 'n': add = '\n'; break;
          case 'r': add = '\r'; break;
          case 't': add = '\t'; break;
          case 'u': {
            unsigned code = 0;
            const auto hex = in_.substr(pos_, 4);
            auto [p, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), code, 16);
            if (hex.size() != 4 || ec != std::errc{} || p != hex.data() + 4) return fail("bad \\u escape");
            if (code >= 0x80) return fail("non-ASCII \\u escape");
            pos_ += 4;
            add = static_cast<char>(code);
            break;
          }
          default: return fail("bad escape");
        }
      }
      if (out.size() >= probe_max_string) return fail("string too long");
      out += add;
    }
  }

  // JSON's number grammar, checked before from_chars (which would also take "inf", "nan", hex).
  bool number(double& out) {
    const std::size_t start = pos_;
    auto digits = [&] {
      const std::size_t from = pos_;
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
      return pos_ > from;
    };
    if (!at_end() && peek() == '-') ++pos_;
    if (at_end()) return fail("unexpected end of body");
    if (peek() == '0') {
      ++pos_;
    } else if (!digits()) {
      return fail("unexpected character");
    }
    if (!at_end() && peek() == '.') {
      ++pos_;
      if (!digits()) return fail("bad number");
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (!digits()) return fail("bad number");
    }
    if (pos_ - start > 32) return fail("number too long");
    auto [p, ec] = std::from_chars(in_.data() + start, in_.data() + pos_, out);
    if (ec != std::errc{} || p != in_.data() + pos_ || !std::isfinite(out)) return fail("bad number");
    return true;
  }

  std::string_view in_;
  std::size_t pos_ = 0;
  std::string_view reason_;
};

// Field readers over one object: each member read once, unknown members refused.
class fields {
 public:
  explicit fields(const value& obj) : obj_(obj) {}
  const value* take(std::string_view key) {
    for (std::size_t i = 0; i < obj_.keys.size(); ++i)
      if (obj_.keys[i] == key) {
        ++taken_;
        return &obj_.items[i];
      }
    return nullptr;
  }
  bool all_taken() const { return taken_ == obj_.keys.size(); }

 private:
  const value& obj_;
  std::size_t taken_ = 0;
};

bool as_count(const value* v, std::uint64_t max, std::uint64_t& out) {
  if (!v || v->type != value::kind::number || v->num < 0 || v->num > static_cast<double>(max) ||
      std::floor(v->num) != v->num)
    return false;
  out = static_cast<std::uint64_t>(v->num);
  return true;
}

// A duration in ms: absent or null is "not measured"; anything else must be 0..1e7.
bool as_ms(const value* v, std::optional<double>& out) {
  if (!v || v->type == value::kind::null) return true;
  if (v->type != value::kind::number || v->num < 0 || v->num > 1e7) return false;
  out = v->num;
  return true;
}

bool one_of(const value* v, std::initializer_list<std::string_view> allowed, std::string& out) {
  if (!v || v->type != value::kind::string) return false;
  if (std::find(allowed.begin(), allowed.end(), v->str) == allowed.end()) return false;
  out = v->str;
  return true;
}

// The run id names the page's requests in the access log (?probe=RUN): letters and digits only.
bool run_id(const value* v, std::string& out) {
  if (!v || v->type != value::kind::string || v->str.empty() || v->str.size() > 32) return false;
  for (char c : v->str)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;
  out = v->str;
  return true;
}

std::string_view read_sample(const value& v, probe_sample& s) {
  if (v.type != value::kind::object) return "sample is not an object";
  fields f(v);
  if (!as_count(f.take("seq"), probe_max_samples * 4, s.seq)) return "sample: bad seq";
  if (!one_of(f.take("path"), {"target", "control"}, s.path)) return "sample: bad path";
  if (!one_of(f.take("mode"), {"new", "reuse"}, s.mode)) return "sample: bad mode";
  const value* ok = f.take("ok");
  if (!ok || ok->type != value::kind::boolean) return "sample: bad ok";
  s.ok = ok->b;
  if (!as_ms(f.take("ms"), s.ms)) return "sample: bad ms";
  if (s.ok && !s.ms) return "sample: ok without ms";
  if (!one_of(f.take("route"), {"vless", "direct", "unknown"}, s.route)) return "sample: bad route";
  if (const value* session = f.take("session"); session && session->type != value::kind::null) {
    std::uint64_t id = 0;
    if (!as_count(session, 1ULL << 52, id)) return "sample: bad session";
    s.session = id;
  }
  if (!as_ms(f.take("tls"), s.tls) || !as_ms(f.take("vless"), s.vless) || !as_ms(f.take("upstream"), s.upstream))
    return "sample: bad phase";
  if (!f.all_taken()) return "sample: unknown member";
  return {};
}

}  // namespace

parse_result<probe_result> parse_probe_result(std::string_view body) {
  parse_result<probe_result> r;
  auto invalid = [&r](std::string_view why) {
    r.status = parse_status::invalid;
    r.reason = why;
    return r;
  };
  if (body.size() > probe_max_body) return invalid("body too large");
  reader rd(body);
  value doc;
  if (!rd.document(doc)) return invalid(rd.reason());
  if (doc.type != value::kind::object) return invalid("document is not an object");
  fields f(doc);
  std::uint64_t version = 0;
  if (!as_count(f.take("v"), 1000, version) || version != 1) return invalid("unknown version");
  if (!run_id(f.take("run"), r.value.run)) return invalid("bad run id");
  if (!as_count(f.take("new"), probe_max_count, r.value.new_count)) return invalid("bad new count");
  if (!as_count(f.take("reuse"), probe_max_count, r.value.reuse_count)) return invalid("bad reuse count");
  if (!one_of(f.take("verdict"), {"stall", "no_stall", "no_vless"}, r.value.verdict)) return invalid("bad verdict");
  const value* samples = f.take("samples");
  if (!samples || samples->type != value::kind::array) return invalid("samples is not an array");
  if (!f.all_taken()) return invalid("unknown member");
  r.value.samples.reserve(samples->items.size());
  for (const value& v : samples->items) {
    probe_sample s;
    if (auto why = read_sample(v, s); !why.empty()) return invalid(why);
    r.value.samples.push_back(std::move(s));
  }
  r.status = parse_status::complete;
  r.consumed = body.size();
  return r;
}

bool probe_sample_stalled(const probe_sample& s) {
  return s.route == "vless" && s.vless && *s.vless >= stall_threshold_ms;
}

probe_summary summarize_probe(const probe_result& r) {
  probe_summary sum;
  std::vector<double> fresh, reused;
  for (const auto& s : r.samples) {
    if (!s.ok) {
      ++sum.failed;
      continue;
    }
    ++sum.ok;
    if (s.verified) ++sum.verified;
    if (s.route == "vless" && s.verified) ++sum.vless_samples;
    if (s.route == "direct") ++sum.direct_samples;
    if (s.verified && probe_sample_stalled(s)) ++sum.stall_samples;
    if (s.path == "target" && s.ms) (s.mode == "new" ? fresh : reused).push_back(*s.ms);
  }
  sum.new_median_ms = stats::quantile(fresh, 0.5);
  sum.new_p95_ms = stats::quantile(fresh, 0.95);
  sum.reuse_median_ms = stats::quantile(reused, 0.5);
  sum.reuse_p95_ms = stats::quantile(reused, 0.95);
  sum.verdict = sum.stall_samples > 0 ? "stall" : sum.vless_samples > 0 ? "no_stall" : "no_vless";
  return sum;
}

}  // namespace vlessbench
