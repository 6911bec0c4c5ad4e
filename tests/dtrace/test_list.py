# SPDX-License-Identifier: MIT
"""`xprobes list`: files and processes, read without running them."""
import os
import re
import subprocess


from .dx import DATA, INCLUDE, ok, parse_listing, run, xprobes


def test_usage_errors():
    for args in ([], ["-q"], ["-p"], ["-p", "1", "extra"]):
        r = xprobes("list", *args)
        assert r.returncode == 2, args
        assert "usage: xprobes list" in r.stderr
    r = xprobes("list", "-p", "abc")
    assert r.returncode == 2
    assert "not a process id" in r.stderr
    r = xprobes("list", "--help")
    assert r.returncode == 0 and "usage: xprobes list" in r.stdout


def test_missing_and_non_elf_files(tmp_path):
    r = xprobes("list", tmp_path / "missing")
    assert r.returncode == 1
    assert f"xprobes list: {tmp_path}/missing: No such file or directory" in r.stderr
    (tmp_path / "text").write_text("just text, long enough to not be an ELF header\n")
    r = xprobes("list", tmp_path / "text")
    assert r.returncode == 1
    assert f"xprobes list: {tmp_path}/text: not an ELF file" in r.stderr


def test_relocatable_objects_are_refused(built):
    r = xprobes("list", built.gates)
    assert r.returncode == 1
    assert "relocatable object" in r.stderr


def test_good_and_bad_files_together(built, tmp_path):
    (tmp_path / "bad").write_bytes(b"\x7fELF" + b"\0" * 10)
    r = xprobes("list", built.lib, tmp_path / "bad")
    assert r.returncode == 1
    assert parse_listing(r.stdout) == {built.lib: ["xpdtest:lib__call(int)"]}
    assert f"{tmp_path}/bad: corrupt ELF file" in r.stderr


def test_object_without_probes():
    true = "/bin/true"
    out = ok(xprobes("list", true))
    assert out == f"{true}:\n  (no probes)\n"


def test_no_such_process():
    r = xprobes("list", "-p", "99999999")
    assert r.returncode == 1
    assert "no such process: 99999999" in r.stderr


def test_truncated_file_is_an_error(built, tmp_path):
    data = open(built.prog, "rb").read()
    for size in (0, 3, 10, 63, 64, 1000, len(data) // 2, len(data) - 1):
        path = tmp_path / f"cut{size}"
        path.write_bytes(data[:size])
        r = xprobes("list", path)
        assert r.returncode == 1, (size, r.stdout)
        assert re.search(rf"xprobes list: {path}: (truncated|corrupt|not an ELF)", r.stderr), \
            (size, r.stderr)


def test_sdt_only_probes(tmp_path):
    exe = str(tmp_path / "sdtonly")
    run(["gcc", "-O2", "-Wall", "-Werror", "-I", INCLUDE, "-o", exe,
         os.path.join(DATA, "sdtonly.c")])
    objs = parse_listing(ok(xprobes("list", exe)))
    assert sorted(objs[exe]) == ["legacy:bare (SDT only)", "legacy:ping (SDT only)",
                                 "plain_tick(long)"]
    out = ok(xprobes("list", "-v", exe))
    assert re.search(r"legacy:ping \(SDT only\)\n    sdt 0x[0-9a-f]+: int32 (in|at) \S+, "
                     r"uint64 (in|at) \S+\n", out), out
    assert re.search(r"legacy:bare \(SDT only\)\n    sdt 0x[0-9a-f]+: no arguments\n", out), out
    # The site's own SDT note (provider "xprobes") belongs to the site.
    assert re.search(r"plain_tick\(long\)\n    sdt 0x[0-9a-f]+: int64 (in|at) \S+; "
                     r"semaphore 0x[0-9a-f]+\n", out), out
    assert "xprobes:plain_tick" not in out


def test_sdt_operand_forms(tmp_path):
    """Stack slots, immediates and registers, as readelf shows them."""
    exe = str(tmp_path / "prog")
    src = tmp_path / "forms.c"
    src.write_text("#include <sys/sdt.h>\n"
                   "int main(int argc, char **argv) {\n"
                   "  volatile long slot = argc; long v = slot;\n"
                   "  DTRACE_PROBE3(forms, three, v, -1, (unsigned char)argc);\n"
                   "  (void)argv; return 0; }\n")
    run(["gcc", "-O0", "-o", exe, str(src)])
    notes = subprocess.run(["readelf", "-n", exe], capture_output=True, text=True).stdout
    args = re.search(r"Name: three\n.*\n\s+Arguments: (.*)", notes).group(1).split()
    out = ok(xprobes("list", "-v", exe))
    line = re.search(r"forms:three \(SDT only\)\n    sdt 0x[0-9a-f]+: (.*)\n", out).group(1)
    want = []
    for a in args:
        size, op = a.split("@")
        t = ("int" if size.startswith("-") else "uint") + str(abs(int(size)) * 8)
        if op.startswith("%"):
            want.append(f"{t} in {op[1:]}")
        elif op.startswith("$"):
            want.append(f"{t} = {op[1:]}")
        else:
            want.append(f"{t} at {op}")
    assert line == ", ".join(want)
    assert "int32 = -1" in line  # the -1 constant, as an immediate


def test_deleted_binary_is_read_through_map_files(built, progs, tmp_path):
    import shutil
    copy = str(tmp_path / "prog-copy")
    shutil.copy(built.prog, copy)
    p = progs(copy)
    os.unlink(copy)
    objs = parse_listing(ok(xprobes("list", "-p", p.pid)))
    assert f"{copy} (deleted)" in objs
    assert "xpdtest:noargs()" in objs[f"{copy} (deleted)"]


def test_fifo_is_refused_without_blocking(tmp_path):
    """Opening a FIFO nobody writes to must not wait for a writer."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # The timeout is only a bound: without O_NONBLOCK this never returns.
    r = xprobes("list", fifo, timeout=20)
    assert r.returncode == 1
    assert f"xprobes list: {fifo}: is a FIFO (named pipe), not an executable or library" \
        in r.stderr, r.stderr
    assert r.stdout == ""


def test_directory_and_devices_are_refused(tmp_path):
    r = xprobes("list", tmp_path)
    assert r.returncode == 1
    assert f"xprobes list: {tmp_path}: is a directory, not an executable or library" \
        in r.stderr, r.stderr
    assert "not an ELF file" not in r.stderr
    r = xprobes("list", "/dev/null")
    assert r.returncode == 1
    assert "xprobes list: /dev/null: is a character device" in r.stderr, r.stderr


def test_socket_is_refused(tmp_path):
    import socket
    path = str(tmp_path / "sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(path)
        r = xprobes("list", path)
    finally:
        s.close()
    assert r.returncode == 1
    assert f"xprobes list: {path}: is a socket" in r.stderr, r.stderr


def test_non_regular_file_does_not_stop_the_others(built, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = xprobes("list", fifo, built.lib, timeout=20)
    assert r.returncode == 1
    assert parse_listing(r.stdout) == {built.lib: ["xpdtest:lib__call(int)"]}
    assert "is a FIFO" in r.stderr
