#!/usr/bin/env python3
"""A throwaway collector for checking libtorchprof_inject.so by hand.

Listens on a Unix socket, answers HelloAck (status from --status), decodes every
Frame (zstd via libzstd through ctypes, then the inverse delta transform of
common/wire/frame_codec.h for kZstdDelta frames) and prints one JSON object per
connection when it closes: Hello fields, per-thread record counts by kind, the
last kDropped pair, resolved names of pushes, seq gaps and the Bye. Exits after
--connections connections have closed.
"""
import argparse, ctypes, ctypes.util, json, os, socket, struct, sys, threading

KINDS = {0: "pad", 1: "string", 2: "push", 3: "pop", 4: "start", 5: "end", 6: "mark", 7: "domain",
         8: "category", 9: "thread_name", 10: "dropped", 11: "payload", 12: "thread_start",
         13: "buffer_usage", 14: "buffer_refused",
         32: "cuda_runtime", 33: "cuda_driver", 34: "kernel", 35: "memcpy", 36: "memset", 37: "memory",
         38: "sync", 39: "device", 40: "gpu_dropped", 41: "gpu_notice", 42: "cuda_profiler",
         43: "gpu_unreadable", 44: "gpu_state"}

# Continuation-slot layouts of the GPU kinds (common/wire/wire.h Gpu*Extra).
GPU_EXTRA = {
    "kernel": ("<II3I3IIIIIQQ", ["stream", "context", "grid", "block", "registers_per_thread",
                                 "static_shared_memory", "dynamic_shared_memory", "graph_id", "graph_node_id",
                                 "queued"]),
    "memcpy": ("<QIIBBBBIQ", ["bytes", "stream", "context", "copy_kind", "src_kind", "dst_kind", "flags",
                              "graph_id", None]),
    "memory": ("<BBHIIIQQ", ["operation", "memory_kind", None, "stream", "context", None, "correlation", "pc"]),
    "sync": ("<IIII2Q", ["type", "stream", "context", "event", None]),
    "device": ("<Q14I", ["total_global_mem", "compute_major", "compute_minor", "max_threads_per_block",
                         "max_threads_per_multiprocessor", "regs_per_block", "warp_size", "shared_mem_per_block",
                         "num_sms", "regs_per_multiprocessor", "shared_mem_per_block_optin",
                         "shared_mem_per_multiprocessor", None]),
}
GPU_EXTRA["memset"] = GPU_EXTRA["memcpy"]
# Written by the flusher about the whole process: not records the program emitted.
FLUSHER_KINDS = {10, 13, 14}


def gpu_fields(k, raw, i, extra, head):
    """One GPU/CUDA record as a dict (name ids resolved later, in summarize)."""
    kind, _, domain, name, ts, a, b = head
    rec = {"kind": k, "domain": domain, "name_id": name, "ts": ts, "a": a, "b": b}
    if k in GPU_EXTRA and extra:
        fmt, names = GPU_EXTRA[k]
        vals = list(struct.unpack_from(fmt, raw, (i + 1) * 32))
        out = []
        for n in names:  # groups of 3 for grid/block, 3 reserved ints for device, 2 for sync
            if n in ("grid", "block"):
                out.append((n, vals[:3])); vals = vals[3:]
            elif n is None and k == "device":
                vals = vals[3:]
            elif n is None and k == "sync":
                vals = vals[2:]
            else:
                out.append((n, vals.pop(0)))
        rec.update({n: v for n, v in out if n is not None})
    return rec

zstd = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
zstd.ZSTD_decompress.restype = ctypes.c_size_t
zstd.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
zstd.ZSTD_isError.argtypes = [ctypes.c_size_t]


def unzstd(data, raw_size):
    out = ctypes.create_string_buffer(raw_size)
    n = zstd.ZSTD_decompress(out, raw_size, data, len(data))
    if zstd.ZSTD_isError(n) or n != raw_size:
        raise ValueError("bad frame")
    return out.raw


zstd.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
zstd.ZSTD_getFrameContentSize.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

END_TIME_KINDS = {32, 33, 34, 35, 36, 38}  # `a` is an end time, coded against the record's ts
MASK64 = (1 << 64) - 1


def varints(data, pos, end):
    """All varints of data[pos:end] as a list; ValueError when the last one is cut."""
    out = []
    v = shift = 0
    for byte in data[pos:end]:
        v |= (byte & 0x7F) << shift
        if byte < 0x80:
            out.append(v)
            v = shift = 0
        else:
            shift += 7
    if shift:
        raise ValueError("cut varint")
    return out


def unzigzag(v):
    return (v >> 1) ^ -(v & 1)


def undelta(data, n):
    """Inverse of the delta transform (common/wire/frame_codec.h): `n` slots as raw bytes."""
    pos = 0
    header = []
    for _ in range(7):
        v = shift = 0
        while True:
            byte = data[pos]
            pos += 1
            v |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        header.append(v)
    heads, conts, *lens = header
    if conts != n - heads or pos + 2 * heads + sum(lens) + 32 * conts != len(data):
        raise ValueError("bad delta header")
    kinds = data[pos:pos + heads]
    extras = data[pos + heads:pos + 2 * heads]
    pos += 2 * heads
    cols = []
    for length in lens:
        cols.append(varints(data, pos, pos + length))
        pos += length
    domain, name, dts, da, db = cols
    if any(len(c) != heads for c in cols):
        raise ValueError("bad delta column")
    out = bytearray()
    prev_ts = 0
    prev_a, prev_b = {}, {}
    slot = 0
    for h in range(heads):
        kind, extra = kinds[h], extras[h]
        ts = (prev_ts + unzigzag(dts[h])) & MASK64
        prev_ts = ts
        if kind in END_TIME_KINDS:
            a = (ts + unzigzag(da[h])) & MASK64
        else:
            a = (prev_a.get(kind, 0) + unzigzag(da[h])) & MASK64
            prev_a[kind] = a
        b = (prev_b.get(kind, 0) + unzigzag(db[h])) & MASK64
        prev_b[kind] = b
        out += struct.pack("<BBHIQQQ", kind, extra, domain[h], name[h], ts, a, b)
        follow = min(extra, n - slot - 1)
        out += data[pos:pos + 32 * follow]
        pos += 32 * follow
        slot += 1 + follow
    if slot != n or pos != len(data):
        raise ValueError("bad delta layout")
    return bytes(out)


def decode_frame(enc, data, raw_size):
    if enc == 0:
        return unzstd(data, raw_size)
    if enc == 1:
        content = zstd.ZSTD_getFrameContentSize(data, len(data))
        if content > 70 + 40 * (raw_size // 32):
            raise ValueError("bad delta frame size")
        return undelta(unzstd(data, content), raw_size // 32)
    raise ValueError(f"unknown frame encoding {enc}")


def recv_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def count_slots_fast(raw, st, tid):
    """Counts heads only (numpy): for throughput runs where decoding in Python would be the bottleneck."""
    import numpy as np
    th = st["threads"].setdefault(tid, {"kinds": {}, "heads": 0, "last_dropped": None, "names": {}})
    a = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 32)
    extra = a[:, 1]
    cand = np.nonzero(extra)[0]
    skip = 0
    cont = 0
    head = np.ones(len(a), dtype=bool)
    for i in cand:
        if i < skip:
            continue
        cont += int(extra[i])
        skip = i + 1 + int(extra[i])
        head[i + 1:skip] = False
    kinds = a[:, 0]
    flusher_own = int(np.count_nonzero(head & ((kinds == 13) | (kinds == 14))))
    dropped_idx = np.nonzero(kinds == 10)[0]
    n_dropped = 0
    for i in dropped_idx[::-1]:
        q = np.frombuffer(raw, dtype="<u8", count=4, offset=int(i) * 32)
        if a[i, 1] == 0 and i == len(a) - 1:
            th["last_dropped"] = [int(q[2]), int(q[3])]
            n_dropped = 1
            break
    th["heads"] += len(a) - cont - n_dropped - flusher_own


def decode_slots(raw, st, tid):
    th = st["threads"].setdefault(tid, {"kinds": {}, "heads": 0, "last_dropped": None, "names": {}})
    i = 0
    while i < len(raw) // 32:
        kind, extra, domain, name, ts, a, b = struct.unpack_from("<BBHIQQQ", raw, i * 32)
        k = KINDS.get(kind, str(kind))
        th["kinds"][k] = th["kinds"].get(k, 0) + 1
        if k == "dropped":
            th["last_dropped"] = [a, b]
        elif k == "buffer_usage":
            st["buffer_peak"] = max(st.get("buffer_peak", 0), a)
            st["buffer_cap"] = b
        elif kind not in FLUSHER_KINDS:
            th["heads"] += 1
        if k == "string":
            st["strings"][name] = raw[(i + 1) * 32:(i + 1) * 32 + a].decode("utf-8", "replace")
        elif k in ("push", "mark", "start", "thread_name", "domain", "category"):
            st["uses"].append((tid, k, name, domain, a, b))
        if k in ("push", "pop", "start", "end", "mark"):
            st["ts"].setdefault(tid, []).append(ts)
        if k in ("push", "pop"):
            st["stack_events"].append((tid, k, ts, name))
        if kind >= 32:
            rec = gpu_fields(k, raw, i, extra, (kind, extra, domain, name, ts, a, b))
            rec["tid"] = tid
            st["gpu"].append(rec)
        i += 1 + extra


def serve(conn, args, results, lock):
    st = {"threads": {}, "strings": {}, "uses": [], "ts": {}, "seq": {}, "gaps": 0, "frames": 0,
          "gpu": [], "stack_events": [],
          "raw_bytes": 0, "wire_bytes": 0, "bye": None, "hello": None}
    hdr = recv_exact(conn, 8)
    if hdr is None:
        return
    typ, size = struct.unpack("<II", hdr)
    body = recv_exact(conn, size)
    magic, ver, slot, pid, ppid, mono, real, el, cl, hl, envl = struct.unpack_from("<8sIIiiQQIIII", body)
    off = 56
    exe = body[off:off + el].decode(); off += el
    argv = [x.decode() for x in body[off:off + cl].split(b"\0") if x]; off += cl
    host = body[off:off + hl].decode(); off += hl
    env = [x.decode() for x in body[off:off + envl].split(b"\0") if x]
    st["hello"] = {"magic": magic.decode(), "version": ver, "pid": pid, "ppid": ppid, "exe": exe,
                   "argv": argv, "host": host, "env": env, "mono_ns": mono, "real_ns": real}
    conn.sendall(struct.pack("<IIII", 2, 8, 1, args.status))
    while True:
        hdr = recv_exact(conn, 8)
        if hdr is None:
            break
        typ, size = struct.unpack("<II", hdr)
        body = recv_exact(conn, size)
        if body is None:
            break
        if typ == 3:
            tid, enc, raw_size, seq = struct.unpack_from("<IIII", body)
            exp = st["seq"].get(tid, 0)
            if seq != exp:
                st["gaps"] += 1
            st["seq"][tid] = seq + 1
            st["frames"] += 1
            st["raw_bytes"] += raw_size
            st["wire_bytes"] += size + 8
            raw = decode_frame(enc, body[16:], raw_size)
            if args.fast:
                count_slots_fast(raw, st, tid)
            else:
                decode_slots(raw, st, tid)
        elif typ == 4:
            kind, status, emitted, dropped, mono = struct.unpack("<iiQQQ", body)
            st["bye"] = {"kind": kind, "status": status, "emitted": emitted, "dropped": dropped}
    conn.close()
    summarize(st, args, results, lock)


def summarize(st, args, results, lock):
    names = {}
    unresolved = 0
    for tid, k, name, domain, a, b in st["uses"]:
        if name and name not in st["strings"]:
            unresolved += 1
        if k in ("push", "mark", "start") and name in st["strings"]:
            key = f"{k}:{st['strings'][name]}"
            names[key] = names.get(key, 0) + 1
    monotonic = all(all(x <= y for x, y in zip(v, v[1:])) for v in st["ts"].values())
    threads = {str(t): v for t, v in st["threads"].items()}
    heads = sum(v["heads"] for v in st["threads"].values())
    out = {"hello": st["hello"], "frames": st["frames"], "seq_gaps": st["gaps"], "raw_bytes": st["raw_bytes"],
           "wire_bytes": st["wire_bytes"], "records": heads, "threads": threads, "bye": st["bye"],
           "unresolved_names": unresolved, "ts_monotonic_per_thread": monotonic,
           "buffer_peak": st.get("buffer_peak"), "buffer_cap": st.get("buffer_cap"),
           "domains": {k: v for k, v in st["strings"].items() if any(u[1] == "domain" and u[2] == k for u in st["uses"])},
           "names": dict(sorted(names.items(), key=lambda kv: -kv[1])[:args.top])}
    if args.gpu:
        for rec in st["gpu"]:
            rec["name"] = st["strings"].get(rec["name_id"]) if rec["name_id"] else None
            if rec["name_id"] and rec["name"] is None:
                out["unresolved_names"] += 1
        out["gpu"] = st["gpu"]
        out["stack_events"] = [(t, k, ts, st["strings"].get(n)) for t, k, ts, n in st["stack_events"]]
    with lock:
        results.append(out)
        if args.print:
            print(json.dumps(out), flush=True)


def parse_args(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("--connections", type=int, default=1)
    ap.add_argument("--status", type=int, default=0, help="HelloAck status to answer")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--fast", action="store_true", help="count records only (needs numpy)")
    ap.add_argument("--timeout", type=float, default=None, help="stop waiting for connections after this")
    ap.add_argument("--gpu", action="store_true", help="list CUDA/GPU records and push/pop events in the output")
    args = ap.parse_args(argv)
    args.print = True
    return args


def listen(path):
    if os.path.exists(path):
        os.unlink(path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)
    return srv


def collect(srv, args):
    """Serves args.connections connections on the listening socket; returns their summaries."""
    results, lock, workers = [], threading.Lock(), []
    srv.settimeout(args.timeout)
    try:
        for _ in range(args.connections):
            conn, _ = srv.accept()
            conn.settimeout(None)
            t = threading.Thread(target=serve, args=(conn, args, results, lock))
            t.start()
            workers.append(t)
    except socket.timeout:
        pass
    for t in workers:
        t.join()
    return results


def main():
    args = parse_args()
    srv = listen(args.socket)
    collect(srv, args)
    srv.close()
    os.unlink(args.socket)


if __name__ == "__main__":
    main()
