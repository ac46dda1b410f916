// libFuzzer target for the ClientHello parser behind JA4 (core/wire/ja4.hpp). Invariants checked: the
// parser never asks for more (a ClientHello body comes whole); a refusal says why; an accepted
// body consumed all of itself, and its fingerprint has JA4's shape (36 characters:
// t VV d|i CC EE AA _ 12 hex _ 12 hex).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/wire/ja4.hpp"

using namespace vlessbench;

namespace {
bool hex12(const std::string& s, std::size_t at) {
  for (std::size_t i = at; i < at + 12; ++i)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}
bool digit(char c) { return c >= '0' && c <= '9'; }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto r = parse_client_hello(std::span(data, size));
  if (r.need_more()) __builtin_trap();
  if (r.invalid()) {
    if (r.reason.empty()) __builtin_trap();
    return 0;
  }
  if (r.consumed != size) __builtin_trap();
  const std::string fp = ja4_fingerprint(r.value);
  if (fp.size() != 36 || fp[0] != 't' || fp[10] != '_' || fp[23] != '_') __builtin_trap();
  if (fp[3] != 'd' && fp[3] != 'i') __builtin_trap();
  if (!digit(fp[4]) || !digit(fp[5]) || !digit(fp[6]) || !digit(fp[7])) __builtin_trap();
  if (!hex12(fp, 11) || !hex12(fp, 24)) __builtin_trap();
  if ((fp[3] == 'd') != r.value.has_sni) __builtin_trap();
  if (ja4_of_client_hello(std::span(data, size)) != fp) __builtin_trap();
  return 0;
}
