# SPDX-License-Identifier: MIT
"""libxprobes.so exports only its public interface, and reports site
records of another ABI instead of dropping them silently."""
import os
import subprocess

from .xp import BUILD, REPO, Target, base_env, fixture, ok


def test_only_dlopen_is_exported():
    out = subprocess.run(["nm", "-D", "--defined-only", os.path.join(BUILD, "libxprobes.so")],
                         capture_output=True, text=True, check=True).stdout
    names = sorted({line.split()[-1] for line in out.splitlines() if line.split()[1] != "A"})
    assert names == ["_Unwind_RaiseException@@GCC_3.0", "_Unwind_Resume_or_Rethrow@@GCC_3.3",
                     "__cxa_begin_catch@@CXXABI_1.3", "dlopen@@XPROBES_0.2", "dlopen@GLIBC_2.2.5",
                     "dlopen@GLIBC_2.34"], names


def test_program_with_the_agents_old_internal_names(procs, tmp_path):
    prog = tmp_path / "clash"
    subprocess.run(["gcc", "-std=gnu11", "-O2", "-rdynamic", "-I", os.path.join(REPO, "include"),
                    "-o", str(prog), os.path.join(REPO, "tests/integration/data/clash.c"),
                    "-L", BUILD, f"-Wl,-rpath,{BUILD}", "-Wl,--no-as-needed", "-lxprobes"],
                   check=True)
    p = procs.popen([str(prog)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    env=base_env(), cwd="/")
    t = Target(p, "clash")
    t.expect("ready ")
    # Every command path that used to go through tb_printf and agent_lock.
    assert ok(p.pid, "modules") == ""
    assert "clash_tick(long)" in ok(p.pid, "sites")
    assert ok(p.pid, "load", fixture("mod_count.so")).startswith("loaded mod_count.so: 1")
    t.ask("tick", "tick done")
    assert ok(p.pid, "command", "mod_count.so", "count").strip() == "count 1"
    assert ok(p.pid, "unload", "mod_count.so") == "unloaded mod_count.so\n"
    assert t.alive()


def test_site_records_of_another_abi_are_reported(procs):
    lib = fixture("libold_abi.so")
    t = procs.target("sitehost", env=base_env(LD_PRELOAD=lib))
    out = ok(t.pid, "sites")
    assert (f"{lib}: 1 site built for XProbes site ABI 4 (record size 0) ignored; "
            "this agent reads site ABI 5 (size 56)") in out, out
    assert "old_abi_site" not in out
    assert "host_tick(long)" in out


def test_module_of_another_abi_is_refused(procs):
    t = procs.target("sitehost")
    mod = fixture("mod_abi4.so")
    r = subprocess.run([os.path.join(BUILD, "xprobes"), str(t.pid), "load", mod],
                       capture_output=True, text=True, env=base_env(), cwd="/")
    assert r.returncode == 1
    assert (f"{mod} was built for XProbes module ABI 4; this agent speaks module ABI 5") in r.stderr, r.stderr
    assert ok(t.pid, "modules") == ""
