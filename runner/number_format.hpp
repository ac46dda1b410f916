// Numbers as the run's reports print them: milliseconds to three decimals, never "nan" or "inf".
#pragma once

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

namespace vlessbench::runner {

inline std::string fmt_ms(std::optional<double> v, bool sign = false) {
  if (!v || !std::isfinite(*v)) return "-";  // never "nan" or "inf" in a report
  char buf[32];
  std::snprintf(buf, sizeof buf, sign ? "%+.3f" : "%.3f", *v);
  return buf;
}

}  // namespace vlessbench::runner
