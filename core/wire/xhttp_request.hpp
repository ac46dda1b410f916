#pragma once
// XHTTP requests (transport = "xhttp", docs/configuration.md "XHTTP"), read from what an HTTP
// request head says: no sockets here. A client opens a VLESS stream under the listener's path
// prefix in one of three ways:
//   stream-one:  POST <path>               request body = uplink, response body = downlink
//   stream-up:   GET  <path><session>      response body = downlink
//                POST <path><session>      one streaming request body = uplink
//   packet-up:   GET  <path><session>      response body = downlink
//                POST <path><session>/<seq> one request per uplink chunk, seq 0, 1, 2 ...
// Every request carries x_padding (a run of 'X') in the query of its Referer, or of its own
// URL when it has no Referer; its length must fall in the listener's padding range.
// An uplink body may come with Content-Length or chunked (HTTP/1.1): chunked_decoder below.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/wire/parse_result.hpp"

namespace vlessbench::xhttp {

enum class mode { any, packet_up, stream_up, stream_one };  // "auto" | "packet-up" | ...
std::string_view to_string(mode m);                         // "auto", "packet-up", "stream-up", "stream-one"
std::optional<mode> mode_named(std::string_view name);

enum class request_kind { stream_one, download, stream_up, packet };
std::string_view to_string(request_kind k);  // "stream-one", "download", "stream-up", "packet"

// What the listener accepts.
struct rules {
  std::string_view path = "/";  // normalized: starts and ends with '/'
  mode allowed = mode::any;
  std::uint32_t padding_min = 100;
  std::uint32_t padding_max = 1000;
};

// Session ids are what clients make them (Xray: a UUID); at most this long, [A-Za-z0-9_-].
inline constexpr std::size_t max_session_id = 64;

struct request_target {
  request_kind kind = request_kind::stream_one;
  std::string session;      // empty for stream-one
  std::uint64_t seq = 0;    // packet only
  std::size_t padding = 0;  // x_padding's length as found
};

// The request's kind, or invalid with one of the reasons: "wrong_path" (outside the prefix, or
// more segments than a packet's), "wrong_method" (neither GET nor POST; GET without a session),
// "xhttp_bad_session" (characters or length), "xhttp_bad_seq" (not a decimal number below 2^64),
// "xhttp_padding" (length out of range), "xhttp_mode" (a kind the listener's mode refuses).
// consumed is unused (a head is parsed whole).
parse_result<request_target> classify(std::string_view method, std::string_view target,
                                      std::optional<std::string_view> referer, const rules& r);

// The path a listener serves: '/' added in front and at the end where missing, a query dropped
// (Xray's normalization).
std::string normalize_path(std::string_view path);

// An HTTP/1.1 chunked body (RFC 9112 §7.1), decoded incrementally: feed() takes what it can from
// in, appends the payload to out (never more than room bytes), and returns complete after the
// last chunk and the trailers, need_more when it wants more input (or out has no room), invalid
// with a reason ("bad chunk size", "bad chunk framing", "trailers too large"). consumed: bytes
// of in taken; value: payload bytes appended.
class chunked_decoder {
 public:
  parse_result<std::size_t> feed(std::string_view in, std::string& out, std::size_t room);
  bool done() const { return state_ == state::done; }

 private:
  enum class state {
    size,
    extension,
    size_lf,
    data,
    data_cr,
    data_lf,
    trailer_start,
    trailer,
    trailer_lf,
    final_lf,
    done
  };
  state state_ = state::size;
  std::uint64_t remaining_ = 0;
  unsigned size_digits_ = 0;
  std::size_t trailer_bytes_ = 0;
};

// packet-up's uplink put back in order: POST seq n carries the bytes after those of n-1. What
// arrives ahead of a gap waits here, bounded by count (max_ahead POSTs, and never a seq more
// than max_ahead past the next one: 2^63 is refused, not waited for) and by bytes; a POST that
// finds them full waits for room (admit()) as Xray's server makes it wait.
class uplink_order {
 public:
  uplink_order(std::uint32_t max_ahead, std::size_t max_ahead_bytes)
      : max_ahead_(max_ahead), max_ahead_bytes_(max_ahead_bytes) {}
  // Takes one POST's body. Empty: accepted (in order, or held); otherwise the reason it is
  // refused: "xhttp_seq_replay" (a seq already taken), "xhttp_seq_gap" (too far ahead, or too
  // many held), "xhttp_reorder_full" (the held bytes).
  std::string_view accept(std::uint64_t seq, std::string body);
  // Whether accept() would take seq's body of size bytes now: empty yes; "wait" when it is ahead
  // of a gap and the held POSTs or bytes are at their bound (room comes when the gap closes: the
  // next seq is always taken); otherwise the reason accept() would refuse it with.
  std::string_view admit(std::uint64_t seq, std::size_t size) const;
  // The bytes now in order (moved out).
  std::string take() { return std::exchange(ready_, {}); }
  std::size_t ready_bytes() const { return ready_.size(); }
  std::size_t held_bytes() const { return held_bytes_; }
  std::size_t held() const { return held_.size(); }
  std::uint64_t next_seq() const { return next_; }

 private:
  std::uint32_t max_ahead_;
  std::size_t max_ahead_bytes_;
  std::uint64_t next_ = 0;
  std::string ready_;
  std::map<std::uint64_t, std::string> held_;
  std::size_t held_bytes_ = 0;
};

// packet-up's uplink spacing as the server sees it: the gaps between consecutive POSTs in the
// order they reach the session (arrived(), called as each POST's body is complete), not in seq
// order. The count and the longest gap cover every POST; the median covers the first max_kept
// gaps (a latency sample's session has a few POSTs; a bulk upload's may have millions, and
// memory per session stays bounded).
class post_gaps {
 public:
  static constexpr std::size_t max_kept = 1024;
  // A POST arrived at at_us (µs on the session's clock; an earlier time than the last is taken
  // as the last: the gap is 0).
  void arrived(std::int64_t at_us);
  std::uint64_t posts() const { return posts_; }
  std::uint64_t count() const { return posts_ > 0 ? posts_ - 1 : 0; }  // gaps: posts - 1
  std::optional<std::int64_t> median_us() const;                       // none before two POSTs
  std::optional<std::int64_t> max_us() const;

 private:
  std::uint64_t posts_ = 0;
  std::int64_t last_ = 0;
  std::int64_t max_ = 0;
  std::vector<double> kept_;
};

}  // namespace vlessbench::xhttp
