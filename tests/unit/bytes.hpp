#pragma once
// Wire bytes written as numbers in the unit tests: bytes({5, 1, 0}) + "example.com".
#include <initializer_list>
#include <string>

namespace vlessbench::test {

inline std::string bytes(std::initializer_list<int> list) {
  std::string s;
  for (int b : list) s.push_back(static_cast<char>(b));
  return s;
}

}  // namespace vlessbench::test
