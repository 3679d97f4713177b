// The delta transform of FrameEncoding::kZstdDelta: a frame's 32-byte slots turned
// into columns of small numbers before zstd, and back, exactly.
//
// The flusher thread encodes (never the program's threads); the collector side
// decodes (reading/frame_decode.h). Header-only, no allocation, no exceptions:
// the injected library includes it as it is.
//
// A frame's slots are a run of record heads, each followed by `extra` continuation
// slots (wire.h). The transform writes, for the heads in order:
//
//   header   varint: heads, continuation slots, then the byte length of the domain,
//            name, ts, a and b columns (the kind and extra columns are `heads` long)
//   kind     1 byte per head
//   extra    1 byte per head
//   domain   varint per head
//   name     varint per head
//   ts       zigzag varint of ts minus the previous head's ts (0 before the first)
//   a        zigzag varint of a minus ts for the kinds whose `a` is an end time
//            (CUDA API calls, kernels, memcpy, memset, sync); otherwise of a minus
//            the previous head of the same kind's a (0 before the first)
//   b        zigzag varint of b minus the previous head of the same kind's b
//   cont     the continuation slots, 32 bytes each, in order
//
// All differences wrap modulo 2^64, so every value round-trips, unknown kinds
// included. A head whose `extra` runs past the end of the frame owns the slots
// that are left (the decoder's walk reports such a cut record as before).
// Repetitive traffic becomes runs of identical bytes per column, which zstd folds
// into almost nothing; what is left is mostly the timestamps' jitter.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/wire/wire.h"

namespace torchprof::wire::codec {

// Varints of up to 64 bits: at most 10 bytes.
constexpr size_t kMaxVarint = 10;
// Header: 7 varints.
constexpr size_t kMaxHeader = 7 * kMaxVarint;
// Worst case per slot: a head of 1 + 1 + 3 + 5 + 10 + 10 + 10 = 40 bytes (a slot that
// is a continuation takes 32).
constexpr size_t kMaxHeadBytes = 40;

// Bytes delta_encode() may use in `out` for `slots` slots. The encoder lays the columns
// out at their worst-case offsets and then packs them, so it needs this much room.
constexpr size_t encode_buffer_size(uint32_t slots) {
  return kMaxHeader + size_t{slots} * (2 + 3 + 5 + 3 * kMaxVarint + kSlotSize);
}
// The longest valid encoding of `slots` slots (what a decoder may accept at most).
constexpr size_t max_encoded_size(uint32_t slots) { return kMaxHeader + size_t{slots} * kMaxHeadBytes; }

// True for kinds whose `a` holds an end timestamp, predicted from their own ts.
constexpr bool a_is_end_time(uint8_t kind) {
  return kind == static_cast<uint8_t>(Kind::kCudaRuntime) || kind == static_cast<uint8_t>(Kind::kCudaDriver) ||
         kind == static_cast<uint8_t>(Kind::kKernel) || kind == static_cast<uint8_t>(Kind::kMemcpy) ||
         kind == static_cast<uint8_t>(Kind::kMemset) || kind == static_cast<uint8_t>(Kind::kSync);
}

constexpr uint64_t zigzag(uint64_t delta) {
  return (delta << 1) ^ static_cast<uint64_t>(static_cast<int64_t>(delta) >> 63);
}
constexpr uint64_t unzigzag(uint64_t v) { return (v >> 1) ^ (~(v & 1) + 1); }

inline uint8_t* put_varint(uint8_t* p, uint64_t v) {
  if (v < 0x80) {  // the common case: one byte
    *p = static_cast<uint8_t>(v);
    return p + 1;
  }
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// Reads a varint from [p, end); nullptr when it is cut or longer than 64 bits.
inline const uint8_t* get_varint(const uint8_t* p, const uint8_t* end, uint64_t& v) {
  if (p < end && *p < 0x80) {  // the common case: one byte
    v = *p;
    return p + 1;
  }
  v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (p == end) return nullptr;
    uint8_t byte = *p++;
    if (shift == 63 && byte > 1) return nullptr;
    v |= uint64_t{byte & 0x7fu} << shift;
    if (byte < 0x80) return p;
  }
  return nullptr;
}

// get_varint() for a p with at least kMaxVarint readable bytes after it.
inline const uint8_t* get_varint_unbounded(const uint8_t* p, uint64_t& v) {
  uint64_t byte = p[0];
  if (byte < 0x80) {
    v = byte;
    return p + 1;
  }
  uint64_t x = byte & 0x7f;
  for (unsigned i = 1; i < kMaxVarint; ++i) {
    byte = p[i];
    if (i == kMaxVarint - 1 && byte > 1) return nullptr;
    x |= (byte & 0x7f) << (7 * i);
    if (byte < 0x80) {
      v = x;
      return p + i + 1;
    }
  }
  return nullptr;
}

// Encodes `n` slots into `out` (at least encode_buffer_size(n) bytes); returns the
// encoded length, at most max_encoded_size(n).
inline size_t delta_encode(const Record* in, uint32_t n, uint8_t* out) {
  uint64_t prev_a[256];
  uint64_t prev_b[256];
  std::memset(prev_a, 0, sizeof prev_a);
  std::memset(prev_b, 0, sizeof prev_b);
  // Worst-case layout of the columns after the header room; packed at the end.
  uint8_t* const kinds = out + kMaxHeader;
  uint8_t* const extras = kinds + n;
  uint8_t* const domain0 = extras + n;
  uint8_t* const name0 = domain0 + size_t{n} * 3;
  uint8_t* const ts0 = name0 + size_t{n} * 5;
  uint8_t* const a0 = ts0 + size_t{n} * kMaxVarint;
  uint8_t* const b0 = a0 + size_t{n} * kMaxVarint;
  uint8_t* const cont0 = b0 + size_t{n} * kMaxVarint;
  uint8_t *domain = domain0, *name = name0, *ts = ts0, *a = a0, *b = b0, *cont = cont0;
  uint32_t heads = 0;
  uint64_t prev_ts = 0;
  for (uint32_t i = 0; i < n;) {
    const Record& r = in[i];
    kinds[heads] = r.kind;
    extras[heads] = r.extra;
    ++heads;
    domain = put_varint(domain, r.domain);
    name = put_varint(name, r.name);
    ts = put_varint(ts, zigzag(r.ts - prev_ts));
    prev_ts = r.ts;
    if (a_is_end_time(r.kind)) {
      a = put_varint(a, zigzag(r.a - r.ts));
    } else {
      a = put_varint(a, zigzag(r.a - prev_a[r.kind]));
      prev_a[r.kind] = r.a;
    }
    b = put_varint(b, zigzag(r.b - prev_b[r.kind]));
    prev_b[r.kind] = r.b;
    if (r.extra == 0) {
      ++i;
      continue;
    }
    uint32_t more = n - i - 1;
    uint32_t follow = r.extra < more ? r.extra : more;
    std::memcpy(cont, &in[i + 1], size_t{follow} * kSlotSize);
    cont += size_t{follow} * kSlotSize;
    i += 1 + follow;
  }
  uint8_t header[kMaxHeader];
  uint8_t* h = header;
  h = put_varint(h, heads);
  h = put_varint(h, n - heads);
  h = put_varint(h, static_cast<uint64_t>(domain - domain0));
  h = put_varint(h, static_cast<uint64_t>(name - name0));
  h = put_varint(h, static_cast<uint64_t>(ts - ts0));
  h = put_varint(h, static_cast<uint64_t>(a - a0));
  h = put_varint(h, static_cast<uint64_t>(b - b0));
  // Pack: every column moves down (never up), so memmove in order is safe.
  uint8_t* p = out;
  auto move = [&p](const uint8_t* from, size_t len) {
    std::memmove(p, from, len);
    p += len;
  };
  move(header, static_cast<size_t>(h - header));
  move(kinds, heads);
  move(extras, heads);
  move(domain0, static_cast<size_t>(domain - domain0));
  move(name0, static_cast<size_t>(name - name0));
  move(ts0, static_cast<size_t>(ts - ts0));
  move(a0, static_cast<size_t>(a - a0));
  move(b0, static_cast<size_t>(b - b0));
  move(cont0, static_cast<size_t>(cont - cont0));
  return static_cast<size_t>(p - out);
}

enum class DecodeStatus {
  kOk = 0,
  kBadHeader,    // the header is cut or its counts disagree with the frame's size
  kBadColumn,    // a column ends early, holds an oversized value or has bytes left over
  kBadLayout,    // the heads and their continuation slots do not add up to the frame
};

inline const char* status_text(DecodeStatus s) {
  switch (s) {
    case DecodeStatus::kOk: return "ok";
    case DecodeStatus::kBadHeader: return "delta frame header does not match its size";
    case DecodeStatus::kBadColumn: return "delta frame column is damaged";
    case DecodeStatus::kBadLayout: return "delta frame records do not fill the frame";
  }
  return "unknown delta frame error";
}

// Decodes `size` bytes into exactly `n` slots at `out` (n * kSlotSize bytes, any
// alignment). Checks every count and bound: damaged input gives an error, never a
// read or write out of bounds.
inline DecodeStatus delta_decode(const uint8_t* in, size_t size, uint8_t* out, uint32_t n) {
  const uint8_t* const end = in + size;
  const uint8_t* p = in;
  uint64_t heads = 0, conts = 0, len[5] = {};
  if ((p = get_varint(p, end, heads)) == nullptr || (p = get_varint(p, end, conts)) == nullptr) {
    return DecodeStatus::kBadHeader;
  }
  for (uint64_t& l : len) {
    if ((p = get_varint(p, end, l)) == nullptr) return DecodeStatus::kBadHeader;
  }
  if (heads > n || conts != n - heads) return DecodeStatus::kBadHeader;
  // Sum the column lengths without overflow: each is bounded by the input's size.
  uint64_t total = 2 * heads + conts * kSlotSize;
  for (uint64_t l : len) {
    if (l > size) return DecodeStatus::kBadHeader;
    total += l;
  }
  if (total != static_cast<uint64_t>(end - p)) return DecodeStatus::kBadHeader;
  const uint8_t* kinds = p;
  const uint8_t* extras = kinds + heads;
  const uint8_t* col[5];
  const uint8_t* col_end[5];
  const uint8_t* q = extras + heads;
  for (int c = 0; c < 5; ++c) {
    col[c] = q;
    q += len[c];
    col_end[c] = q;
  }
  const uint8_t* cont = q;
  const uint8_t* const cont_end = end;
  uint64_t prev_a[256];
  uint64_t prev_b[256];
  std::memset(prev_a, 0, sizeof prev_a);
  std::memset(prev_b, 0, sizeof prev_b);
  uint64_t prev_ts = 0;
  uint32_t slot = 0;
  // Away from a column's end every varint is whole (at most kMaxVarint bytes), so
  // most heads read without bounds checks: with k * kMaxVarint bytes left in every
  // column, the next k heads are safe.
  auto safe_heads = [&] {
    size_t k = static_cast<size_t>(col_end[0] - col[0]);
    for (int c = 1; c < 5; ++c) k = std::min(k, static_cast<size_t>(col_end[c] - col[c]));
    return k / kMaxVarint;
  };
  size_t unchecked = 0;
  for (uint64_t h = 0; h < heads; ++h) {
    if (slot >= n) return DecodeStatus::kBadLayout;
    uint64_t domain, name, dts, da, db;
    if (unchecked == 0) unchecked = safe_heads();
    if (unchecked > 0) {
      --unchecked;
      if ((col[0] = get_varint_unbounded(col[0], domain)) == nullptr ||
          (col[1] = get_varint_unbounded(col[1], name)) == nullptr ||
          (col[2] = get_varint_unbounded(col[2], dts)) == nullptr ||
          (col[3] = get_varint_unbounded(col[3], da)) == nullptr ||
          (col[4] = get_varint_unbounded(col[4], db)) == nullptr || domain > 0xffff || name > 0xffffffffu) {
        return DecodeStatus::kBadColumn;
      }
    } else if ((col[0] = get_varint(col[0], col_end[0], domain)) == nullptr ||
               (col[1] = get_varint(col[1], col_end[1], name)) == nullptr ||
               (col[2] = get_varint(col[2], col_end[2], dts)) == nullptr ||
               (col[3] = get_varint(col[3], col_end[3], da)) == nullptr ||
               (col[4] = get_varint(col[4], col_end[4], db)) == nullptr || domain > 0xffff ||
               name > 0xffffffffu) {
      return DecodeStatus::kBadColumn;
    }
    const uint8_t kind = kinds[h];
    const uint8_t extra = extras[h];
    const uint64_t ts = prev_ts + unzigzag(dts);
    prev_ts = ts;
    uint64_t a;
    if (a_is_end_time(kind)) {
      a = ts + unzigzag(da);
    } else {
      a = prev_a[kind] + unzigzag(da);
      prev_a[kind] = a;
    }
    const uint64_t b = prev_b[kind] + unzigzag(db);
    prev_b[kind] = b;
    uint8_t* const slot_out = out + size_t{slot} * kSlotSize;
    store_record(slot_out, kind, extra, domain, name, ts, a, b);
    if (extra == 0) {
      ++slot;
      continue;
    }
    uint32_t more = n - slot - 1;
    uint32_t follow = extra < more ? extra : more;
    // The continuation column holds exactly the slots the heads claim; a damaged
    // `extra` must not read past it (the slots left for later heads).
    if (size_t{follow} * kSlotSize > static_cast<size_t>(cont_end - cont)) return DecodeStatus::kBadLayout;
    std::memcpy(out + size_t{slot + 1} * kSlotSize, cont, size_t{follow} * kSlotSize);
    cont += size_t{follow} * kSlotSize;
    slot += 1 + follow;
  }
  for (int c = 0; c < 5; ++c) {
    if (col[c] != col_end[c]) return DecodeStatus::kBadColumn;
  }
  if (slot != n || cont != cont_end) return DecodeStatus::kBadLayout;
  return DecodeStatus::kOk;
}

}  // namespace torchprof::wire::codec
