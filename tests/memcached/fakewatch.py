# SPDX-License-Identifier: MIT
"""A hostile memcached: speaks just enough of the text protocol for the
tools' watch-stream fallback (`stats` and `watch`), then sends what a
compromised or broken memcached could.  Run as a process of its own, so
that the tools see a pid without memcached's probe sites:

    python3 fakewatch.py SCENARIO     (prints its port, then serves)

Scenarios (what follows "OK" on a watch connection):
  escapes  item lines whose key, cmd and status carry escape sequences,
           quotes and backslashes, raw and URI-encoded; then quiet
  drip     one event, then a line that never ends: a byte every 20 ms
           (its `stats` replies drip the same way)
  endless  one event, then a line that never ends, as fast as it goes
"""
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time

ESC = b"\x1b"

# What each line carries, for the tests: the stream's fields, hostile.
ESCAPE_LINES = [
    # A cmd that would retitle the terminal and clear the screen.
    b"ts=1.5 gid=1 type=item_store key=t1 status=stored cmd=" + ESC + b"]0;X\x07" +
    b" ttl=0 clsid=1 cfd=7 size=1",
    b"ts=1.6 gid=2 type=item_store key=t2 status=stored cmd=" + ESC + b"[2J ttl=0 "
    b"clsid=1 cfd=8 size=1",
    # A cmd that would add a field to a JSON object written raw.
    b'ts=1.7 gid=3 type=item_store key=t3 status=stored cmd=a","x":" ttl=0 clsid=1 '
    b"cfd=9 size=1",
    # Keys: raw escapes, encoded escapes, quotes, backslashes, C1 controls.
    b"ts=2.0 gid=4 type=item_store key=" + ESC + b"[31mred status=stored cmd=set "
    b"ttl=0 clsid=1 cfd=10 size=1",
    b"ts=2.1 gid=5 type=item_store key=%1B%5D0%3Bt%07%22%5C status=stored cmd=set "
    b"ttl=0 clsid=1 cfd=11 size=1",
    b'ts=2.2 gid=6 type=item_store key=q"\\\xc2\x9b1m status=stored cmd=set ttl=0 '
    b"clsid=1 cfd=12 size=1",
    # A status and a size nobody writes, a negative descriptor.
    b"ts=2.3 gid=7 type=item_get key=g1 status=" + ESC + b"[2J clsid=1 cfd=-3 size=-9",
    b"ts=2.4 gid=8 type=item_store key=t4 status=stored cmd=set ttl=0 clsid=1 cfd=13 "
    b"size=99999999999999999999999",
    b"ts=99999999999999999999.999999999 gid=9 type=item_store key=t5 status=stored "
    b"cmd=set ttl=0 clsid=1 cfd=14 size=1",
]
# The events those lines are, as (conn, cmd, key bytes); the last three
# lines are no memcached's (a negative descriptor and size, a size and a
# time past any bound) and are dropped, said on stderr.
ESCAPE_EVENTS = [(7, ESC + b"]0;X\x07", b"t1"), (8, ESC + b"[2J", b"t2"),
                 (9, b'a","x":"', b"t3"), (10, b"set", ESC + b"[31mred"),
                 (11, b"set", ESC + b']0;t\x07"\\'), (12, b"set", b'q"\\\xc2\x9b1m')]
ESCAPE_MALFORMED = 3

FIRST = (b"ts=1.1 gid=1 type=item_store key=first status=stored cmd=set ttl=0 "
         b"clsid=1 cfd=5 size=3")


def drip(conn, data=b"ts=3.0 gid=9 type=item_get key=" + b"d" * 100000):
    for i in range(len(data)):
        conn.sendall(data[i:i + 1])
        time.sleep(0.02)


def serve(conn, scenario):
    f = conn.makefile("rb")
    line = f.readline()
    if line.startswith(b"stats"):
        reply = b"STAT pid 1\r\nSTAT log_worker_dropped 0\r\nSTAT log_watcher_skipped 0\r\n"
        if scenario == "drip":
            drip(conn, reply + b"STAT x " + b"y" * 100000)
        conn.sendall(reply + b"END\r\n")
        return
    if not line.startswith(b"watch"):
        conn.sendall(b"ERROR\r\n")
        return
    conn.sendall(b"OK\r\n")
    if scenario == "escapes":
        conn.sendall(b"\r\n".join(ESCAPE_LINES) + b"\r\n")
        while conn.recv(4096):  # quiet until the tool goes
            pass
    elif scenario == "drip":
        conn.sendall(FIRST + b"\r\n")
        drip(conn)
    elif scenario == "endless":
        conn.sendall(FIRST + b"\r\nts=3.0 gid=2 type=item_get key=")
        chunk = b"e" * 65536
        while True:
            conn.sendall(chunk)


def handle(conn, scenario):
    try:
        serve(conn, scenario)
    except OSError:  # the tool went away: what it should do
        pass
    finally:
        conn.close()


class Fake:
    """A running fake: its pid (a process without memcached's probe
    sites) and its port, for -p and --port."""

    def __init__(self, scenario):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), scenario],
                                     stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.pid = self.proc.pid
        self.port = int(self.proc.stdout.readline())


@contextlib.contextmanager
def fake(scenario):
    f = Fake(scenario)
    try:
        yield f
    finally:
        f.proc.kill()
        f.proc.wait()
        f.proc.stdout.close()


def main():
    scenario = sys.argv[1]
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    print(s.getsockname()[1], flush=True)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=handle, args=(conn, scenario), daemon=True).start()


if __name__ == "__main__":
    main()
