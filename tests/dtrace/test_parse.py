"""The provider-file parser: what it accepts, and FILE:LINE:COL errors
(with nothing written) for what it does not."""
import os
import re

import pytest

from .dx import dtrace

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
    ("junk provider p { };\n", 1, 1, "expected a provider declaration, found 'junk'"),
    ("provider p { probe a(int x) @ };\n", 1, 29, "unexpected character '@'"),
    ("provider p { probe a(int x); } extra\n", 1, 32, "expected a provider declaration"),
    ("provider p { probe (int x); };\n", 1, 20, "expected a probe name"),
    ("provider p { probe a int x; };\n", 1, 22, "expected '\\(' after the probe name"),
    ("provider p { probe a(int x;\n};\n", 1, 27, "expected ',' or '\\)' after a parameter"),
    ("provider p { probe a(const); };\n", 1, 27, "expected a parameter type"),
    ("provider p { probe a(restrict int x); };\n", 1, 22, "'restrict' applies to pointers only"),
    ("provider p { int a; };\n", 1, 14, "expected 'probe' or '}'"),
    ("provider p { probe a(int x) : (string s; };\n", 1, 40, "expected ',' or '\\)'"),
    ("typedef struct { int x; } t\nprovider p { probe a(); };\n", 2, 1, "expected ';' to end the declaration"),
    ("typedef int t\n", 1, 1, "unterminated declaration"),
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
