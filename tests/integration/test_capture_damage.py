"""A damaged capture.tprof: one flipped byte costs the chunk it lands in, not the rest of
the file, and is reported as corruption (table notes, summary.json, stderr), not as a
truncation."""

import os
import random

import tp
from tp import check, check_eq

STEPS = 300


def _steps(summary):
    procs = tp.processes_with_events(summary)
    check_eq(len(procs), 1, "processes with events")
    return procs[0].get("steps", 0)


def flipped_byte():
    # 300 steps of ~5 ms: GAP 0.5, forward 1, GAP 0.5, backward 2, GAP 0.5, between 0.5.
    r = tp.profile("nvtx_steps", [STEPS, 1, 2, 0.5])
    check_eq(_steps(r.summary), STEPS, "steps of the intact capture")
    with open(r.file("capture.tprof"), "rb") as f:
        data = f.read()
    chunks = list(tp.capture_chunks(data))
    frames = [c for c in chunks if c[1] == 3]
    check(len(frames) >= 10, f"only {len(frames)} frames in the capture")
    rng = random.Random(35)
    # (what, offset): a frame chunk's size field, another's sync word, the first frame's
    # body (the frame that defines the names of forward, backward, between_steps), and
    # seeded offsets anywhere after the file header.
    mid = frames[len(frames) // 2]
    late = frames[(3 * len(frames)) // 4]
    first = frames[0]
    cases = [("size field of a frame chunk's header", mid[0] + 8 + 8),
             ("sync word of a frame chunk", late[0] + 1),
             ("body of the frame that defines the names", first[3] + first[4] // 2)]
    while len(cases) < 20:
        cases.append(("seeded offset", rng.randrange(24, len(data))))
    d = tp.fresh_dir("damage")
    lost_names_seen = False
    for k, (what, offset) in enumerate(cases):
        damaged = bytearray(data)
        damaged[offset] ^= rng.randrange(1, 256)
        path = os.path.join(d, f"capture{k}.tprof")
        with open(path, "wb") as f:
            f.write(bytes(damaged))
        out = os.path.join(d, f"out{k}")
        rep = tp.run_report([path, "-o", out])
        rep.out_dir = out
        label = f"{what} (byte {offset} of {len(data)})"
        check_eq(rep.rc, 0, f"exit code of torchprof report, {label}")
        summary = rep.summary
        steps = _steps(summary)
        print(f"{label}: {steps} steps, {summary.get('corruption')}")
        check(steps >= 280, f"{steps} steps of {STEPS} reported, {label}")
        check(summary.get("corrupted") is True, f"summary.json corrupted is not true, {label}")
        check(summary.get("truncated") is False, f"reported as a truncation, {label}")
        corruption = summary.get("corruption") or {}
        check(corruption.get("damaged_chunks", 0) >= 1, f"no damaged chunk counted, {label}: {corruption}")
        stdout = rep.stdout.decode("utf-8", "replace")
        check("capture corrupted:" in stdout, f"no corruption note after the table, {label}: {stdout[-600:]!r}")
        check("capture corrupted:" in rep.stderr_text, f"no corruption line on stderr, {label}: {rep.stderr_text!r}")
        check("truncated" not in stdout, f"reported as truncated, {label}")
        if what.startswith("body of the frame"):
            lost_names_seen = "<lost #" in stdout
            check(lost_names_seen, f"the names that frame defined are not shown as <lost #id>: {stdout[:1500]!r}")
            warnings = " | ".join(w for p in summary["processes"] for w in p.get("warnings", []))
            check("damaged in the capture" in warnings, f"no warning of the damaged frame: {warnings}")
    check(lost_names_seen, "the frame that defines names was not damaged")


if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (flipped_byte,)}))
