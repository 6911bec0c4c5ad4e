# SPDX-License-Identifier: MIT
"""The provider-file parser: what it accepts, and FILE:LINE:COL errors
(with nothing written) for what it does not."""
import os
import re
import subprocess

import pytest

from .dx import DTRACE, INCLUDE, STRICT, dtrace, ok, run

# (source, line, column, message pattern)
BAD = [
    ("provider p {\n  probe a(int x)\n};\n", 3, 1, "expected ';' after the probe declaration"),
    ("provider p {\n  probe a(int x);\n", 1, 1, "unterminated provider 'p'"),
    ("provider {\n};\n", 1, 10, "expected a provider name, found '{'"),
    ("provider p { probe a(int, ...); };\n", 1, 27, "variable arguments"),
    ("provider p { probe a(long char c); };\n", 1, 27, "invalid combination of type specifiers at 'char'"),
    ("provider p { probe a(unsigned signed x); };\n", 1, 31, "invalid combination"),
    ("provider p { probe a(short long x); };\n", 1, 28, "invalid combination"),
    ("provider p { probe a(foo_t int x); };\n", 1, 28, "invalid combination"),
    ("provider p { probe a(int a, int a); };\n", 1, 29, "duplicate parameter name 'a'"),
    ("provider p {\n probe a();\n probe a(int);\n};\n", 3, 8, r"probe 'a' already declared at \S+:2:8"),
    ("provider p { probe a(" + ", ".join(["int"] * 13) + "); };\n", 1, 82, "more than 12 arguments"),
    ("/* never closed\nprovider p { probe a(); };\n", 1, 1, "unterminated comment"),
    ("provider p { probe a(void x); };\n", 1, 22, "parameter 'x' has type void"),
    ("provider p { probe a(int, void); };\n", 1, 27, "'void' must be the only parameter"),
    ("provider p { probe a(int (*fn)(int)); };\n", 1, 26, "function pointer parameters are not supported"),
    ("provider p { probe a(struct { int x; } *s); };\n", 1, 29, "a struct, union or enum tag"),
    ("provider p { probe a(int x) @ };\n", 1, 29, "unexpected character '@'"),
    ("provider p { probe (int x); };\n", 1, 20, "expected a probe name"),
    ("provider p { probe a int x; };\n", 1, 22, "expected '\\(' after the probe name"),
    ("provider p { probe a(int x;\n};\n", 1, 27, "expected ',' or '\\)' after a parameter"),
    ("provider p { probe a(const); };\n", 1, 27, "expected a parameter type"),
    ("provider p { probe a(restrict int x); };\n", 1, 22, "'restrict' applies to pointers only"),
    ("provider p { int a; };\n", 1, 14, "expected 'probe' or '}'"),
    ("provider p { probe a(int x) : (string s; };\n", 1, 40, "expected ',' or '\\)'"),
    ("provider p { probe a(char *s = \"x\"); };\n", 1, 30, "expected ',' or '\\)'"),
    ("provider p { probe a(int x\x01); };\n", 1, 27, "unexpected byte 0x01"),
    ("provider p { probe a(int, struct s v); };\n", 1, 27, "struct or union cannot be passed by value"),
    ("provider p { probe a(long double v); };\n", 1, 22, "long double is wider"),
]


@pytest.mark.parametrize("source,line,col,message", BAD,
                         ids=[f"case{i}" for i in range(len(BAD))])
@pytest.mark.parametrize("mode", ["-h", "-G"])
def test_syntax_error(tmp_path, source, line, col, message, mode):
    (tmp_path / "bad.d").write_text(source)
    r = dtrace(mode, "-s", "bad.d", cwd=tmp_path)
    assert r.returncode == 1, r.stdout
    first = r.stderr.splitlines()[0]
    m = re.match(r"bad\.d:(\d+):(\d+): (.*)", first)
    assert m, r.stderr
    assert (int(m.group(1)), int(m.group(2))) == (line, col), first
    assert re.search(message, m.group(3)), first
    # Nothing written, not even a temporary file.
    assert sorted(os.listdir(tmp_path)) == ["bad.d"]


def test_existing_output_survives_a_syntax_error(tmp_path):
    (tmp_path / "bad.d").write_text("provider p { probe a(int x) };\n")
    (tmp_path / "bad.h").write_text("previous\n")
    assert dtrace("-h", "-s", "bad.d", cwd=tmp_path).returncode == 1
    assert (tmp_path / "bad.h").read_text() == "previous\n"


def comments(header):
    """{MACRO: "( ... )"} from the /* MACRO ( types ) */ comments."""
    out = {}
    for m in re.finditer(r"^/\* ([A-Z0-9_]+) (\(.*\)) \*/$", header, re.M):
        out[m.group(1)] = m.group(2)
    return out


def sites(header):
    """{raw name: type list} from the __XP_SITE expansions."""
    return dict(re.findall(r'"[a-z0-9_]+", "([a-z0-9_]+)", \\\n\s+\(([^)]*)\)', header))


ACCEPTED = r"""
// C++ comment before everything
#pragma D option quiet
typedef struct conn { int fd; } conn_t;   /* skipped, braces and all */
struct other { char name[16]; };
translator info_t < conn_t *c > { fd = c->fd; };
inline int SOMETHING = 3;

provider acc {
	probe plain(int a, long b);
	probe anon(int, unsigned, char *, const void *);
	probe quals(char const *a, const volatile int b, char * const * c);
	probe strs(string s, const string t);
	probe longs(long long a, unsigned long long int b, double c, signed char d, short int e);
	probe fixed(int8_t a, uint16_t b, int32_t c, uint64_t d, uintptr_t e, size_t f, ssize_t g);
	probe tagged(struct conn *c, union u *v, enum e w, conn_t *t);
	probe arr(char name[16], int v[]);
	probe view(int a, void *p) : (string s, int x);
	probe none(void);
	probe empty();
}
provider other_prov { probe x__y__z(uint8_t); };
provider acc { probe reopened(_Bool b); };
#pragma D attributes Evolving/Evolving/Common provider acc provider
"""


def test_accepted_syntax(tmp_path):
    (tmp_path / "acc.d").write_text(ACCEPTED)
    r = dtrace("-h", "-s", "acc.d", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    header = (tmp_path / "acc.h").read_text()
    assert comments(header) == {
        "ACC_PLAIN": "( int a, long b )",
        "ACC_ANON": "( int, unsigned, char*, const void* )",
        "ACC_QUALS": "( const char* a, const volatile int b, char* const* c )",
        "ACC_STRS": "( const char* s, const char* t )",
        "ACC_LONGS": "( long long a, unsigned long long int b, double c, signed char d, short int e )",
        "ACC_FIXED": "( int8_t a, uint16_t b, int32_t c, uint64_t d, uintptr_t e, size_t f, ssize_t g )",
        "ACC_TAGGED": "( struct conn* c, union u* v, enum e w, conn_t* t )",
        "ACC_ARR": "( char* name, int* v )",
        "ACC_VIEW": "( int a, void* p )",
        "ACC_NONE": "( )",
        "ACC_EMPTY": "( )",
        "OTHER_PROV_X_Y_Z": "( uint8_t )",
        "ACC_REOPENED": "( _Bool b )",
    }
    assert sites(header)["view"] == "int, void*"
    assert sites(header)["none"] == ""
    assert sites(header)["x__y__z"] == "uint8_t"
    assert "#define OTHER_PROV_X_Y_Z(arg1)" in header
    assert "#define ACC_NONE()" in header
    assert "#define ACC_FIXED(arg1, arg2, arg3, arg4, arg5, arg6, arg7)" in header


def test_directives_without_C_are_warned_about(tmp_path):
    (tmp_path / "w.d").write_text("#define X int\nprovider w { probe a(int); };\n")
    r = dtrace("-h", "-s", "w.d", cwd=tmp_path)
    assert r.returncode == 0
    assert "w.d:1:1: warning: ignoring '#define'" in r.stderr


# Top-level text that is not a provider: systemtap's stub accepts all of
# these (exit 0), so they are skipped with a warning at the place, and the
# providers around them still count.  (These four were errors once.)
# (source, line, column, warning pattern, macros expected in the header)
WARNED = [
    ("junk provider p { probe a(); };\n", 1, 1,
     r"skipping 'junk' \(not a provider declaration\)", ["P_A"]),
    ("provider p { probe a(int x); } extra\n", 1, 32,
     r"skipping 'extra' \(not a provider declaration\)", ["P_A"]),
    ("typedef struct { int x; } t\nprovider p { probe a(); };\n", 1, 1,
     r"skipping unterminated 'typedef' \.\.\. \(no ';' or '}' before 'provider'\)", ["P_A"]),
    ("typedef int t\n", 1, 1,
     r"skipping unterminated 'typedef' \.\.\. \(no ';' or '}' before the end of the file\)", []),
    ("provder t { probe x(int a); };\nprovider p { probe a(); };\n", 1, 1,
     r"skipping 'provder' \.\.\. \(not a provider declaration\)", ["P_A"]),
    ("provider p { probe a(); };\n\n  static int f(void) { return 1; }\n", 3, 3,
     r"skipping 'static' \.\.\. \(not a provider declaration\)", ["P_A"]),
    ("extern int g(int);\nprovider p { probe a(); };\n", 1, 1,
     r"skipping 'extern' \.\.\. \(not a provider declaration\)", ["P_A"]),
    ("provider p { probe a(); }; }\n", 1, 28,
     r"skipping '}' \(not a provider declaration\)", ["P_A"]),
]


@pytest.mark.parametrize("source,line,col,message,macros", WARNED,
                         ids=[f"case{i}" for i in range(len(WARNED))])
def test_top_level_junk_is_skipped_with_a_warning(tmp_path, source, line, col, message,
                                                   macros):
    (tmp_path / "bad.d").write_text(source)
    r = dtrace("-h", "-s", "bad.d", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    first = r.stderr.splitlines()[0]
    m = re.match(r"bad\.d:(\d+):(\d+): warning: (.*)", first)
    assert m, r.stderr
    assert (int(m.group(1)), int(m.group(2))) == (line, col), first
    assert re.search(message, m.group(3)), first
    header = (tmp_path / "bad.h").read_text()
    assert sorted(re.findall(r"^#define ([A-Z_]+)_ENABLED\(", header, re.M)) == macros
    ok(dtrace("-G", "-s", "bad.d", cwd=tmp_path))


def test_error_inside_provider_after_skipped_code(tmp_path):
    """Leniency stops at the provider: its mistakes are still errors."""
    (tmp_path / "bad.d").write_text(
        "static int f(void) { return 1; }\nBEGIN { x = 1; }\n"
        "provider p {\n  probe a(int x) @\n};\n")
    r = dtrace("-h", "-s", "bad.d", cwd=tmp_path)
    assert r.returncode == 1
    assert "bad.d:4:18: unexpected character '@'" in r.stderr, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["bad.d"]


def is_elf_object(path):
    with open(path, "rb") as f:
        head = f.read(18)
    return head[:4] == b"\x7fELF" and head[16] == 1  # ET_REL


def test_cpython_configure_probe(tmp_path):
    """CPython's configure, verbatim: a D script with no provider at all
    must give an (empty) object, and a header with no probes."""
    r = subprocess.run("echo 'BEGIN{}' > conftest.d && "
                       "$DTRACE -G -s conftest.d -o conftest.o",
                       shell=True, cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "DTRACE": DTRACE})
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # a D clause is not worth a warning
    assert is_elf_object(tmp_path / "conftest.o")
    # Valid and linkable: into a program, under the strict flags.
    (tmp_path / "main.c").write_text('#include "conftest.h"\n'
                                     "int main(void) { return 0; }\n")
    ok(dtrace("-h", "-s", "conftest.d", cwd=tmp_path))
    header = (tmp_path / "conftest.h").read_text()
    assert not re.search(r"^#define \w+_ENABLED\(", header, re.M)
    run(["gcc", *STRICT, "-I", INCLUDE, "-o", "main", "main.c", "conftest.o"], cwd=tmp_path)
    assert subprocess.run([str(tmp_path / "main")]).returncode == 0


D_SCRIPT = r"""
#pragma D option quiet
BEGIN { start = timestamp; }
syscall::read:entry, syscall::write:entry
/pid == $target && arg2 > 0/
{
	@bytes[execname, probefunc] = sum(arg2);
	self->ts = `hz;
}
tick-1s { printa("%s %@d\n", @bytes); }
pid$target::malloc:entry { @sizes = quantize(arg0); }
provider mixed { probe after__clauses(int n); };
END
{
	printf("done\n");
}
"""


def test_D_clauses_are_skipped_silently(tmp_path):
    (tmp_path / "mixed.d").write_text(D_SCRIPT)
    r = dtrace("-h", "-s", "mixed.d", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert comments((tmp_path / "mixed.h").read_text()) == {
        "MIXED_AFTER_CLAUSES": "( int n )"}


SYSTEM_HEADERS = ["sys/types.h", "stdio.h", "stdlib.h", "string.h", "pthread.h",
                  "signal.h", "unistd.h", "sys/socket.h", "netinet/in.h", "math.h"]


@pytest.mark.parametrize("cpp", ["cpp", "clang -E"])
def test_C_with_system_headers(tmp_path, cpp):
    """-C on a .d that includes C headers: their functions, structs,
    typedefs and __extension__ are skipped without a word."""
    if subprocess.run(["sh", "-c", f"command -v {cpp.split()[0]}"],
                      capture_output=True).returncode:
        pytest.skip(f"{cpp} is not installed")
    (tmp_path / "inc.d").write_text(
        "".join(f"#include <{h}>\n" for h in SYSTEM_HEADERS) +
        "provider t { probe x(pid_t p, size_t n); };\n")
    r = dtrace("-C", "-h", "-s", "inc.d", cwd=tmp_path, extra_env={"CPP": cpp})
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert comments((tmp_path / "inc.h").read_text()) == {"T_X": "( pid_t p, size_t n )"}
    ok(dtrace("-C", "-G", "-s", "inc.d", cwd=tmp_path, extra_env={"CPP": cpp}))
    assert is_elf_object(tmp_path / "inc.o")


def test_C_reviewer_case(tmp_path):
    """The reviewer's command, verbatim (the default cpp)."""
    (tmp_path / "inc.d").write_text(
        "#include <sys/types.h>\nprovider t { probe x(pid_t p, size_t n); };\n")
    r = dtrace("-C", "-h", "-s", "inc.d", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "#define T_X(arg1, arg2)" in (tmp_path / "inc.h").read_text()


def test_C_errors_inside_a_provider_after_system_headers(tmp_path):
    (tmp_path / "inc.d").write_text(
        "#include <stdio.h>\n#include <sys/types.h>\n"
        "provider t {\n  probe x(pid_t p)\n};\n")
    r = dtrace("-C", "-h", "-s", "inc.d", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith("inc.d:5:1: expected ';' after the probe declaration"), \
        r.stderr
    assert sorted(os.listdir(tmp_path)) == ["inc.d"]


def test_C_warns_only_for_the_users_own_file(tmp_path):
    """C code from an included header is skipped quietly; the same code in
    the .d file itself is warned about, at its place in that file."""
    code = "static int helper(int a) { return a + 1; }\n"
    (tmp_path / "helpers.h").write_text(code)
    (tmp_path / "own.d").write_text('#include "helpers.h"\n\n' + code +
                                   "provider t { probe x(int); };\n")
    r = dtrace("-C", "-h", "-s", "own.d", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        "own.d:3:1: warning: skipping 'static' ... (not a provider declaration)"]
    assert "#define T_X(arg1)" in (tmp_path / "own.h").read_text()


def test_provider_named_like_a_C_identifier_is_not_a_provider(tmp_path):
    """'provider' used as a name in C code does not start a provider."""
    (tmp_path / "decl.h").write_text("struct conf; extern struct conf *provider;\n"
                                     "int set(int provider);\n")
    (tmp_path / "n.d").write_text('#include "decl.h"\nprovider t { probe x(int); };\n')
    r = dtrace("-C", "-h", "-s", "n.d", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert comments((tmp_path / "n.h").read_text()) == {"T_X": "( int )"}
