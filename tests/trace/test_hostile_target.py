# SPDX-License-Identifier: MIT
"""Root's `trace cat` and `trace stat` against a hostile target:
a process of uid 65534 that serves the control protocol
itself, so it passes every check on who listens (the listener is the
target), and answers with whatever it likes.  The tool must end with a
message and a non-zero status: no crash on huge or negative counts, no
read of a file the target names but has not mapped (a symlink to a
root-only file), no hang in open() on a FIFO named like a deleted mapping.

The fake agent is a Python program run as uid 65534: its buffer headers
are in its own memory (ctypes), where the tool reads them with
process_vm_readv.  Every wait is on a line from it or on a command's exit,
the timeouts only a safety bound."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from tracefix import TIMEOUT, XPROBES, env, fixture

NOBODY = 65534
MAX_RECS = 1 << 28  # XP_TRACE_MAX_RECS: -b 4 GiB of 16-byte records
CLOCK = "clock start_tsc=1000 start_ns=5000 now_tsc=2000 now_ns=6000\n"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the tool runs as root "
                       "against a target of uid 65534"),
    pytest.mark.skipif(shutil.which("setpriv") is None,
                       reason="needs setpriv (util-linux) to run as uid 65534"),
]

# The fake agent.  argv: run directory, scenario (JSON).  The scenario:
#   "buffer": {"tid", "cap", "head", "records": [[tsc, kind, addr]...]}, a
#       header made in its own memory ({BUF} in replies: its address); an
#       addr "FUNC" is {BASE} + "func_off";
#   "map": a file it maps and deletes ({BASE}: where), then puts "plant" in
#       its place under the name the kernel now shows, "PATH (deleted)":
#       ["fifo"] or ["symlink", TARGET];
#   "replies": command -> {"text": ..., "status": 0} or {"raw": hex}, the
#       raw bytes sent as they are ("version" has a default);
#   "setup": Python run before it listens (may add to subst, start threads).
# Prints "ready PID" once it listens, serves until stdin closes.
FAKE_AGENT = r"""
import ctypes, json, mmap, os, select, socket, struct, sys
rundir, sc = sys.argv[1], json.loads(sys.argv[2])
subst = {}
if "map" in sc:
    path = sc["map"]
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    subst["{BASE}"] = hex(base)
    os.unlink(path)
    kind = sc["plant"][0]
    if kind == "fifo":
        os.mkfifo(path + " (deleted)")
    else:
        os.symlink(sc["plant"][1], path + " (deleted)")
if "buffer" in sc:
    b = sc["buffer"]
    recs = b.get("records", [])
    mem = ctypes.create_string_buffer(64 + 16 * len(recs))
    struct.pack_into("<IIiIQQQ", mem, 0, 0x58505452, 1, b["tid"], 0, b["cap"], b["head"], 0)
    for i, (tsc, kind, addr) in enumerate(recs):
        if addr == "FUNC":
            addr = int(subst["{BASE}"], 16) + sc["func_off"]
        struct.pack_into("<QQ", mem, 64 + 16 * i, tsc << 2 | kind, addr)
    subst["{BUF}"] = hex(ctypes.addressof(mem))
exec(sc.get("setup", ""))  # a scenario's own code: a ring it keeps writing, a file it maps
replies = {"version": {"text": "xprobes agent 0.0 (fake)\n"}}
replies.update(sc.get("replies", {}))

def frame(spec):
    if "raw" in spec:
        return bytes.fromhex(spec["raw"])
    text = spec["text"]
    for k, v in subst.items():
        text = text.replace(k, v)
    body = bytes([spec.get("status", 0)]) + text.encode()
    return struct.pack("<I", len(body)) + body

d = os.path.join(rundir, ".xprobes-%d" % os.geteuid())
os.mkdir(d, 0o700)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(os.path.join(d, "%d.sock" % os.getpid()))
srv.listen(8)
print("ready", os.getpid(), flush=True)
if "exec" in sc:
    # The process the tool attached to execs sc["exec"]["path"] when the
    # command sc["exec"]["on"] first arrives; a child it forked answers
    # on the socket the parent listened on, once the exec is done (the
    # parent's end of a close-on-exec pipe closes).
    # "on": null execs at once, and the new image keeps the listening
    # socket (made inheritable), as if the program had listened itself.
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    os.set_inheritable(done_w, False)
    if os.fork() != 0:
        os.close(go_w)
        os.close(done_r)
        if sc["exec"]["on"] is None:
            srv.set_inheritable(True)
        else:
            os.read(go_r, 1)
        os.execv(sc["exec"]["path"], [sc["exec"]["path"]])
    os.close(go_r)
    os.close(done_w)
    if sc["exec"]["on"] is None:
        os.read(done_r, 1)

go_w = go_w if "exec" in sc else None

def serve(c):
    global go_w
    buf = b""
    while True:
        while len(buf) < 4 or len(buf) < 4 + struct.unpack("<I", buf[:4])[0]:
            r, _, _ = select.select([c, sys.stdin], [], [])
            if sys.stdin in r and not os.read(0, 4096):
                sys.exit(0)
            if c in r:
                chunk = c.recv(65536)
                if not chunk:
                    return
                buf += chunk
        n = struct.unpack("<I", buf[:4])[0]
        cmd, buf = buf[4:4 + n].decode(), buf[4 + n:]
        spec = replies.get(cmd) or next(
            (v for k, v in replies.items() if k.endswith(" *") and cmd.startswith(k[:-1])),
            {"text": "unknown command\n", "status": 1})
        if "exec" in sc and cmd == sc["exec"]["on"] and go_w is not None:
            os.write(go_w, b"x")
            os.close(go_w)
            go_w = None
            os.read(done_r, 1)   # end of file: the parent's exec closed it
        try:
            c.sendall(frame(spec))
        except OSError:
            return

while True:
    r, _, _ = select.select([srv, sys.stdin], [], [])
    if sys.stdin in r and not os.read(0, 4096):
        break
    if srv in r:
        c = srv.accept()[0]
        serve(c)
        c.close()
"""


class FakeAgent:
    def __init__(self, scenario):
        self.rundir = tempfile.mkdtemp(prefix="xp-hostile-")
        os.chmod(self.rundir, 0o1777)
        argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                sys.executable, "-c", FAKE_AGENT, self.rundir, json.dumps(scenario)]
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, cwd="/", env=env())
        line = self.p.stdout.readline().strip()
        assert line.startswith("ready "), line
        self.pid = int(line.split()[1])
        assert self.pid == self.p.pid

    def close(self):
        self.p.stdin.close()
        try:
            self.p.wait(timeout=TIMEOUT)
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait()
            shutil.rmtree(self.rundir, ignore_errors=True)


@pytest.fixture
def fake():
    agents = []

    def start(scenario):
        agents.append(FakeAgent(scenario))
        return agents[-1]

    yield start
    for a in agents:
        a.close()


def xp(pid, *args, drop_caps=False):
    """Root's tool on pid.  drop_caps: without CAP_SYS_ADMIN and
    CAP_CHECKPOINT_RESTORE, which /proc/PID/map_files needs: the tool
    must then open the path, and check what it opened."""
    pre = ["setpriv", "--bounding-set=-sys_admin,-checkpoint_restore", "--"] if drop_caps else []
    return subprocess.run(pre + [XPROBES, str(pid), *args], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env())


def refused(r, *words):
    """Ended by the tool itself (no signal), non-zero, saying each of words."""
    assert r.returncode > 0, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("xprobes: "), r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)


def text(t):
    return {"text": t}


def frame_hex(n, body=b""):
    return (n.to_bytes(4, "little") + body).hex()


# ---- item 2: sizes and counts ---------------------------------------------

@pytest.mark.parametrize("cmd", ["cat", "stat"])
def test_huge_buffer_is_refused(fake, cmd):
    """cap = head = 2^62 in a header the target really holds: malloc(head *
    16) wrapped to malloc(0) and the decoder wrote past it (SIGSEGV)."""
    big = 1 << 62
    a = fake({"buffer": {"tid": 7, "cap": big, "head": big},
              "replies": {"trace buffers": text(CLOCK + f"buf tid=7 addr={{BUF}} cap={big}\n")}})
    r = xp(a.pid, "trace", cmd)
    refused(r, f"{big} records", f"more than the {MAX_RECS}")


@pytest.mark.parametrize("line", [
    "buf tid=7 addr={BUF} cap=-1",             # strtoull took it as 2^64 - 1
    "buf tid=-7 addr={BUF} cap=4",
    "buf tid=7 addr={BUF} cap=4x",
    "buf tid=7 addr=0x{BUF} cap=4",            # 0x0x...
    "buf tid=7 addr={BUF} cap=99999999999999999999999",
    "buf tid=99999999999 addr={BUF} cap=4",
    "buf tid=7 cap=4",
])
def test_bad_buffer_line_is_refused(fake, line):
    """A line that says `buf` and is not one: named, not skipped."""
    a = fake({"buffer": {"tid": 7, "cap": 4, "head": 0},
              "replies": {"trace buffers": text(CLOCK + line + "\n")}})
    refused(xp(a.pid, "trace", "cat"), "trace buffers: ", "bad line")


def test_bad_clock_is_refused(fake):
    a = fake({"buffer": {"tid": 7, "cap": 4, "head": 0},
              "replies": {"trace buffers": text("clock start_tsc=1 start_ns=-2 now_tsc=3 "
                                                "now_ns=4\nbuf tid=7 addr={BUF} cap=4\n")}})
    refused(xp(a.pid, "trace", "cat"), "trace buffers: ", "bad line")


def test_one_buffer_listed_twice_is_refused(fake):
    """Two threads cannot share a buffer: a target listing one 100000
    times would have the tool copy it 100000 times."""
    a = fake({"buffer": {"tid": 7, "cap": 4, "head": 0},
              "replies": {"trace buffers": text(CLOCK + "buf tid=7 addr={BUF} cap=4\n" * 2)}})
    refused(xp(a.pid, "trace", "cat"), "trace buffers: ", "overlap")


@pytest.mark.parametrize("field", ["sites=-1", f"sites={1 << 61}"])
def test_bad_site_count_is_refused(fake, field):
    """`trace start -F` reads each object's site table: nsites * 8 bytes."""
    a = fake({"replies": {
        "trace select none": text("selected: 0 functions (none: all)\n"),
        "trace objects": text(f"object base=0x1000 {field} table=0x2000 path=/bin/true\n")}})
    refused(xp(a.pid, "trace", "start", "-F", "main"), "trace objects: ")


# ---- replies ------------------------------------------------------------------

@pytest.mark.parametrize("raw,words", [
    (frame_hex(0xffffffff), ["more than 4194304 bytes"]),
    (frame_hex(0), ["empty reply"]),
    (frame_hex(2, b"\x07x"), ["status 7"]),
])
def test_garbled_reply_is_refused(fake, raw, words):
    a = fake({"replies": {"trace buffers": {"raw": raw}}})
    refused(xp(a.pid, "trace", "cat"), f"process {a.pid} ", *words)


# ---- the start's -A/-R/-a, kept by the agent ---------------------------------

@pytest.mark.parametrize("reply,words", [
    pytest.param("options: -A {BIG}\n", ["not one line"], id="huge"),  # 1 MiB: past 4 KiB
    pytest.param("options: -A str@arg1/s\noptions: -a\n", ["not one line"], id="two-lines"),
    pytest.param("options: -A str@arg1/s", ["not one line"], id="no-newline"),
    pytest.param("options: -F main\n", ["unexpected '-F'"], id="other-option"),
    pytest.param("options: -A\n", ["-A without its value"], id="no-value"),
    pytest.param("options: -A str@arg99\n", ["-A 'str@arg99': "], id="bad-spec"),
    pytest.param("options: -A str@arg1%ZZ\n", ["not one the tool writes"], id="bad-escape"),
    pytest.param("options: -A str@%00arg1\n", ["not one the tool writes"], id="nul"),
    pytest.param("options: -A  str@arg1\n", ["not one the tool writes"], id="empty-word"),
    pytest.param("options: -A str@arg1\x1b[2J\n", ["not one the tool writes"], id="escape-sequence"),
    pytest.param("options: -A " + "-A f@arg1 " * 300 + "\n", ["-A '-A': "], id="value-is-option"),
])
@pytest.mark.parametrize("cmd", [["trace", "cat"], ["trace", "snapshot", "-o", "/nonexistent/d"]],
                         ids=["cat", "snapshot-dir"])
def test_bad_argument_options_are_refused(fake, reply, words, cmd):
    """A later session's `trace cat` asks the agent for the start's -A/-R/-a
    (`trace args show`): huge or malformed, they are refused, said, and
    parsed as nothing else than options."""
    a = fake({"setup": "subst['{BIG}'] = 'x' * (1 << 20)",
              "replies": {"trace args show": text(reply), "trace objects": text("")}})
    r = xp(a.pid, *cmd)
    refused(r, "the agent's argument options are refused", *words)
    assert "\x1b" not in r.stderr


def test_an_agent_without_argument_options_still_reads(fake):
    """An older agent (no `trace args show`): the trace without values, as
    before; here the next question (trace buffers) is the one refused."""
    a = fake({"replies": {"trace buffers": {"raw": frame_hex(0)}}})
    refused(xp(a.pid, "trace", "cat"), "empty reply")


def test_an_agent_older_than_arguments_is_named_as_such(fake):
    """`trace start -A` against an agent that has no `trace args`: said
    plainly, not as the agent's own 'unknown subcommand'."""
    a = fake({"replies": {"trace select none": text("ok\n"),
                          "trace args none": {"text": "trace: unknown subcommand 'args'\n",
                                              "status": 1}}})
    r = xp(a.pid, "trace", "start", "-A", "f@arg1")
    assert r.returncode == 1, r
    assert "is older than arguments and return values (-A/-R/-a)" in r.stderr, r.stderr
    assert "unknown subcommand" not in r.stderr, r.stderr


# ---- item 3: the files the target names ---------------------------------------

@pytest.fixture
def secret(tmp_path):
    """A root-only ELF file, the stand-in for /etc/shadow: its symbols in
    the tool's output would show that the tool read it."""
    d = tmp_path / "secret"
    d.mkdir(mode=0o700)
    path = str(d / "libsecret.so")
    shutil.copy(fixture("libtracee-gcc.so"), path)
    os.chmod(path, 0o600)
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    value = next(int(w[0], 16) for w in map(str.split, out.splitlines())
                 if w[-1] == "tracee_sum_squares")
    return path, value


@pytest.fixture
def victim_lib():
    """A directory of uid 65534's, where it maps a file and plants names."""
    d = tempfile.mkdtemp(prefix="xp-hostile-lib-")
    os.chown(d, NOBODY, NOBODY)
    lib = os.path.join(d, "lib.so")
    with open(lib, "wb") as f:
        f.write(b"not an ELF file\n" * 256)
    os.chown(lib, NOBODY, NOBODY)
    yield lib
    shutil.rmtree(d)


def planted(fake, lib, plant, func_off):
    """A target that maps lib, deletes it and plants plant at the name its
    maps now show, lists that name as a traced object, and has one call of
    the function at func_off in it recorded."""
    recs = [[1100, 0, "FUNC"], [1200, 1, "FUNC"]]
    return fake({
        "map": lib, "plant": plant, "func_off": func_off,
        "buffer": {"tid": 7, "cap": 4, "head": 2, "records": recs},
        "replies": {
            "trace buffers": text(CLOCK + "buf tid=7 addr={BUF} cap=4\n"),
            "trace objects": text(f"object base={{BASE}} sites=1 table=0x0 "
                                  f"path={lib} (deleted)\n")}})


@pytest.mark.parametrize("plant", ["fifo", "symlink"])
@pytest.mark.parametrize("drop_caps", [False, True], ids=["map_files", "path"])
def test_planted_object_is_not_opened(fake, victim_lib, secret, plant, drop_caps):
    """A FIFO or a symlink (to a root-only file) where the target's deleted
    mapping was.  With /proc/PID/map_files (root with CAP_SYS_ADMIN), the
    tool reads what the kernel mapped and never looks at the name; through
    the path, it refuses what it opened, which is neither a regular file
    nor the mapped one.  Either way it neither hangs (a FIFO blocked
    open() for ever) nor shows a symbol of the secret file."""
    path, value = secret
    a = planted(fake, victim_lib, ["fifo"] if plant == "fifo" else ["symlink", path], value)
    for cmd in ("cat", "stat"):
        r = xp(a.pid, "trace", cmd, drop_caps=drop_caps)
        assert "tracee_sum_squares" not in r.stdout + r.stderr, r.stdout
        if drop_caps:
            refused(r, f"{victim_lib} (deleted)", "not the file process",
                    "a FIFO" if plant == "fifo" else "a symbolic link")
        else:
            assert r.returncode == 0, (r.stdout, r.stderr)
            assert r.returncode == 0 and "0x" in r.stdout, r.stdout


# ---- an exec under the tool: the session is bound to one image -------------

@pytest.fixture(scope="module")
def setuid_victim():
    """tests/trace/setuid_victim.c built without PIE, set-user-ID root, in a
    directory uid 65534 may run it from."""
    d = tempfile.mkdtemp(prefix="xp-victim-")
    os.chmod(d, 0o755)
    exe = os.path.join(d, "victim")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "setuid_victim.c")
    subprocess.run(["cc", "-O1", "-no-pie", "-fno-pie", "-o", exe, src], check=True)
    os.chmod(exe, 0o4755)
    nm = subprocess.run(["nm", exe], capture_output=True, text=True, check=True).stdout
    addr = next(int(l.split()[0], 16) for l in nm.splitlines() if l.endswith(" victim_ring"))
    yield exe, addr
    shutil.rmtree(d, ignore_errors=True)


def ring_tail(pid, addr):
    """The tail field (offset 40) of the victim's ring header, read as root."""
    with open(f"/proc/{pid}/mem", "rb") as m:
        m.seek(addr + 40)
        return int.from_bytes(m.read(8), "little")


def victim_scenario(exe, addr, on):
    return {"exec": {"path": exe, "on": on},
            "replies": {"trace objects": text(""),
                        "trace start *": text("tracing 0 sites\n"),
                        "trace select *": text(""),
                        "trace stop": text("stopped\n"),
                        "trace buffers": text(CLOCK + f"buf tid=7 addr={addr:#x} cap=64\n"
                                              "tracing on=1\n")}}


def record(pid, out):
    return subprocess.run([XPROBES, str(pid), "trace", "record", "-o", str(out), "-d", "2"],
                          capture_output=True, text=True, timeout=TIMEOUT, env=env())


def test_no_write_after_the_target_execs_a_setuid_program(fake, setuid_victim, tmp_path):
    """The target lists as its ring an address where a set-user-ID-root
    program it is about to exec holds what looks like a ring, and execs it
    when `trace buffers` arrives, before the reply.  The tool wrote the
    ring's new tail (a value the target chose) into the root program with
    process_vm_writev, which takes a pid.  Bound to the image it checked,
    it reads nothing from the new one, writes nothing, and says why."""
    exe, addr = setuid_victim
    a = fake(victim_scenario(exe, addr, "trace buffers"))
    r = record(a.pid, tmp_path / "rec")
    line = a.p.stdout.readline().split()
    try:
        assert line[:1] == ["victim"] and line[3] == "0", line  # it runs as root now
        assert ring_tail(a.pid, addr) == 0, (r.stdout, r.stderr)
        assert r.returncode != 0, (r.stdout, r.stderr)
        assert "exec'd" in r.stderr, r.stderr
    finally:
        os.kill(a.pid, signal.SIGKILL)


def test_a_setuid_image_holding_the_agents_socket_is_refused(fake, setuid_victim, tmp_path):
    """The exec came first: the set-user-ID program now holds the socket the
    uid 65534 process listened on, and a child of that process answers on
    it.  The peer check passes (the socket's listener is the pid), so the
    tool compares the listener's credentials with the image's own and
    refuses before asking anything; its memory is never touched."""
    exe, addr = setuid_victim
    a = fake(victim_scenario(exe, addr, None))
    line = a.p.stdout.readline().split()
    try:
        assert line[:1] == ["victim"] and line[3] == "0", line
        r = record(a.pid, tmp_path / "rec")
        refused(r, "set-user-ID")
        assert ring_tail(a.pid, addr) == 0, (r.stdout, r.stderr)
    finally:
        os.kill(a.pid, signal.SIGKILL)
