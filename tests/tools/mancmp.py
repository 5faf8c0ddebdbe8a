#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mancmp.py [OPTIONS] WANT GOT - compare two manifests (manifest.py).

Lines are matched by path; every token must be equal, except where an
option says what a reader cannot carry:

  --root-mtime-any    ignore the mtime of the root "." (libarchive's disk
                      writer never restores the extraction root's times)
  --symlink-mtime-any ignore the mtimes of symlinks (Python's tarfile does
                      not set them)
  --mtime-slack=NS    mtimes may differ by up to NS nanoseconds (Python's
                      tarfile carries times as floats: about 0.5 us at
                      today's dates)
  --symlink-links-any ignore hard-link groups of symlinks (Python's tarfile
                      makes a hard link with os.link, which follows the
                      symlink; a dangling one it extracts as a copy)
  --xattr-escapes-kept  GOT's xattr names may keep GNU tar's escapes %25
                      and %3D for '%' and '=' (libarchive 3.6 takes a
                      SCHILY.xattr.* key as it stands)

Prints the differing lines ("- WANT" / "+ GOT", at most 10 pairs) and
exits 1 when the manifests differ.
"""

import re
import sys


def parse(path):
    rows = {}
    order = []
    with open(path, "rb") as f:
        for raw in f:
            line = raw.decode("ascii").rstrip("\n")
            p, _, rest = line.partition(" ")
            rows[p] = rest.split(" ")
            order.append(p)
    return rows, order


def mtime_of(tokens):
    for i, t in enumerate(tokens):
        if t.startswith("mtime="):
            return i, int(t[6:])
    return None, None


def xattrs_sorted(tokens, unescape):
    """The tokens with the xattr ones (x:NAME=HEX) in one order whatever
    the names' escapes; with @unescape, GNU tar's %25 and %3D in NAME
    undone first."""
    def un(t):
        name, _, val = t[2:].rpartition("=")
        name = re.sub("%(25|3D)", lambda m: "%" if m.group(1) == "25"
                      else "=", name)
        return "x:%s=%s" % (name, val)
    i = next((k for k, t in enumerate(tokens) if t.startswith("x:")), None)
    if i is None:
        return tokens
    xs = sorted(un(t) if unescape else t for t in tokens
                if t.startswith("x:"))
    rest = [t for t in tokens if not t.startswith("x:")]
    return rest[:i] + xs + rest[i:]


def same(path, a, b, o):
    if o["xattr_escapes_kept"]:
        a = xattrs_sorted(a, False)
        b = xattrs_sorted(b, True)
    if o["symlink_links_any"] and a[0] == "l":
        a = [t for t in a if not t.startswith("link=")]
        b = [t for t in b if not t.startswith("link=")]
    if len(a) != len(b):
        return False
    ia, ma = mtime_of(a)
    ib, mb = mtime_of(b)
    if ia != ib:
        return False
    if ia is not None:
        loose = (o["root_mtime_any"] and path == ".") or \
            (o["symlink_mtime_any"] and a[0] == "l")
        if not loose and abs(ma - mb) > o["mtime_slack"]:
            return False
        a = a[:ia] + a[ia + 1:]
        b = b[:ib] + b[ib + 1:]
    return a == b


def main(argv):
    o = dict(root_mtime_any=False, symlink_mtime_any=False, mtime_slack=0,
             symlink_links_any=False, xattr_escapes_kept=False)
    files = []
    for arg in argv[1:]:
        if arg == "--root-mtime-any":
            o["root_mtime_any"] = True
        elif arg == "--symlink-mtime-any":
            o["symlink_mtime_any"] = True
        elif arg == "--symlink-links-any":
            o["symlink_links_any"] = True
        elif arg == "--xattr-escapes-kept":
            o["xattr_escapes_kept"] = True
        elif arg.startswith("--mtime-slack="):
            o["mtime_slack"] = int(arg.split("=", 1)[1])
        elif arg.startswith("-"):
            print("mancmp.py: unknown option %s" % arg, file=sys.stderr)
            return 2
        else:
            files.append(arg)
    if len(files) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    want, worder = parse(files[0])
    got, gorder = parse(files[1])
    bad = []
    for p in sorted(set(worder) | set(gorder)):
        a, b = want.get(p), got.get(p)
        if a is not None and b is not None and same(p, a, b, o):
            continue
        bad.append((p, a, b))
    for p, a, b in bad[:10]:
        if a is not None:
            print(("- %s %s" % (p, " ".join(a)))[:300])
        if b is not None:
            print(("+ %s %s" % (p, " ".join(b)))[:300])
    if len(bad) > 10:
        print("... %d more differing paths" % (len(bad) - 10))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
