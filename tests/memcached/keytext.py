# SPDX-License-Identifier: MIT
"""The key text rule of mctop(1) and mcsnoop(1) (tools/common/keytext.c),
written again from its documentation, as the tests' oracle: valid UTF-8
other than controls and the space is itself; every other byte is \\xHH; a
backslash is \\\\."""
import re
import unicodedata

import mcserver


def from_bytes(key):
    """The text the tools must show for KEY (bytes), and whether it is
    escaped (not the key's bytes)."""
    out, i = [], 0
    while i < len(key):
        ch = None
        for n in (1, 2, 3, 4):
            try:
                ch = key[i:i + n].decode("utf-8")  # strict: no overlongs, surrogates
                break
            except UnicodeDecodeError:
                continue
        if ch is not None and ch == "\\":
            out.append("\\\\")
        elif ch is not None and not (ord(ch) <= 0x20 or 0x7f <= ord(ch) <= 0x9f):
            out.append(ch)
            i += len(ch.encode("utf-8"))
            continue
        else:
            out.append("\\x%02x" % key[i])
        i += 1
    text = "".join(out)
    return text, text.encode("utf-8") != key


def to_bytes(text, escaped=True):
    """KEY's bytes from its text (the escaping reversed)."""
    if not escaped:
        return text.encode("utf-8")
    return re.sub(rb"\\(\\|x([0-9a-f]{2}))",
                  lambda m: bytes([int(m.group(2), 16)]) if m.group(2) else b"\\",
                  text.encode("utf-8"))


# Keys to send (bytes, gets after their one set: distinct calls, so the
# order is known): UTF-8 (a wide CJK one, a combining accent) and not (a
# byte that is no UTF-8, a control, a backslash).
KEYS = [("shop:76:feature|é".encode(), 6), ("商品:热门".encode(), 5),
        ("cafe\u0301".encode(), 4), (b"bad\xff", 3), (b"ctl\x01x", 2), (b"back\\slash", 1)]


def send_keys(mc):
    """Each key of KEYS set once and got its count of times, over the text
    protocol (mcload cannot send arbitrary keys)."""
    s = mc.client()
    for key, gets in KEYS:
        s.sendall(b"set %s 0 0 1\r\nv\r\n" % key)
        mcserver.recv_until(s, b"STORED\r\n")
        for _ in range(gets):
            s.sendall(b"get %s\r\n" % key)
            mcserver.recv_until(s, b"END\r\n")
    s.close()


def cols(s):
    """Terminal columns of s: wide characters two, combining ones none."""
    return sum(0 if unicodedata.combining(c) else
               2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)
