"""Writes the fuzz seed corpus (tests/fuzz/corpus) from a real capture:

    python3 make_corpus.py CAPTURE.tprof OUT_DIR

Each seed starts with the mode byte of tests/fuzz/fuzz_targets.h: 0 + the capture
(whole, and a prefix that ends mid-chunk), 1 + each of the first frame bodies,
2 and 3 + hand-made raw records covering every record kind the decoder knows,
4 + those records' delta transform (common/wire/frame_codec.h), and 5 + socket
streams (a Hello then the capture's first frames as messages; a stream with no Hello)."""

import os
import struct
import sys

CHUNK = struct.Struct("<IIII")
FRAME_CHUNK = 3


def chunks(data):
    pos = 24
    mark = 8 if struct.unpack_from("<I", data, 8)[0] >= 3 else 0  # version 3 on: a ChunkMark first
    while pos + mark + CHUNK.size <= len(data):
        ctype, conn, size, _ = CHUNK.unpack_from(data, pos + mark)
        body = pos + mark + CHUNK.size
        yield ctype, conn, data[body:body + size]
        pos = body + size


def record(kind, extra=0, domain=0, name=0, ts=0, a=0, b=0):
    return struct.pack("<BBHIQQQ", kind, extra, domain, name, ts, a, b)


def string_record(sid, text):
    raw = text.encode()
    slots = (len(raw) + 31) // 32
    return record(1, slots, 0, sid, 0, len(raw)) + raw.ljust(slots * 32, b"\0")


def raw_records():
    out = string_record(1, "ProfilerStep#0") + string_record(2, "work") + string_record(3, "dom")
    out += record(7, domain=1, name=3)                               # domain
    out += record(8, domain=1, name=2, a=5)                          # category
    out += record(12, ts=900, a=1)                                   # thread start
    out += record(2, domain=0, name=1, ts=1000)                      # push step
    out += record(2, domain=1, name=2, ts=1100, a=5 | (1 << 32), b=7)  # push with payload
    out += record(11, a=4 << 32, b=3)                                # payload
    out += record(6, name=2, ts=1150)                                # mark
    out += record(4, name=2, ts=1200, a=42)                          # start
    out += record(3, domain=1, ts=1300)                              # pop
    out += record(5, ts=1400, a=42)                                  # end
    out += record(3, ts=1500)                                        # pop step
    out += record(9, name=2, a=0, b=0)                               # thread name
    out += record(32, domain=211, name=2, ts=1600, a=1700, b=9)      # cuda runtime
    out += record(34, extra=2, domain=0, name=2, ts=1650, a=1750, b=9) + bytes(64)  # kernel
    out += record(35, extra=1, ts=1760, a=1800, b=9) + bytes(32)     # memcpy
    out += record(10, a=3, b=20)                                     # dropped
    return out


END_TIME_KINDS = {32, 33, 34, 35, 36, 38}
MASK64 = (1 << 64) - 1


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def zigzag(delta):
    delta &= MASK64
    return ((delta << 1) & MASK64) ^ (MASK64 if delta >> 63 else 0)


def delta_transform(raw):
    """The delta transform of frame_codec.h, for the mode-4 seed: slot count + bytes."""
    n = len(raw) // 32
    kinds, extras, cols, cont = bytearray(), bytearray(), [bytearray() for _ in range(5)], bytearray()
    prev_ts, prev_a, prev_b = 0, {}, {}
    i = heads = 0
    while i < n:
        kind, extra, domain, name, ts, a, b = struct.unpack_from("<BBHIQQQ", raw, i * 32)
        kinds.append(kind)
        extras.append(extra)
        heads += 1
        cols[0] += varint(domain)
        cols[1] += varint(name)
        cols[2] += varint(zigzag(ts - prev_ts))
        prev_ts = ts
        if kind in END_TIME_KINDS:
            cols[3] += varint(zigzag(a - ts))
        else:
            cols[3] += varint(zigzag(a - prev_a.get(kind, 0)))
            prev_a[kind] = a
        cols[4] += varint(zigzag(b - prev_b.get(kind, 0)))
        prev_b[kind] = b
        follow = min(extra, n - i - 1)
        cont += raw[(i + 1) * 32:(i + 1 + follow) * 32]
        i += 1 + follow
    header = varint(heads) + varint(n - heads) + b"".join(varint(len(c)) for c in cols)
    return struct.pack("<H", n) + header + kinds + extras + b"".join(cols) + cont


MSG_FRAME, MSG_BYE = 3, 4


def message(msg_type, body):
    return struct.pack("<II", msg_type, len(body)) + body


def socket_seeds(frames):
    """(name, bytes after the mode byte) for mode 5."""
    stream = b"".join(message(MSG_FRAME, body) for body in frames[:2])
    stream += message(MSG_BYE, struct.pack("<iiQQQ", 0, 0, 0, 0, 5000))
    return [("socket_hello_frames", b"\x01" + stream), ("socket_no_hello", b"\x00" + stream)]


def main():
    capture, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    with open(capture, "rb") as f:
        data = f.read()

    def seed(name, mode, body):
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(bytes([mode]) + body)

    seed("capture_whole", 0, data)
    seed("capture_prefix", 0, data[:len(data) * 2 // 3])
    frames = [body for ctype, _, body in chunks(data) if ctype == FRAME_CHUNK]
    for i, body in enumerate(frames[:3]):
        seed(f"frame_{i}", 1, body)
    seed("records_all_kinds", 2, raw_records())
    seed("delta_records_all_kinds", 3, raw_records())
    seed("delta_bytes_all_kinds", 4, delta_transform(raw_records()))
    for name, body in socket_seeds(frames):
        seed(name, 5, body)


if __name__ == "__main__":
    main()
