"""Nobody let in, bad input refused clearly: the collector's socket is private, peers of
another uid and broken clients are turned away without harming the real program, worker
names cannot escape the output directory, and damaged captures or option values give a
one-line reason and exit 2."""

import glob
import os
import shutil
import socket
import stat
import struct
import subprocess
import sys
import time

import tp
from tp import check, check_eq

HELLO_MAGIC = b"TPRFHLO1"
MSG_HELLO, MSG_ACK, MSG_FRAME = 1, 2, 3
ACK_OK, ACK_BAD_VERSION, ACK_BAD_MAGIC, ACK_REFUSED = 0, 1, 2, 3


def hello(magic=HELLO_MAGIC, version=1, slot=32, pid=None):
    body = magic + struct.pack("<IIiiQQIIII", version, slot, pid or os.getpid(), 1, 1, 1, 0, 0, 0, 0)
    return struct.pack("<II", MSG_HELLO, len(body)) + body


def read_ack(sock):
    data = b""
    while len(data) < 16:
        chunk = sock.recv(16 - len(data))
        if not chunk:
            return None
        data += chunk
    mtype, size, _version, status = struct.unpack("<IIII", data)
    check_eq((mtype, size), (MSG_ACK, 8), "HelloAck header")
    return status


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    return s


class Running:
    """torchprof-run with a target that waits; finds the target's socket path."""

    def __init__(self, prog, args, env=None):
        tp.require_tool()
        self.parent = tp.fresh_dir(prog)
        self.out = os.path.join(self.parent, "out")
        argv = [tp.bin_path("torchprof-run"), "-o", self.out, "--", tp.program(prog)] + [str(a) for a in args]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, env=env)
        self.target = self._find_target()
        self.socket = self._target_env()["TORCHPROF_SOCKET"]

    def _find_target(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for path in glob.glob(f"/proc/{self.proc.pid}/task/*/children"):
                with open(path) as f:
                    kids = f.read().split()
                if kids:
                    return int(kids[0])
            time.sleep(0.02)
        raise tp.CheckFailed("torchprof-run started no target")

    def _target_env(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(f"/proc/{self.target}/environ", "rb") as f:
                entries = [e.decode("utf-8", "replace") for e in f.read().split(b"\0") if b"=" in e]
            env = dict(e.split("=", 1) for e in entries)
            if "TORCHPROF_SOCKET" in env:
                return env
            time.sleep(0.02)  # still the launcher's fork, before execve
        raise tp.CheckFailed("the target has no TORCHPROF_SOCKET")

    def finish(self, expect_rc=0):
        out, err = self.proc.communicate(timeout=120)
        r = tp.Result(self.proc.args, subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err),
                      self.out, 0)
        tp._last_result = r
        check_eq(r.rc, expect_rc, "exit code of torchprof-run")
        return r


def warnings_text(r):
    return " | ".join(r.summary.get("warnings", []))


FLOOD = 20000


def check_flood_complete(r):
    procs = tp.processes_with_events(r.summary)
    check_eq(len(procs), 1, "processes with events")
    check_eq(procs[0]["events"], FLOOD + 1, "events of the real program")
    check_eq(r.summary.get("dropped_events"), 0, "dropped_events")


def socket_private():
    run = Running("rel_flood", [FLOOD, 1, 1500])
    st_dir = os.stat(os.path.dirname(run.socket))
    st_sock = os.stat(run.socket)
    check_eq(stat.S_IMODE(st_dir.st_mode), 0o700, "mode of the socket directory")
    check_eq(st_dir.st_uid, os.geteuid(), "owner of the socket directory")
    check(stat.S_ISSOCK(st_sock.st_mode), "TORCHPROF_SOCKET is not a socket")
    check_eq(st_sock.st_uid, os.geteuid(), "owner of the socket")
    socket_dir = os.path.dirname(run.socket)
    check_flood_complete(run.finish())
    check(not os.path.exists(socket_dir), f"{socket_dir} is left behind after the run")


CLIENT = r"""
import socket, struct, sys
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(path)
body = b"TPRFHLO1" + struct.pack("<IIiiQQIIII", 1, 32, 1, 1, 1, 1, 0, 0, 0, 0)
try:
    s.sendall(struct.pack("<II", 1, len(body)) + body)
    data = s.recv(16)
except OSError:
    data = b""
print(struct.unpack("<IIII", data)[3] if len(data) == 16 else "closed")
"""


def other_uid_refused():
    """A peer of another uid (made able to reach the socket with CAP_DAC_OVERRIDE) is
    refused at the handshake, and the refusal is in the run's warnings."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        print("SKIP: needs root and setpriv to act as another uid")
        return
    run = Running("rel_flood", [FLOOD, 1, 1500])
    proc = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                           "--inh-caps=+dac_override", "--ambient-caps=+dac_override",
                           sys.executable, "-c", CLIENT, run.socket],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    answer = proc.stdout.decode().strip()
    check(proc.returncode == 0, f"the other-uid client failed: {proc.stderr.decode()[-500:]}")
    check(answer in (str(ACK_REFUSED), "closed"), f"a peer of uid 65534 got {answer!r}, not a refusal")
    r = run.finish()
    check("with uid 65534" in warnings_text(r), f"no warning about the refused peer: {warnings_text(r)}")
    check_flood_complete(r)


def bad_handshake():
    run = Running("rel_flood", [FLOOD, 1, 1500])
    s = connect(run.socket)
    s.sendall(hello(magic=b"NOTMAGIC"))
    check_eq(read_ack(s), ACK_BAD_MAGIC, "answer to a foreign magic")
    s.close()
    s = connect(run.socket)
    s.sendall(hello(version=99))
    check_eq(read_ack(s), ACK_BAD_VERSION, "answer to protocol version 99")
    s.close()
    r = run.finish()
    text = warnings_text(r)
    check("foreign magic" in text, f"no warning about the bad magic: {text}")
    check("protocol 99" in text, f"no warning about the bad version: {text}")
    check_flood_complete(r)


def garbage_frames():
    """Broken clients (oversized body, undecodable frame, garbage before any Hello, a
    half message) lose their own connection only; the real program loses nothing."""
    run = Running("rel_flood", [FLOOD, 1, 2000])
    fake_pid = 999999
    # 1. an oversized body announced after a good Hello
    s = connect(run.socket)
    s.sendall(hello(pid=fake_pid))
    check_eq(read_ack(s), ACK_OK, "answer to a good Hello")
    s.sendall(struct.pack("<II", MSG_FRAME, 64 << 20))
    s.close()
    # 2. a frame whose body is not zstd
    s = connect(run.socket)
    s.sendall(hello(pid=fake_pid + 1))
    check_eq(read_ack(s), ACK_OK, "answer to a good Hello")
    body = struct.pack("<IIII", 1, 0, 64, 0) + os.urandom(200)
    s.sendall(struct.pack("<II", MSG_FRAME, len(body)) + body)
    s.sendall(struct.pack("<II", 77, 0))  # unknown message type
    s.close()
    # 3. garbage before any Hello; 4. half a message
    s = connect(run.socket)
    s.sendall(os.urandom(4096))
    s.close()
    s = connect(run.socket)
    s.sendall(hello()[:20])
    s.close()
    r = run.finish()
    text = warnings_text(r)
    check("exceeds the limit" in text, f"no warning about the oversized body: {text}")
    check("unknown message type 77" in text, f"no warning about the unknown message: {text}")
    check("could not be decompressed" in text, f"no warning about the undecodable frame: {text}")
    check_flood_complete(r)


def _files_outside(root, allowed_dir, marker):
    found = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if marker in name and not os.path.abspath(dirpath).startswith(os.path.abspath(allowed_dir)):
                found.append(os.path.join(dirpath, name))
    return found


def worker_name_escape():
    """Worker names with '/' or '..' from the option or the environment stay file names
    inside traces/."""
    for how in ("option", "env"):
        parent = tp.fresh_dir("worker")
        out = os.path.join(parent, "a", "b", "out")
        name = "../../../escaped_" + how + "/x"
        env = dict(os.environ)
        options = ["-o", out]
        if how == "option":
            options += ["--worker-name", name]
        else:
            env["TORCHPROF_WORKER_NAME"] = name
        r = tp.run_tool(options + ["--", tp.program("rel_tree"), "leaf", "w", 3], env=env)
        r.out_dir = out
        check_eq(r.rc, 0, f"exit code ({how})")
        traces = glob.glob(os.path.join(out, "traces", "*.pt.trace.json"))
        check_eq(len(traces), 1, f"trace files in traces/ ({how})")
        check("escaped_" + how in os.path.basename(traces[0]), f"worker name lost: {traces[0]}")
        outside = _files_outside(parent, os.path.join(out, "traces"), "escaped_")
        check(not outside, f"files written outside traces/: {outside}")


# ---------------------------------------------------------------------------
# Bad input


def _good_capture():
    r = tp.profile("rel_tree", ["leaf", "cap", 3])
    return r.file("capture.tprof")


def _report_fails(path, what, needle):
    r = tp.run_report([path, "-o", os.path.join(tp.fresh_dir("badreport"), "out")])
    check_eq(r.rc, 2, f"exit code of torchprof report on {what}")
    lines = [line for line in r.stderr_text.splitlines() if line.strip()]
    check_eq(len(lines), 1, f"lines of stderr for {what} ({r.stderr_text!r})")
    check(needle in lines[0], f"reason for {what} should mention {needle!r}: {lines[0]!r}")


def _report_prefix(path, what):
    out = os.path.join(tp.fresh_dir("prefixreport"), "out")
    r = tp.run_report([path, "-o", out])
    r.out_dir = out
    check_eq(r.rc, 0, f"exit code of torchprof report on {what}")
    text = r.stdout.decode("utf-8", "replace") + r.stderr_text
    check("capture truncated at byte" in text or "ends early" in text or "capture corrupted" in text,
          f"no note that {what} ends early or is damaged: {text!r}")
    return r


def _first_frame_body(data):
    for _pos, ctype, _conn, body, _size in tp.capture_chunks(data):
        if ctype == 3:
            return body
    raise tp.CheckFailed("the capture holds no frame")


def report_bad_inputs():
    good = _good_capture()
    with open(good, "rb") as f:
        data = f.read()
    d = tp.fresh_dir("badinputs")

    def write(name, content):
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(content)
        return path

    _report_fails(write("empty.tprof", b""), "an empty file", "not a torchprof capture")
    _report_fails(write("foreign.tprof", b"\x7fELF" + os.urandom(500)), "a foreign file", "not a torchprof capture")
    wrong = bytearray(data)
    wrong[8:12] = struct.pack("<I", 99)
    _report_fails(write("version.tprof", bytes(wrong)), "a capture of version 99", "version 99")
    _report_fails(os.path.join(d, "missing.tprof"), "a missing file", "no such file")
    # Truncated in the middle of a chunk and corrupted inside one: the readable prefix.
    r = _report_prefix(write("truncated.tprof", data[:len(data) - 7]), "a truncated capture")
    check(r.summary.get("processes") is not None, "no processes in the prefix's summary")
    corrupt = bytearray(data)
    corrupt[_first_frame_body(data) + 3] ^= 0xFF
    _report_prefix(write("corrupt.tprof", bytes(corrupt)), "a corrupted capture")


def bad_option_values():
    cases = [
        (["--row-limit", "many"], "many"),
        (["--sort", "no_such_key"], "no_such_key"),
        (["--schedule", "wait=x,active=1"], "wait=x,active=1"),
        (["--step-marker", "(unclosed"], "(unclosed"),
    ]
    for options, value in cases:
        out = os.path.join(tp.fresh_dir("badopt"), "out")
        r = tp.run_tool(["-o", out] + options + ["--", tp.program("rel_tree"), "leaf", "o", 1])
        check_eq(r.rc, 2, f"exit code for {options}")
        check(value in r.stderr_text, f"the message for {options} does not name {value!r}: {r.stderr_text!r}")
        check_eq(r.stdout, b"", f"the program ran despite {options}")


# ---------------------------------------------------------------------------
# Two local users: an attacker preparing a shared directory, a victim profiling there.
# Root ignores file modes, so both are unprivileged; the test creates them (as root).

ATTACKER, VICTIM = "tpattacker", "tpvictim"


def two_users():
    """(attacker, victim) as pwd entries, created when missing; None (and a SKIP line
    saying why) when this is not root or the tools are missing."""
    import pwd
    setpriv, useradd = shutil.which("setpriv"), shutil.which("useradd")
    if os.geteuid() != 0 or setpriv is None or useradd is None:
        print("SKIP: needs root, setpriv and useradd to act as two unprivileged users")
        return None
    users = []
    for name in (ATTACKER, VICTIM):
        try:
            users.append(pwd.getpwnam(name))
        except KeyError:
            subprocess.run([useradd, "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            users.append(pwd.getpwnam(name))
    return tuple(users)


def as_user(user, argv, cwd=None, env=None, popen=False, timeout=60):
    cmd = [shutil.which("setpriv"), f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
           "--"] + argv
    full_env = dict(env if env is not None else os.environ)
    full_env["HOME"] = cwd or "/"
    if popen:
        return subprocess.Popen(cmd, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
    return subprocess.run(cmd, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, timeout=timeout)


def shared_dir(prefix):
    """A fresh directory like /tmp (1777) the two users share, under one both can reach."""
    root = tp.fresh_dir(prefix)
    os.chmod(root, 0o755)
    shared = os.path.join(root, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o1777)
    return root, shared


def mkdir_as(user, path, mode):
    os.mkdir(path)
    os.chown(path, user.pw_uid, user.pw_gid)
    os.chmod(path, mode)


def write_as(user, path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chown(path, user.pw_uid, user.pw_gid)
    os.chmod(path, mode)


def symlink_as(user, target, path):
    os.symlink(target, path)
    os.lchown(path, user.pw_uid, user.pw_gid)


WAIT_FOR_GO = "touch started; i=0; while [ ! -e go ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done"


def planted_output_dir():
    """The attacker pre-creates torchprof_out (0777) in a shared directory and, during the
    victim's run, plants table.txt -> the victim's private file and traces -> a directory
    of the attacker's. The victim's file must stay as it was and no trace may land in the
    attacker's directory: the launcher refuses that output directory (exit 2, one line)."""
    users = two_users()
    if users is None:
        return
    attacker, victim = users
    tp.require_tool()
    root, shared = shared_dir("planted")
    victim_home = os.path.join(root, "victim")
    mkdir_as(victim, victim_home, 0o700)
    secret = os.path.join(victim_home, "secret.txt")
    write_as(victim, secret, "the victim's own words\n", 0o600)
    loot = os.path.join(shared, "loot")
    mkdir_as(attacker, loot, 0o777)
    out = os.path.join(shared, "torchprof_out")
    mkdir_as(attacker, out, 0o777)

    proc = as_user(victim, [tp.bin_path("torchprof-run"), "--", "/bin/sh", "-c", WAIT_FOR_GO],
                   cwd=shared, popen=True)
    deadline = time.monotonic() + 30
    while proc.poll() is None and not os.path.exists(os.path.join(shared, "started")) and time.monotonic() < deadline:
        time.sleep(0.02)
    if proc.poll() is None:  # the victim's program runs: the attacker plants the links
        symlink_as(attacker, secret, os.path.join(out, "table.txt"))
        symlink_as(attacker, secret, os.path.join(out, "summary.json"))
        symlink_as(attacker, loot, os.path.join(out, "traces"))
        write_as(attacker, os.path.join(shared, "go"), "")
    _out, err = proc.communicate(timeout=120)
    with open(secret) as f:
        check_eq(f.read(), "the victim's own words\n", "the victim's private file after the run")
    check_eq(os.listdir(loot), [], "files written into the attacker's directory")
    check_eq(proc.returncode, 2, "exit code of torchprof-run in another user's directory")
    lines = [line for line in err.decode().splitlines() if line.strip()]
    check_eq(len(lines), 1, f"lines of stderr ({err.decode()!r})")
    check("belongs to another user" in lines[0] and "torchprof_out" in lines[0], f"the reason: {lines[0]!r}")
    check(not os.path.exists(os.path.join(shared, "started")), "the program ran although nothing could be recorded")
    # The victim's own output directory there is taken, open to others: refused too.
    mkdir_as(victim, os.path.join(shared, "mine"), 0o777)
    r = as_user(victim, [tp.bin_path("torchprof-run"), "-o", "mine", "--", "/bin/true"], cwd=shared)
    check_eq(r.returncode, 2, "exit code for an output directory others can write")
    check("can be written by others" in r.stderr.decode(), f"the reason: {r.stderr.decode()!r}")
    # A link of the attacker's as a component of -o is not followed.
    symlink_as(attacker, victim_home, os.path.join(shared, "link"))
    r = as_user(victim, [tp.bin_path("torchprof-run"), "-o", "link/out", "--", "/bin/true"], cwd=shared)
    check_eq(r.returncode, 2, "exit code for -o through another user's link")
    check("symbolic link of another user" in r.stderr.decode(), f"the reason: {r.stderr.decode()!r}")
    check(not os.path.exists(os.path.join(victim_home, "out")), "the attacker's link was followed")


STAND_IN = r"""
import os, socket, sys
path, ready = sys.argv[1], sys.argv[2]
if len(sys.argv) > 3:
    s = socket.socket(fileno=int(sys.argv[3]))
else:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o777)
s.listen(8)
open(ready, "w").close()
s.settimeout(60)
while True:
    try:
        c, _ = s.accept()
    except OSError:
        break
    c.recv(256)
    c.sendall(b"ok window=7\n")
    c.close()
"""


def _stand_in(attacker, sock_path, workdir, fd=None):
    """A server of the attacker's answering every request 'ok window=7'."""
    script = os.path.join(workdir, "stand_in.py")
    with open(script, "w") as f:
        f.write(STAND_IN)
    os.chmod(script, 0o644)
    ready = os.path.join(workdir, "ready")
    argv = [sys.executable, script, sock_path, ready] + ([str(fd)] if fd is not None else [])
    cmd = [shutil.which("setpriv"), f"--reuid={attacker.pw_uid}", f"--regid={attacker.pw_gid}", "--clear-groups",
           "--"] + argv
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            pass_fds=(fd,) if fd is not None else ())
    deadline = time.monotonic() + 20
    while not os.path.exists(ready):
        check(proc.poll() is None and time.monotonic() < deadline, "the stand-in server did not start")
        time.sleep(0.02)
    return proc


def _control_refused(r, what, needle):
    err = r.stderr.decode()
    check(b"window 7" not in r.stdout, f"{what}: the stand-in's answer was taken: {r.stdout!r}")
    check_eq(r.returncode, 3, f"exit code of torchprof start ({what})")
    lines = [line for line in err.splitlines() if line.strip()]
    check_eq(len(lines), 1, f"lines of stderr ({what}): {err!r}")
    check(needle in lines[0], f"the reason ({what}) should say {needle!r}: {lines[0]!r}")


def spoofed_control():
    """Stand-in servers of the attacker's: named by a registry directory the attacker made
    for the victim, by a .control file in a directory the victim is pointed at, and (the
    socket in a private directory of the victim's, but served by the attacker) found by
    the server's uid. `torchprof start` talks to none of them and exits 3."""
    users = two_users()
    if users is None:
        return
    attacker, victim = users
    tp.require_tool()
    root, shared = shared_dir("spoof")
    adir = os.path.join(shared, "attacker")
    mkdir_as(attacker, adir, 0o755)
    sock = os.path.join(adir, "control.sock")
    server = _stand_in(attacker, sock, adir)
    try:
        entry = f"socket={sock}\ndir={shared}/run\nlauncher={server.pid}\ntarget={server.pid}\n"
        # 1. the victim's registry ($XDG_RUNTIME_DIR/torchprof), made by the attacker
        xdg = os.path.join(shared, "xdg")
        mkdir_as(attacker, xdg, 0o755)
        reg = os.path.join(xdg, "torchprof")
        mkdir_as(attacker, reg, 0o755)
        write_as(attacker, os.path.join(reg, str(server.pid)), entry)
        env = dict(os.environ, XDG_RUNTIME_DIR=xdg)
        r = as_user(victim, [tp.bin_path("torchprof"), "start"], cwd=shared, env=env)
        _control_refused(r, "registry of another user", "belongs to another user")
        # 2. a run directory holding the attacker's .control
        run_dir = os.path.join(shared, "run")
        mkdir_as(attacker, run_dir, 0o755)
        write_as(attacker, os.path.join(run_dir, ".control"), entry)
        r = as_user(victim, [tp.bin_path("torchprof"), "start", run_dir], cwd=shared)
        _control_refused(r, ".control of another user", "belongs to another user")
        # 3. everything the victim's, the server the attacker's
        vdir = os.path.join(root, "victim_run")
        mkdir_as(victim, vdir, 0o700)
        vsock_dir = os.path.join(vdir, "sock")
        mkdir_as(victim, vsock_dir, 0o700)
        vsock = os.path.join(vsock_dir, "control.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(vsock)
        os.chown(vsock, victim.pw_uid, victim.pw_gid)
        adir2 = os.path.join(shared, "attacker2")
        mkdir_as(attacker, adir2, 0o755)
        fd_server = _stand_in(attacker, vsock, adir2, s.fileno())  # listen() as the attacker
        s.close()
        try:
            write_as(victim, os.path.join(vdir, ".control"),
                     f"socket={vsock}\ndir={vdir}\nlauncher={fd_server.pid}\ntarget={fd_server.pid}\n", 0o600)
            r = as_user(victim, [tp.bin_path("torchprof"), "start", vdir], cwd=shared)
            _control_refused(r, "a server of another uid", f"served by uid {attacker.pw_uid}")
        finally:
            fd_server.kill()
            fd_server.wait()
    finally:
        server.kill()
        server.wait()



if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (
        socket_private, other_uid_refused, bad_handshake, garbage_frames, worker_name_escape,
        report_bad_inputs, bad_option_values, planted_output_dir, spoofed_control)}))
