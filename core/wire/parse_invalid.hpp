#pragma once
// An invalid parse_result with its reason, for the parsers that build results field by field.
#include <string_view>

#include "core/wire/parse_result.hpp"

namespace vlessbench {

template <class T>
parse_result<T> parse_invalid(std::string_view reason) {
  parse_result<T> r;
  r.status = parse_status::invalid;
  r.reason = reason;
  return r;
}

}  // namespace vlessbench
