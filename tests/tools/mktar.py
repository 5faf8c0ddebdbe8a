#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mktar.py OUT < SPEC: a small tarball for tests, entries in the order given.

SPEC has one entry per line ('#' lines and blank lines are skipped):

    f[:MODE] PATH [CONTENT]   regular file holding CONTENT and a newline
                              (no CONTENT: empty)
    d[:MODE] PATH             directory
    l PATH TARGET             symlink
    h PATH TARGET             hard link to TARGET, an earlier entry
    p[:MODE] PATH             fifo
    x PATH NAME=VALUE         a file holding an xattr (pax SCHILY.xattr)

PATH is written exactly as given ("./x", "/x", "../x" included): this tool
makes the hostile tarballs too.  MODE is octal (default 0644, dirs 0755);
every entry has mtime 1000000000 (--mtime=N), owner 0:0.  OUT ending in
.gz is gzip-compressed, .zst zstd-compressed (the zstd command), else
plain; --cut=N drops the last N bytes of the result (a truncated file);
--no-end leaves out the end-of-archive blocks (the tar stops right after
its last entry, as a copy cut at an entry's boundary does).
"""
import gzip
import io
import subprocess
import sys
import tarfile


def entry(line, mtime):
    kind, _, rest = line.partition(" ")
    kind, _, mode = kind.partition(":")
    path, _, arg = rest.partition(" ")
    ti = tarfile.TarInfo(path)
    ti.mtime = mtime
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    data = None
    if kind == "f":
        data = (arg + "\n").encode() if arg else b""
        ti.type = tarfile.REGTYPE
    elif kind == "x":
        name, _, value = arg.partition("=")
        ti.pax_headers = {"SCHILY.xattr." + name: value}
        data = b""
    elif kind == "d":
        ti.type = tarfile.DIRTYPE
    elif kind == "l":
        ti.type = tarfile.SYMTYPE
        ti.linkname = arg
    elif kind == "h":
        ti.type = tarfile.LNKTYPE
        ti.linkname = arg
    elif kind == "p":
        ti.type = tarfile.FIFOTYPE
    else:
        sys.exit("mktar: unknown entry type in: " + line)
    ti.mode = int(mode, 8) if mode else (0o755 if kind == "d" else 0o644)
    if data is not None:
        ti.size = len(data)
    return ti, (io.BytesIO(data) if data is not None else None)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].partition("=")[::2] for a in sys.argv[1:]
                if a.startswith("--"))
    if len(args) != 1:
        sys.exit(__doc__)
    out = args[0]
    mtime = int(opts.get("mtime", "1000000000"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for line in sys.stdin.read().splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            ti, data = entry(line, mtime)
            t.addfile(ti, data)
        entries_end = t.offset
    raw = buf.getvalue()
    if "no-end" in opts:
        raw = raw[:entries_end]
    if out.endswith(".gz"):
        raw = gzip.compress(raw, mtime=0)
    elif out.endswith(".zst"):
        raw = subprocess.run(["zstd", "-q", "-c", "-19"], input=raw,
                             stdout=subprocess.PIPE, check=True).stdout
    cut = int(opts.get("cut", "0"))
    if cut:
        raw = raw[:-cut]
    with open(out, "wb") as f:
        f.write(raw)


if __name__ == "__main__":
    main()
