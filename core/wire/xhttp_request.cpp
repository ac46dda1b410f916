#include "core/wire/xhttp_request.hpp"

#include <algorithm>
#include <cmath>

#include "core/wire/percent.hpp"
#include "core/wire/quantile.hpp"

namespace vlessbench::xhttp {

namespace {

constexpr std::string_view reason_path = "wrong_path";
constexpr std::string_view reason_method = "wrong_method";
constexpr std::string_view reason_session = "xhttp_bad_session";
constexpr std::string_view reason_seq = "xhttp_bad_seq";
constexpr std::string_view reason_padding = "xhttp_padding";
constexpr std::string_view reason_mode = "xhttp_mode";

parse_result<request_target> refuse(std::string_view why) {
  parse_result<request_target> r;
  r.status = parse_status::invalid;
  r.reason = why;
  return r;
}

// The query of a URL or request target: after the first '?', up to a '#'.
std::string_view query_of(std::string_view url) {
  const auto q = url.find('?');
  if (q == std::string_view::npos) return {};
  url.remove_prefix(q + 1);
  return url.substr(0, url.find('#'));
}

// x_padding's decoded length in a query (0 when absent); the first occurrence counts.
std::size_t padding_length(std::string_view query) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) != "x_padding") continue;
    if (eq == std::string_view::npos) return 0;
    return percent_decode_lenient(pair.substr(eq + 1)).size();
  }
  return 0;
}

bool is_session_id(std::string_view s) {
  if (s.empty() || s.size() > max_session_id) return false;
  for (char c : s) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && c != '-' && c != '_') return false;
  }
  return true;
}

std::optional<std::uint64_t> decimal(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

bool mode_allows(mode allowed, request_kind k) {
  switch (allowed) {
    case mode::any: return true;
    case mode::packet_up: return k == request_kind::download || k == request_kind::packet;
    case mode::stream_up: return k == request_kind::download || k == request_kind::stream_up;
    case mode::stream_one: return k == request_kind::stream_one;
  }
  return false;
}

}  // namespace

std::string_view to_string(mode m) {
  switch (m) {
    case mode::any: return "auto";
    case mode::packet_up: return "packet-up";
    case mode::stream_up: return "stream-up";
    case mode::stream_one: return "stream-one";
  }
  return "auto";
}

std::optional<mode> mode_named(std::string_view name) {
  for (const auto m : {mode::any, mode::packet_up, mode::stream_up, mode::stream_one})
    if (to_string(m) == name) return m;
  return std::nullopt;
}

std::string_view to_string(request_kind k) {
  switch (k) {
    case request_kind::stream_one: return "stream-one";
    case request_kind::download: return "download";
    case request_kind::stream_up: return "stream-up";
    case request_kind::packet: return "packet";
  }
  return "stream-one";
}

std::string normalize_path(std::string_view path) {
  path = path.substr(0, path.find('?'));
  std::string out;
  if (path.empty() || path.front() != '/') out += '/';
  out += path;
  if (out.back() != '/') out += '/';
  return out;
}

parse_result<request_target> classify(std::string_view method, std::string_view target,
                                      std::optional<std::string_view> referer, const rules& r) {
  const std::string_view path = target.substr(0, target.find_first_of("?#"));
  if (path.size() < r.path.size() || path.substr(0, r.path.size()) != r.path) return refuse(reason_path);
  std::string_view rest = path.substr(r.path.size());
  const auto slash = rest.find('/');
  const std::string_view session = rest.substr(0, slash);
  const bool has_seq = slash != std::string_view::npos;
  const std::string_view seq_text = has_seq ? rest.substr(slash + 1) : std::string_view{};
  if (seq_text.find('/') != std::string_view::npos) return refuse(reason_path);

  request_target out;
  const bool get = method == "GET";
  if (!get && method != "POST") return refuse(reason_method);
  if (session.empty()) {
    if (has_seq) return refuse(reason_session);
    if (get) return refuse(reason_method);
    out.kind = request_kind::stream_one;
  } else {
    if (!is_session_id(session)) return refuse(reason_session);
    out.session = std::string(session);
    if (get) {
      if (has_seq) return refuse(reason_path);
      out.kind = request_kind::download;
    } else if (!has_seq) {
      out.kind = request_kind::stream_up;
    } else {
      const auto seq = decimal(seq_text);
      if (!seq) return refuse(reason_seq);
      out.kind = request_kind::packet;
      out.seq = *seq;
    }
  }
  // A browser cannot set the Referer's host, so only its query is read (as Xray's server does).
  out.padding = padding_length(referer ? query_of(*referer) : query_of(target));
  if (out.padding < r.padding_min || out.padding > r.padding_max) return refuse(reason_padding);
  if (!mode_allows(r.allowed, out.kind)) return refuse(reason_mode);
  parse_result<request_target> res;
  res.status = parse_status::complete;
  res.value = std::move(out);
  return res;
}

namespace {
int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
constexpr std::size_t max_trailer_bytes = 8 * 1024;
}  // namespace

// size: the chunked-body state machine (size line, extension, data, CRLF, trailer) in one loop, each
// state a few lines; split, its states would share the cursor through members
parse_result<std::size_t> chunked_decoder::feed(std::string_view in, std::string& out, std::size_t room) {
  parse_result<std::size_t> r;
  auto fail = [&](std::string_view why) {
    r.status = parse_status::invalid;
    r.reason = why;
    return r;
  };
  std::size_t i = 0;
  while (i < in.size() && state_ != state::done) {
    const char c = in[i];
    switch (state_) {
      case state::size: {
        const int d = hex_digit(c);
        const bool ends_size = size_digits_ > 0 && (c == ';' || c == ' ' || c == '\t' || c == '\r');
        if (d >= 0) {
          if (++size_digits_ > 15) return fail("bad chunk size");
          remaining_ = remaining_ * 16 + static_cast<std::uint64_t>(d);
        } else if (!ends_size) {
          return fail("bad chunk size");  // no digit yet, or a character a size line cannot hold
        } else {
          state_ = c == '\r' ? state::size_lf : state::extension;
        }
        ++i;
        break;
      }
      case state::extension:
        if (c == '\r')
          state_ = state::size_lf;
        else if (++trailer_bytes_ > max_trailer_bytes)
          return fail("trailers too large");
        ++i;
        break;
      case state::size_lf:
        if (c != '\n') return fail("bad chunk framing");
        ++i;
        size_digits_ = 0;
        state_ = remaining_ == 0 ? state::trailer_start : state::data;
        break;
      case state::data: {
        if (room == 0) {
          r.consumed = i;
          return r;  // need_more: no room
        }
        const std::size_t n = static_cast<std::size_t>(
            std::min<std::uint64_t>({remaining_, static_cast<std::uint64_t>(in.size() - i), room}));
        out.append(in.data() + i, n);
        r.value += n;
        room -= n;
        remaining_ -= n;
        i += n;
        if (remaining_ == 0) state_ = state::data_cr;
        break;
      }
      case state::data_cr:
        if (c != '\r') return fail("bad chunk framing");
        ++i;
        state_ = state::data_lf;
        break;
      case state::data_lf:
        if (c != '\n') return fail("bad chunk framing");
        ++i;
        state_ = state::size;
        break;
      case state::trailer_start:
        ++i;
        state_ = c == '\r' ? state::final_lf : state::trailer;
        if (++trailer_bytes_ > max_trailer_bytes) return fail("trailers too large");
        break;
      case state::trailer:
        if (c == '\r') state_ = state::trailer_lf;
        if (++trailer_bytes_ > max_trailer_bytes) return fail("trailers too large");
        ++i;
        break;
      case state::trailer_lf:
        if (c != '\n') return fail("bad chunk framing");
        ++i;
        state_ = state::trailer_start;
        break;
      case state::final_lf:
        if (c != '\n') return fail("bad chunk framing");
        ++i;
        state_ = state::done;
        break;
      case state::done: break;
    }
  }
  r.consumed = i;
  if (state_ == state::done) r.status = parse_status::complete;
  return r;
}

std::string_view uplink_order::admit(std::uint64_t seq, std::size_t size) const {
  if (seq < next_ || held_.count(seq) != 0) return "xhttp_seq_replay";
  if (seq - next_ > max_ahead_) return "xhttp_seq_gap";
  if (seq != next_ && (held_.size() >= max_ahead_ || held_bytes_ + size > max_ahead_bytes_)) return "wait";
  return {};
}

std::string_view uplink_order::accept(std::uint64_t seq, std::string body) {
  if (const auto verdict = admit(seq, body.size()); !verdict.empty())
    return verdict == "wait" ? "xhttp_reorder_full" : verdict;
  if (seq != next_) {
    held_bytes_ += body.size();
    held_.emplace(seq, std::move(body));
    return {};
  }
  ready_ += body;
  ++next_;
  for (auto it = held_.begin(); it != held_.end() && it->first == next_; it = held_.erase(it)) {
    ready_ += it->second;
    held_bytes_ -= it->second.size();
    ++next_;
  }
  return {};
}

void post_gaps::arrived(std::int64_t at_us) {
  if (posts_++ == 0) {
    last_ = at_us;
    return;
  }
  const std::int64_t gap = std::max<std::int64_t>(0, at_us - last_);
  last_ = std::max(last_, at_us);
  max_ = std::max(max_, gap);
  if (kept_.size() < max_kept) kept_.push_back(static_cast<double>(gap));
}

std::optional<std::int64_t> post_gaps::median_us() const {
  const auto m = stats::quantile(kept_, 0.5);
  if (!m) return std::nullopt;
  return static_cast<std::int64_t>(std::llround(*m));
}

std::optional<std::int64_t> post_gaps::max_us() const {
  if (count() == 0) return std::nullopt;
  return max_;
}

}  // namespace vlessbench::xhttp
