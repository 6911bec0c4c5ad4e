# SPDX-License-Identifier: MIT
"""The interactive shell on a real terminal: line editing (libedit), tab
completion of commands, module names, site names and paths, history, and
Ctrl-C and Ctrl-D as in bash and gdb."""
import contextlib
import fcntl
import os
import pty
import shutil
import signal
import termios
import time

from .xp import TIMEOUT, XPROBES, Screen, base_env, fixture


def controlling_tty():
    """In the child, after setsid: the pty becomes its terminal, so Ctrl-C
    typed into it is SIGINT to the shell, as in a real terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def editing(master):
    """Wait until libedit has the terminal in its raw mode: the prompt is
    drawn before a key can reach it as a key (in cooked mode the kernel
    would take ^D as end of file and buffer the line)."""
    deadline = time.monotonic() + TIMEOUT
    while termios.tcgetattr(master)[3] & termios.ICANON:
        assert time.monotonic() < deadline, "the shell never started editing"
        time.sleep(0.01)


def start_shell(procs, t, home, term="dumb"):
    master, slave = pty.openpty()
    xp = procs.popen([XPROBES, str(t.pid)], stdin=slave, stdout=slave, stderr=slave,
                     env=base_env(HOME=str(home), TERM=term), cwd=str(home),
                     start_new_session=True, preexec_fn=controlling_tty)
    os.close(slave)
    screen = Screen(master)
    screen.wait_for("Connecting... done")
    screen.wait_for("xprobes> ")
    return xp, master, screen


def test_completion_editing_and_history(procs, tmp_path):
    t = procs.target("sitehost")
    count = fixture("mod_count.so")
    xp, master, screen = start_shell(procs, t, tmp_path)
    try:
        # A command name: "ver" + TAB completes to "version".
        os.write(master, b"ver\t\n")
        screen.wait_for("xprobes agent ")
        screen.wait_for("xprobes> ")
        os.write(master, f"load {count}\n".encode())
        screen.wait_for("loaded mod_count.so")
        screen.wait_for("xprobes> ")
        # A module name, asked of the agent: "disable mod_c" + TAB.
        os.write(master, b"disable mod_c\t\n")
        screen.wait_for("disabled mod_count.so")
        screen.wait_for("xprobes> ")
        # A site name: "sites host_t" + TAB completes to host_tick.
        os.write(master, b"sites host_t\t\n")
        screen.wait_for("host_tick(long)")
        screen.wait_for("xprobes> ")
        # The site after an object glob: "sites *:host_m" + TAB.
        os.write(master, b"sites *:host_m\t\n")
        screen.wait_for("host_msg(const char*, size_t)")
        screen.wait_for("xprobes> ")
        # Line editing: type a wrong word, erase it with backspace (^H).
        os.write(master, b"modulex\x08s\n")
        screen.wait_for("  mod_count.so (")  # listed, not enabled
        screen.wait_for("xprobes> ")
        os.write(master, b"quit\n")
        assert xp.wait(timeout=TIMEOUT) == 0
    finally:
        if xp.poll() is None:
            xp.send_signal(signal.SIGKILL)
        os.close(master)
    # libedit's history file writes spaces as \040.
    history = (tmp_path / ".xprobes_history").read_text().replace("\\040", " ")
    assert "disable mod_count.so" in history and "sites host_tick" in history
    assert "sites *:host_msg" in history


@contextlib.contextmanager
def shell(procs, t, home, term="dumb"):
    """start_shell(), and the shell killed and its pty closed however the
    test ends."""
    xp, master, screen = start_shell(procs, t, home, term)
    try:
        yield xp, master, screen
    finally:
        if xp.poll() is None:
            xp.send_signal(signal.SIGKILL)
        os.close(master)


def test_tab_on_a_directory_completes_with_a_slash_and_goes_on_into_it(procs, tmp_path):
    t = procs.target("sitehost")
    (tmp_path / "mods" / "inner").mkdir(parents=True)
    shutil.copy(fixture("mod_count.so"), tmp_path / "mods" / "inner" / "mod_count.so")
    with shell(procs, t, tmp_path) as (xp, master, screen):
        # Each Tab completes one directory and leaves the cursor after its
        # '/'; a space there would end the word and the load would fail.
        os.write(master, b"load mo\t")
        screen.wait_for("mods/")
        os.write(master, b"\t")
        screen.wait_for("inner/")
        os.write(master, b"\t")
        screen.wait_for("mod_count.so")
        os.write(master, b"\n")
        screen.wait_for("loaded mod_count.so: 1 attachment")
        screen.wait_for("xprobes> ")
        os.write(master, b"quit\n")
        assert xp.wait(timeout=TIMEOUT) == 0


def test_ctrl_c_clears_the_line_and_ctrl_d_ends_the_session(procs, tmp_path):
    t = procs.target("sitehost")
    with shell(procs, t, tmp_path, term="xterm") as (xp, master, screen):
        # A line typed, then Ctrl-C: the line is dropped, the shell stays.
        os.write(master, b"sites nosuch")
        screen.wait_for("nosuch")
        editing(master)
        os.write(master, b"\x03")
        screen.wait_for("xprobes> ")
        os.write(master, b"version\n")
        screen.wait_for("xprobes agent ")
        screen.wait_for("xprobes> ")
        assert xp.poll() is None
        # Twice more, on an empty line too: still there.
        editing(master)
        os.write(master, b"\x03")
        screen.wait_for("xprobes> ")
        editing(master)
        os.write(master, b"sites host_t\x03")
        screen.wait_for("xprobes> ")
        os.write(master, b"sites host_tick\n")
        screen.wait_for("host_tick(long)")
        screen.wait_for("xprobes> ")
        # Ctrl-D on an empty line ends it, with status 0.
        editing(master)
        os.write(master, b"\x04")
        assert xp.wait(timeout=TIMEOUT) == 0
    # Only the lines run are in the history: the ones Ctrl-C cleared are not.
    history = (tmp_path / ".xprobes_history").read_text().replace("\\040", " ")
    assert "version" in history and "sites host_tick" in history
    assert "nosuch" not in history and "sites host_t\n" not in history
