#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mkrandtar.py --seed N --out DIR: random tarball layers, for the
differential test of merge -o (tests/kernel/tarstream.sh).  Needs root
(owners, trusted.* xattrs).

Writes, the same for the same seed:

  DIR/tree        a random tree: directories (some 01777, 02755), regular
                  files (random bytes, empty ones, sparse ones with holes
                  and data between them), symlinks (relative, absolute,
                  dangling), hard links, fifos, user.* and trusted.*
                  xattrs, random modes (setuid too), owners and times in
                  nanoseconds.
  DIR/full.tar    GNU tar (--format=posix --sparse --xattrs) of the tree,
                  every path named once, in a random walk order where
                  some directories come after their children: what GNU
                  tar's extraction and merge -o must agree on.
  DIR/layer.tar[.gz|.zst]
                  the same tree with some directories left unnamed (their
                  entries' parents are missing), then, appended by Python's
                  tarfile, entries only the layer rules read: the same path
                  again (a file, a directory with a new mode, a file over a
                  directory, a directory or symlink over a file), whiteouts
                  (.wh.NAME of a name that is there or not), opaque markers,
                  .wh..wh.* metadata (a directory with a file in it), a
                  hard link to a whiteout, directories named after their
                  children, missing parents several levels deep, names
                  with "./" and "//", pax xattrs (one that /etc/xattr.conf
                  says a copy skips).

  DIR/upK.tar[.gz|.zst]
                  with --stack N, N - 1 layers more (K = 1..N-1), each over
                  the names of the ones beneath: some of their directories
                  again or left for their entries to imply, some of their
                  entries replaced by another type, new names, then the
                  entries of the layer rules over those names (whiteouts,
                  opaque markers, a file where a directory was...).

With --sorted, every tarball's entries come in the view's walk order
(each directory before its entries, names sorted bytewise), as docker,
buildkit and GNU tar --sort=name write layers, before the layer rules'
entries appended at the end, whose files are then empty: every byte of
data lies in the walk's order.

Prints the layer tarballs' paths, one a line, bottom first.
"""
import gzip
import io
import os
import random
import stat
import subprocess
import sys
import tarfile

NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-_."
ODD_NAMES = ["with space", "caf\u00e9", "pct%25", "eq=sign", "..dots",
             "-dash", "tab\tname"]
OWNERS = [(0, 0), (1000, 1000), (65534, 65534), (12345, 54321), (0, 100)]
FILE_MODES = [0o644, 0o600, 0o755, 0o444, 0o4755, 0o2711, 0o640, 0o000]
DIR_MODES = [0o755, 0o700, 0o1777, 0o2755, 0o711, 0o555]


class Gen:
    sorted = False              # --sorted: order() is the view's walk

    def __init__(self, seed, top):
        self.r = random.Random(seed)
        self.top = top
        self.dirs = [""]
        self.files = []         # regular files (hard-link targets)
        self.paths = []         # every path below the root, made order

    def name(self, parent):
        r = self.r
        for _ in range(100):
            if r.random() < 0.08:
                n = r.choice(ODD_NAMES)
            else:
                n = "".join(r.choice(NAME_CHARS)
                            for _ in range(r.randint(1, 12)))
            if n in (".", "..") or n.startswith(".wh."):
                continue
            p = os.path.join(parent, n) if parent else n
            if not os.path.lexists(os.path.join(self.top, p)):
                return p
        return None

    def through_dirs(self, p):
        """Is each directory above @p one, or not there yet?"""
        d = os.path.dirname(p)
        while d:
            a = self.abs(d)
            if os.path.lexists(a) and (os.path.islink(a) or
                                       not os.path.isdir(a)):
                return False
            d = os.path.dirname(d)
        return True

    def abs(self, p):
        return os.path.join(self.top, p)

    def meta(self, p, is_dir=False, is_link=False):
        r = self.r
        a = self.abs(p)
        uid, gid = r.choice(OWNERS)
        os.lchown(a, uid, gid)
        if not is_link:
            os.chmod(a, r.choice(DIR_MODES if is_dir else FILE_MODES))
        # (user.* only on files and directories, as the kernel allows)
        if (is_dir or os.path.isfile(a)) and not is_link and \
                r.random() < 0.25:
            os.setxattr(a, "user.k%d" % r.randint(0, 9),
                        bytes(r.randrange(256) for _ in
                              range(r.randint(0, 20))))
        if r.random() < 0.15:
            os.setxattr(a, "trusted.t%d" % r.randint(0, 3), b"v",
                        follow_symlinks=False)

    def data(self, p):
        r = self.r
        with open(self.abs(p), "wb") as f:
            if r.random() < 0.2:
                # sparse: pieces of data between holes, maybe a hole at
                # the end
                size = r.choice([65536, 1 << 20, 3 << 20])
                for _ in range(r.randint(0, 4)):
                    f.seek(r.randrange(size))
                    f.write(os.urandom(r.choice([1, 100, 4096, 9000])))
                f.truncate(size)
            else:
                n = r.choice([0, 0, 1, 10, 511, 512, 4096, 5000, 70000])
                f.write(bytes(r.randrange(256) for _ in range(min(n, 600)))
                        + os.urandom(max(0, n - 600)))

    def one(self):
        r = self.r
        parent = r.choice(self.dirs)
        p = self.name(parent)
        if p is None:
            return
        a = self.abs(p)
        k = r.random()
        if k < 0.2:
            os.mkdir(a)
            self.dirs.append(p)
        elif k < 0.6:
            self.data(p)
            self.files.append(p)
        elif k < 0.72:
            t = r.choice(["../x", "/etc/passwd", "dangling",
                          os.path.basename(r.choice(self.files or ["x"])),
                          "a/b/../c"])
            os.symlink(t, a)
            self.meta(p, is_link=True)
            self.paths.append(p)
            return
        elif k < 0.85 and self.files:
            os.link(self.abs(r.choice(self.files)), a)
            self.paths.append(p)
            return
        elif k < 0.92:
            os.mkfifo(a)
        else:
            self.data(p)
            self.files.append(p)
        self.meta(p, is_dir=os.path.isdir(a))
        self.paths.append(p)

    def times(self):
        """Times last, deepest first: making entries changed them."""
        r = self.r
        for p in sorted(self.paths + [""], key=lambda s: -s.count("/")):
            ns = r.randrange(0, 1_700_000_000) * 10**9 + \
                r.choice([0, r.randrange(10**9)])
            os.utime(self.abs(p) if p else self.top, ns=(ns, ns),
                     follow_symlinks=False)

    def order(self, drop_dirs):
        """Every path, a random walk: some directories after their
        children; with @drop_dirs, some directories not at all.  With
        self.sorted, the view's walk instead: each directory before its
        entries, names sorted bytewise (as docker, buildkit and GNU tar
        --sort=name write a layer)."""
        r = self.r
        kids = {}
        for p in self.paths:
            kids.setdefault(os.path.dirname(p), []).append(p)
        out = []

        def walk(d):
            late = r.random() < 0.3 and not self.sorted
            named = not (drop_dirs and d and r.random() < 0.25)
            if named and not late:
                out.append(d)
            ch = kids.get(d, [])
            r.shuffle(ch)
            if self.sorted:
                ch.sort(key=lambda c: os.fsencode(os.path.basename(c)))
            for c in ch:
                if c in kids or (os.path.isdir(self.abs(c)) and
                                 not os.path.islink(self.abs(c))):
                    walk(c)
                else:
                    out.append(c)
            if named and late:
                out.append(d)
        walk("")
        return ["./" + p if p else "." for p in out]


def gnutar(top, names, out):
    lst = os.path.abspath(out + ".list")
    with open(lst, "wb") as f:
        for n in names:
            f.write(os.fsencode(n) + b"\0")
    subprocess.run(["tar", "--format=posix", "--sparse", "--xattrs",
                    "--xattrs-include=*", "--no-recursion", "-C", top,
                    "-cf", os.path.abspath(out), "--null", "-T", lst],
                   check=True)
    os.unlink(lst)


def append_layer_rules(g, path):
    """Entries only the layer rules read, after GNU tar's."""
    r = g.r
    entries = []

    def add(name, kind="f", data=b"", mode=0o644, link="", xattr=None):
        ti = tarfile.TarInfo(name)
        ti.mtime = r.randrange(0, 1_700_000_000)
        ti.uid, ti.gid = r.choice(OWNERS)
        ti.uname = ti.gname = ""
        ti.mode = mode
        ti.type = {"f": tarfile.REGTYPE, "d": tarfile.DIRTYPE,
                   "l": tarfile.SYMTYPE, "h": tarfile.LNKTYPE}[kind]
        ti.linkname = link
        if xattr:
            ti.pax_headers = {"SCHILY.xattr." + xattr[0]: xattr[1]}
        if kind == "f" and Gen.sorted:
            data = b""          # no bytes out of the walk's order
        if kind == "f":
            ti.size = len(data)
        entries.append((ti, io.BytesIO(data) if kind == "f" else None))

    def pfx(p):
        return r.choice(["", "./", ""]) + p

    files = [p for p in g.files if os.path.lexists(g.abs(p))]
    dirs = [d for d in g.dirs if d]
    for i in range(r.randint(10, 30)):
        k = r.randrange(9)
        if k == 0 and files:
            add(pfx(r.choice(files)), data=os.urandom(r.randint(0, 3000)),
                mode=r.choice(FILE_MODES))
        elif k == 1 and dirs:
            add(pfx(r.choice(dirs)) + "/", "d", mode=r.choice(DIR_MODES))
        elif k == 2:
            parent = r.choice(g.dirs)
            victim = r.choice(g.paths) if r.random() < 0.7 else \
                os.path.join(parent, "nothing%d" % i)
            d, b = os.path.split(victim)
            add(pfx(os.path.join(d, ".wh." + b)), data=b"")
            if r.random() < 0.3:
                add("hl-to-wh-%d" % i, "h",
                    link=os.path.join(d, ".wh." + b))
        elif k == 3:
            add(pfx(os.path.join(r.choice(g.dirs), ".wh..wh..opq")))
        elif k == 4:
            add(pfx(os.path.join(r.choice(g.dirs), ".wh..wh.plnk",
                                 "%d" % r.randint(1, 99999))), data=b"x")
        elif k == 5:
            add("late-%d/child" % i, data=b"c")
            add("late-%d/sub/grand" % i, data=b"g")
            add("late-%d" % i, "d", mode=0o750)
        elif k == 6:
            # (user.Beagle.* is what /etc/xattr.conf says a copy skips)
            add("miss-%d//a/./b/f" % i, data=b"deep",
                xattr=(r.choice(["user.pax", "user.Beagle.x"]), "v%d" % i))
            add("miss-%d/a/b/h" % i, "h", link="miss-%d/a/b/f" % i)
        elif k == 7 and files:
            add(pfx(r.choice(files)), "l", link="somewhere")
        elif k == 8:
            add("new-%d" % i, data=b"one")
            add("new-%d" % i, data=b"two, later")
    # type changes last: nothing after goes through them
    if dirs and r.random() < 0.5:
        add(pfx(r.choice(dirs)), data=b"a file where a directory was")
    if files and r.random() < 0.5:
        add(pfx(r.choice(files)), "d", mode=0o700)
    with tarfile.open(path, "a", format=tarfile.PAX_FORMAT) as t:
        for ti, data in entries:
            t.addfile(ti, data)


def upper_gen(low, seed, top):
    """A layer over @low's tree: some of its directories again (new
    metadata, or left for their entries to imply), some of its entries
    replaced (a file, a directory, a symlink, whatever was there), new
    names in its directories."""
    os.makedirs(top)
    g = Gen(seed, top)
    r = g.r

    def parents(p):
        d = os.path.dirname(p)
        if d and not os.path.lexists(g.abs(d)):
            parents(d)
            os.mkdir(g.abs(d))
            g.dirs.append(d)
            g.meta(d, is_dir=True)
            g.paths.append(d)

    lower_dirs = [d for d in low.dirs if d]
    for d in r.sample(lower_dirs, min(len(lower_dirs), r.randint(0, 8))):
        parents(d + "/x")
    for p in r.sample(low.paths, min(len(low.paths), r.randint(2, 12))):
        if os.path.lexists(g.abs(p)) or not g.through_dirs(p):
            continue
        parents(p)
        k = r.random()
        if k < 0.4:
            g.data(p)
            g.files.append(p)
        elif k < 0.75:
            os.mkdir(g.abs(p))
            g.dirs.append(p)
        else:
            os.symlink("replaced", g.abs(p))
            g.meta(p, is_link=True)
            g.paths.append(p)
            continue
        g.meta(p, is_dir=os.path.isdir(g.abs(p)))
        g.paths.append(p)
    for _ in range(r.randint(5, 30)):
        g.one()
    os.chmod(top, r.choice(DIR_MODES))
    g.times()
    return g


def compress(g, layer):
    """@layer as it is, gzip'd or zstd'd: its path."""
    comp = g.r.choice(["", ".gz", ".zst"])
    if comp:
        raw = open(layer, "rb").read()
        os.unlink(layer)
        layer += comp
        if comp == ".gz":
            raw = gzip.compress(raw, mtime=0)
        else:
            raw = subprocess.run(["zstd", "-q", "-c"], input=raw,
                                 stdout=subprocess.PIPE, check=True).stdout
        with open(layer, "wb") as f:
            f.write(raw)
    return layer


def main(argv):
    Gen.sorted = "--sorted" in argv
    rest = [a for a in argv[1:] if a != "--sorted"]
    args = dict(zip(rest[0::2], rest[1::2]))
    if "--seed" not in args or "--out" not in args:
        sys.exit(__doc__)
    seed, out = int(args["--seed"]), args["--out"]
    top = os.path.join(out, "tree")
    os.makedirs(top)
    g = Gen(seed, top)
    for _ in range(g.r.randint(20, 90)):
        g.one()
    os.chmod(top, g.r.choice(DIR_MODES))
    g.times()
    gnutar(top, g.order(False), os.path.join(out, "full.tar"))
    layer = os.path.join(out, "layer.tar")
    gnutar(top, g.order(True), layer)
    append_layer_rules(g, layer)
    print(compress(g, layer))
    # --stack N: N - 1 layers more, each over the one beneath
    low = g
    for i in range(1, int(args.get("--stack", "1"))):
        up = upper_gen(low, seed * 1000 + i, os.path.join(out, "up%d" % i))
        layer = os.path.join(out, "up%d.tar" % i)
        names = up.order(True)
        if up.r.random() < 0.5:
            names.remove(".")   # the root too left for the view to imply
        gnutar(up.top, names, layer)
        # the layer rules, over the names beneath too
        rules = Gen(0, up.top)
        rules.r = up.r
        rules.dirs = up.dirs + [d for d in low.dirs
                                if d and up.through_dirs(d + "/x")]
        rules.files = up.files
        rules.paths = up.paths + low.paths
        append_layer_rules(rules, layer)
        print(compress(up, layer))
        # the next one goes over the names of both
        both = Gen(0, up.top)
        both.dirs = sorted(set(low.dirs) | set(up.dirs))
        both.files = up.files
        both.paths = sorted(set(low.paths) | set(up.paths))
        low = both


if __name__ == "__main__":
    main(sys.argv)
