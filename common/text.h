// Number formatting that more than one layer writes the same way.
#pragma once

#include <cstdio>
#include <string>

namespace torchprof {

// `v` with `decimals` decimals, then `unit` ("38.2%", "1.20 GB").
inline std::string format_fixed(double v, int decimals, const char* unit = "") {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", decimals, v, unit);
  return buf;
}

}  // namespace torchprof
