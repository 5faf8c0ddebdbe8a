#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""oci_apply.py LAYER.tar DIR - apply an OCI layer tarball to the tree DIR
as opencontainers/image-spec layer.md says, for tests.

Entries in order:
  .wh..wh..opq   removes every entry of its directory that this layer did
                 not create (wherever it sits among the entries);
  .wh.NAME       removes NAME (and all below it), which must not be an
                 entry of this layer;
  anything else  replaces what is at its path ("removing the file path,
                 recreating it"), except that a directory over a directory
                 only takes the new attributes.
Each entry gets its mode, numeric owner, xattrs (SCHILY.xattr.*, the
existing ones of a kept directory dropped first) and its mtime to the
nanosecond (from the pax record, not the float).  A hard link links to
the path it names.  Directory times are set at the end; directories the
layer changed without naming keep the times they had.

Gzip and zstd (through the zstd command) layers are read too.
"""

import decimal
import os
import shutil
import stat
import subprocess
import sys
import tarfile


def mtime_ns(m):
    v = m.pax_headers.get("mtime")
    if v is None:
        return int(m.mtime) * 10 ** 9
    return int(decimal.Decimal(v).scaleb(9).to_integral_value(
        rounding=decimal.ROUND_FLOOR))


def remove(path):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


class Applier:
    def __init__(self, root):
        self.root = root
        self.made = set()	# relative paths this layer wrote
        self.saved = {}		# dir -> (atime_ns, mtime_ns) before changes
        self.dir_times = {}	# dir -> mtime_ns named by the layer

    def path(self, rel):
        return os.path.join(self.root, rel) if rel else self.root

    def touching(self, rel_dir):
        p = self.path(rel_dir)
        if p not in self.saved:
            st = os.lstat(p)
            self.saved[p] = (st.st_atime_ns, st.st_mtime_ns)

    def whiteout(self, rel_dir, name):
        rel = os.path.join(rel_dir, name) if rel_dir else name
        if rel in self.made:
            raise SystemExit("whiteout of %r, an entry of the same layer" % rel)
        if os.path.lexists(self.path(rel)):
            self.touching(rel_dir)
            remove(self.path(rel))

    def opaque(self, rel_dir):
        d = self.path(rel_dir)
        for name in os.listdir(d):
            rel = os.path.join(rel_dir, name) if rel_dir else name
            if rel not in self.made:
                self.touching(rel_dir)
                remove(os.path.join(d, name))

    def set_xattrs(self, p, m, clear):
        want = {}
        for k, v in m.pax_headers.items():
            if k.startswith("SCHILY.xattr."):
                want[k[len("SCHILY.xattr."):]] = \
                    v.encode("utf-8", "surrogateescape")
        if clear:
            for x in os.listxattr(p, follow_symlinks=False):
                if x not in want:
                    os.removexattr(p, x, follow_symlinks=False)
        for k, v in sorted(want.items()):
            os.setxattr(p, k, v, follow_symlinks=False)

    def entry(self, tf, m, rel):
        p = self.path(rel)
        parent = os.path.dirname(rel)
        kept_dir = False
        if os.path.lexists(p):
            if m.isdir() and os.path.isdir(p) and not os.path.islink(p):
                kept_dir = True
            else:
                self.touching(parent)
                remove(p)
        elif rel:
            self.touching(parent)
        if m.isdir():
            if not kept_dir:
                os.mkdir(p, 0o700)
        elif m.isreg():
            with tf.extractfile(m) as src, open(p, "wb") as dst:
                shutil.copyfileobj(src, dst)
        elif m.issym():
            os.symlink(m.linkname, p)
        elif m.islnk():
            os.link(self.path(m.linkname.rstrip("/")), p)
        elif m.isfifo():
            os.mkfifo(p, 0o600)
        elif m.ischr() or m.isblk():
            kind = stat.S_IFCHR if m.ischr() else stat.S_IFBLK
            os.mknod(p, kind | 0o600, os.makedev(m.devmajor, m.devminor))
        else:
            raise SystemExit("%s: unknown entry type %r" % (rel, m.type))
        self.made.add(rel)
        if m.islnk():
            return		# a second name: the inode has its attributes
        os.lchown(p, m.uid, m.gid)
        if not m.issym():
            os.chmod(p, m.mode & 0o7777)
        self.set_xattrs(p, m, kept_dir)
        ns = mtime_ns(m)
        if m.isdir():
            self.dir_times[p] = ns
        else:
            os.utime(p, ns=(ns, ns), follow_symlinks=False)

    def apply(self, f):
        with tarfile.open(fileobj=f, mode="r|") as tf:
            for m in tf:
                rel = os.path.normpath(m.name).lstrip("/")
                if rel == ".":
                    rel = ""
                base = os.path.basename(rel)
                parent = os.path.dirname(rel)
                if base == ".wh..wh..opq":
                    self.opaque(parent)
                elif base.startswith(".wh."):
                    self.whiteout(parent, base[4:])
                else:
                    self.entry(tf, m, rel)
        for p in sorted(self.saved, reverse=True):
            if p not in self.dir_times and os.path.isdir(p):
                a, mt = self.saved[p]
                os.utime(p, ns=(a, mt))
        for p in sorted(self.dir_times, reverse=True):
            ns = self.dir_times[p]
            os.utime(p, ns=(ns, ns))


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], "rb") as f:
        magic = f.read(4)
    if magic[:4] == b"\x28\xb5\x2f\xfd":
        proc = subprocess.Popen(["zstd", "-dc", argv[1]],
                                stdout=subprocess.PIPE)
        Applier(argv[2]).apply(proc.stdout)
        return proc.wait()
    if magic[:2] == b"\x1f\x8b":
        import gzip
        with gzip.open(argv[1], "rb") as f:
            Applier(argv[2]).apply(f)
        return 0
    with open(argv[1], "rb") as f:
        Applier(argv[2]).apply(f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
