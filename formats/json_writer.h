// Small helpers for writing JSON text by hand: traces hold millions of events and
// a DOM (nlohmann) costs several times the output's size in memory and time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace torchprof::json {

// Appends `s` as a quoted JSON string. Control characters are escaped and bytes
// that are not valid UTF-8 become U+FFFD, so any name yields parseable output.
void append_string(std::string& out, std::string_view s);

// Appends a nanosecond count as microseconds with exactly three decimals ("12.345").
void append_us(std::string& out, int64_t ns);

void append_int(std::string& out, int64_t v);
void append_uint(std::string& out, uint64_t v);
void append_double(std::string& out, double v);  // shortest form that reads back exactly

}  // namespace torchprof::json
