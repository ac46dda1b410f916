#pragma once
// The Mux.Cool sub-connection table of one VLESS command 3 session, as a pure state machine: each frame the
// client sends (core/wire/mux_frame.hpp) in, what the session does with it out. No sockets; server/mux_session.hpp
// applies the decisions and tests/unit/server/test_mux_subs.cpp pins them.
//
// Rules (docs/sessions.md "Mux"):
//   New      opens a sub-connection numbered 1, 2, ... in the session (route_info::sub), unless its
//            target is Mux.Cool itself (v1.mux.cool: mux inside mux), max_live are open already
//            (too_many_subs), or the id is live (duplicate_new: the live one ends with an error, for
//            the client's view of that id is broken). An id is free again once ended, by either side:
//            the protocol reuses ids, and a New after End opens a new sub.
//   Keep     delivers its data to the live sub; a target on a TCP sub's Keep, or an XUDP sub's data
//            without one, ends that sub with an error.
//   End      the client is done with the sub.
//   KeepAlive, and Keep/End for an id that was open earlier in the session (a frame that crossed
//            our End): nothing.
//   Keep/End for an id never opened in the session: stray (unknown_sub).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/wire/mux_frame.hpp"

namespace vlessbench::mux {

// The address a New frame names for Mux.Cool itself (VLESS command 3's destination).
inline constexpr std::string_view mux_cool_domain = "v1.mux.cool";

enum class action : std::uint8_t {
  open,     // New accepted: sub-connection `sub` (its network and XUDP form in the
            // table)
  deliver,  // Keep: data (and a per-packet target) for the live sub `sub`
  end,      // End from the client for the live sub `sub`; the table has freed its id
  ignore,   // nothing to do
  refuse,   // New refused (reason): answer End with the error option; no sub
            // opened
  kill,     // a live sub `sub` broke the protocol (reason): it ends with an error;
            // id freed
  stray,    // Keep/End for an id never opened (reason "unknown_sub")
};
std::string_view to_string(action a);

struct decision {
  mux::action act = action::ignore;
  std::uint32_t sub = 0;    // open, deliver, end, kill
  std::string_view reason;  // refuse, kill, stray
};

struct sub_state {
  std::uint32_t sub = 0;
  network net = network::tcp;
  bool xudp = false;  // a UDP New with a global id: every Keep with data carries
                      // its target
};

class sub_table {
 public:
  explicit sub_table(std::size_t max_live) : max_live_(max_live), seen_(65'536, false) {}
  decision on_frame(const frame& f);
  // The server ended sub-connection `id` (its destination closed, an error): the id is free.
  void closed(std::uint16_t id) { live_.erase(id); }
  // The open the last on_frame decided for `id` did not happen after all (the server refused it for
  // a reason of its own, its client budget): as if the New had been refused.
  void cancel_open(std::uint16_t id);
  const sub_state* find(std::uint16_t id) const;
  std::size_t live() const { return live_.size(); }
  std::uint32_t opened() const { return opened_; }

 private:
  std::size_t max_live_;
  std::uint32_t opened_ = 0;
  std::unordered_map<std::uint16_t, sub_state> live_;
  std::vector<bool> seen_;         // ids opened at some time in the session (8 KiB)
  bool seen_before_open_ = false;  // seen_ of the id last opened, before it (cancel_open)
};

}  // namespace vlessbench::mux
