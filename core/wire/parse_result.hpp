#pragma once
// The result type every pure wire parser returns: parsers take bytes, never sockets.
#include <cstddef>
#include <string_view>

namespace vlessbench {

enum class parse_status { complete, need_more, invalid };

template <class T>
struct parse_result {
  parse_status status = parse_status::need_more;
  T value{};
  std::size_t consumed = 0;   // bytes of the input that belong to the parsed item
  std::string_view reason{};  // static string, set when status == invalid

  bool complete() const { return status == parse_status::complete; }
  bool need_more() const { return status == parse_status::need_more; }
  bool invalid() const { return status == parse_status::invalid; }
};

}  // namespace vlessbench
