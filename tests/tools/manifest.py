#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""manifest.py [OPTIONS] DIR - one line per entry of the tree under DIR.

Lines are sorted bytewise by path; the root is ".".  Each line is a list of
space-separated tokens, none of which can contain a space or a newline:

  PATH TYPE MODE [UID:GID] [mtime=NS] [size=N sha256=HEX [data=MAP]]
       [-> TARGET] [rdev=MAJ:MIN] [x:NAME=HEX ...] [link=FIRST]

PATH, TARGET and xattr NAMEs use C-style escapes (\\\\, \\n, \\t, \\r and \\ooo
octal) for bytes below 0x21, above 0x7e and the backslash, so any name is one
token.  TYPE is one of f d l c b p s.  MODE is the 07777 bits in octal.
The xattrs that belong to union/overlay layers ({trusted,user}.{overlay,
union}.*) and security.selinux are left out.

link=FIRST marks non-directories that share (st_dev, st_ino) with another
entry of the tree: FIRST is the (escaped) first path of the group in sorted
order, so labels depend neither on inode numbers nor on the lines before
(a line index would shift every later label when one entry differs).  Groups of
one (st_nlink > 1 but the other names outside the tree, or hidden by an
overlay mount) get no label; st_nlink itself is printed with --nlink only.

An entry that a directory listing returned but whose lstat fails with
ENOENT is skipped: overlayfs lists whiteouts in some directories (those
that merge with nothing) but looking them up finds nothing.  Any other
error is printed as "PATH ! ERRNAME" and makes the exit status 1.

Paths may be longer than PATH_MAX: the walk works with directory fds.

Options:
  --no-dir-mtime  leave out the mtime of directories
  --no-mtime      leave out every mtime
  --no-xattrs     leave out extended attributes
  --no-owner      leave out UID:GID
  --nlink         add nlink=N (st_nlink) to non-directories: two trees
                  of one tarball must agree on link counts too
  --holes         add data=MAP (the data extents found by SEEK_DATA /
                  SEEK_HOLE, "a-b,c-d"; "none" when all hole) for regular
                  files: two trees on the same kind of filesystem should
                  then agree on where the holes are
"""

import errno
import hashlib
import os
import stat
import sys

PRIVATE_PREFIXES = (b"trusted.overlay.", b"user.overlay.",
                    b"trusted.union.", b"user.union.")
PRIVATE_NAMES = (b"security.selinux",)

_ESC = {0x5c: b"\\\\", 0x0a: b"\\n", 0x09: b"\\t", 0x0d: b"\\r"}


def escape(b):
    """C-style escape of bytes @b into a printable ASCII str."""
    out = bytearray()
    for c in b:
        if c in _ESC:
            out += _ESC[c]
        elif c < 0x21 or c > 0x7e:
            out += b"\\%03o" % c
        else:
            out.append(c)
    return out.decode("ascii")


def ftype(mode):
    if stat.S_ISREG(mode):
        return "f"
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISLNK(mode):
        return "l"
    if stat.S_ISCHR(mode):
        return "c"
    if stat.S_ISBLK(mode):
        return "b"
    if stat.S_ISFIFO(mode):
        return "p"
    if stat.S_ISSOCK(mode):
        return "s"
    return "?"


def procpath(dirfd, name):
    """A path that reaches @name in @dirfd without PATH_MAX trouble."""
    return b"/proc/self/fd/%d/%s" % (dirfd, name)


def xattrs_of(dirfd, name):
    """Sorted (name, value) list, private names left out.  @name b"" means
    @dirfd itself."""
    p = procpath(dirfd, name) if name else b"/proc/self/fd/%d" % dirfd
    follow = not name     # the fd magic link must be followed
    try:
        names = os.listxattr(p, follow_symlinks=follow)
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EPERM):
            return []
        raise
    out = []
    for n in names:
        nb = os.fsencode(n)
        if nb.startswith(PRIVATE_PREFIXES) or nb in PRIVATE_NAMES:
            continue
        try:
            v = os.getxattr(p, n, follow_symlinks=follow)
        except OSError as e:
            if e.errno == errno.ENODATA:
                continue
            raise
        out.append((nb, v))
    out.sort()
    return out


def file_digest(dirfd, name, want_map):
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NOCTTY,
                 dir_fd=dirfd)
    try:
        h = hashlib.sha256()
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            h.update(b)
        dmap = None
        if want_map:
            size = os.fstat(fd).st_size
            ext = []
            off = 0
            while off < size:
                try:
                    d = os.lseek(fd, off, os.SEEK_DATA)
                except OSError as e:
                    if e.errno == errno.ENXIO:
                        break
                    raise
                hole = os.lseek(fd, d, os.SEEK_HOLE)
                ext.append("%d-%d" % (d, hole))
                off = hole
            dmap = ",".join(ext) if ext else "none"
        return h.hexdigest(), dmap
    finally:
        os.close(fd)


class Walker:
    def __init__(self, opts):
        self.o = opts
        self.rows = []          # [path bytes, tokens list, (dev, ino) or None]
        self.failed = False

    def describe(self, dirfd, name, st, is_root):
        o = self.o
        t = ftype(st.st_mode)
        tok = [t, "%04o" % stat.S_IMODE(st.st_mode)]
        if not o["no_owner"]:
            tok.append("%d:%d" % (st.st_uid, st.st_gid))
        if not o["no_mtime"] and not (t == "d" and o["no_dir_mtime"]):
            tok.append("mtime=%d" % st.st_mtime_ns)
        if o.get("nlink") and t != "d":
            tok.append("nlink=%d" % st.st_nlink)
        if t == "f":
            digest, dmap = file_digest(dirfd, name, o["holes"]) \
                if not is_root else (None, None)
            tok.append("size=%d" % st.st_size)
            tok.append("sha256=%s" % digest)
            if dmap is not None:
                tok.append("data=%s" % dmap)
        elif t == "l":
            tok.append("->")
            tok.append(escape(os.readlink(name, dir_fd=dirfd)))
        elif t in ("c", "b"):
            tok.append("rdev=%d:%d" % (os.major(st.st_rdev),
                                       os.minor(st.st_rdev)))
        if not o["no_xattrs"]:
            for n, v in xattrs_of(dirfd, b"" if is_root else name):
                tok.append("x:%s=%s" % (escape(n), v.hex()))
        return tok

    def walk(self, dirfd, relpath):
        try:
            names = sorted(os.fsencode(e.name) for e in os.scandir(dirfd))
        except OSError as e:
            self.err(relpath, e)
            return
        for name in names:
            path = relpath + b"/" + name if relpath != b"." else name
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except OSError as e:
                if e.errno == errno.ENOENT:
                    continue
                self.err(path, e)
                continue
            try:
                tok = self.describe(dirfd, name, st, False)
            except OSError as e:
                self.err(path, e)
                continue
            key = None
            if not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1:
                key = (st.st_dev, st.st_ino)
            self.rows.append([path, tok, key])
            if stat.S_ISDIR(st.st_mode):
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY |
                                 os.O_NOFOLLOW, dir_fd=dirfd)
                except OSError as e:
                    self.err(path, e)
                    continue
                try:
                    self.walk(fd, path)
                finally:
                    os.close(fd)

    def err(self, path, e):
        self.failed = True
        self.rows.append([path, ["!", errno.errorcode.get(e.errno,
                                                          str(e.errno))],
                          None])

    def run(self, top):
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
        try:
            st = os.fstat(fd)
            tok = self.describe(fd, b".", st, True)
            self.rows.append([b".", tok, None])
            self.walk(fd, b".")
        finally:
            os.close(fd)
        # Paths compare bytewise as whole strings ("a/b" vs "a-b"), which
        # is not the walk order: sort, then label the hard-link groups.
        self.rows.sort(key=lambda r: r[0])
        count = {}
        for r in self.rows:
            if r[2] is not None:
                count[r[2]] = count.get(r[2], 0) + 1
        first = {}
        for i, r in enumerate(self.rows):
            k = r[2]
            if k is not None and count[k] > 1:
                first.setdefault(k, escape(r[0]))
                r[1].append("link=%s" % first[k])
        return ["%s %s" % (escape(r[0]), " ".join(r[1])) for r in self.rows]


def main(argv):
    opts = dict(no_dir_mtime=False, no_mtime=False, no_xattrs=False,
                no_owner=False, holes=False, nlink=False)
    args = []
    for a in argv[1:]:
        if a.startswith("--") and a[2:].replace("-", "_") in opts:
            opts[a[2:].replace("-", "_")] = True
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a.startswith("-") and len(a) > 1:
            print("manifest.py: unknown option %s" % a, file=sys.stderr)
            return 2
        else:
            args.append(a)
    if len(args) != 1:
        print("usage: manifest.py [--no-dir-mtime] [--no-mtime] "
              "[--no-xattrs] [--no-owner] [--holes] [--nlink] DIR",
              file=sys.stderr)
        return 2
    w = Walker(opts)
    try:
        lines = w.run(os.fsencode(args[0]))
    except OSError as e:
        print("manifest.py: %s: %s" % (args[0], e.strerror), file=sys.stderr)
        return 1
    out = sys.stdout.buffer
    for ln in lines:
        out.write(ln.encode("ascii") + b"\n")
    out.flush()
    return 1 if w.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
