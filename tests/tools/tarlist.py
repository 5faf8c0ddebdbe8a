#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tarlist.py [--owner] ARCHIVE - one line per member, in archive order:

  PATH TYPE MODE [UID:GID] mtime=M [size=N] [-> TARGET] [link=FIRST]
       [rdev=MAJ:MIN] [user=U] [group=G] [x:NAME=HEX ...] [pax=KEY,...]

PATH is the member name as stored (a directory keeps its trailing '/'),
escaped as manifest.py does; TYPE is f d l h (hard link) c b p; M is the
mtime exactly as stored (the pax record when there is one: "1.25", else
the header's whole seconds); user/group appear only when not empty; pax
lists the other pax record keys (not path, linkpath, mtime, xattrs).
.zst archives are read through the zstd command."""

import os
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from manifest import escape  # noqa: E402

TYPES = {tarfile.REGTYPE: "f", tarfile.AREGTYPE: "f", tarfile.DIRTYPE: "d",
         tarfile.SYMTYPE: "l", tarfile.LNKTYPE: "h", tarfile.CHRTYPE: "c",
         tarfile.BLKTYPE: "b", tarfile.FIFOTYPE: "p"}
SHOWN = ("path", "linkpath", "mtime")


def enc(s):
    return escape(s.encode("utf-8", "surrogateescape"))


def line(m, owner):
    name = m.name + ("/" if m.isdir() and m.name != "." else "")
    if m.name == ".":
        name = "./"
    tok = [enc(name), TYPES.get(m.type, "?"), "%04o" % m.mode]
    if owner:
        tok.append("%d:%d" % (m.uid, m.gid))
    tok.append("mtime=%s" % m.pax_headers.get("mtime", int(m.mtime)))
    if m.isreg():
        tok.append("size=%d" % m.size)
    if m.issym():
        tok += ["->", enc(m.linkname)]
    if m.islnk():
        tok.append("link=%s" % enc(m.linkname))
    if m.ischr() or m.isblk():
        tok.append("rdev=%d:%d" % (m.devmajor, m.devminor))
    if m.uname:
        tok.append("user=%s" % enc(m.uname))
    if m.gname:
        tok.append("group=%s" % enc(m.gname))
    other = []
    for k in sorted(m.pax_headers):
        v = m.pax_headers[k]
        if k.startswith("SCHILY.xattr."):
            tok.append("x:%s=%s" % (enc(k[13:]),
                                    v.encode("utf-8", "surrogateescape")
                                    .hex()))
        elif k not in SHOWN:
            other.append(k)
    if other:
        tok.append("pax=" + ",".join(other))
    return " ".join(tok)


def main(argv):
    owner = "--owner" in argv
    args = [a for a in argv[1:] if a != "--owner"]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    path = args[0]
    kw = dict(encoding="utf-8", errors="surrogateescape")
    if path.endswith(".zst"):
        p = subprocess.Popen(["zstd", "-qdc", path], stdout=subprocess.PIPE)
        t = tarfile.open(fileobj=p.stdout, mode="r|", **kw)
    elif path == "-":
        t = tarfile.open(fileobj=sys.stdin.buffer, mode="r|*", **kw)
    else:
        t = tarfile.open(path, mode="r:*", **kw)
    with t:
        for m in t:
            print(line(m, owner))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
