"""The interactive shell on a real terminal: line editing (libedit), tab
completion of commands, module names and site names, and history."""
import os
import pty
import signal

from .xp import TIMEOUT, XPROBES, Screen, base_env, fixture


def start_shell(procs, t, home):
    master, slave = pty.openpty()
    xp = procs.popen([XPROBES, str(t.pid)], stdin=slave, stdout=slave, stderr=slave,
                     env=base_env(HOME=str(home), TERM="dumb"), cwd=str(home),
                     start_new_session=True)
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
