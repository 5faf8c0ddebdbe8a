#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""diff_ops.py - the model side of tests/kernel/diff-kernel.sh.

  diff_ops.py gen --seed N LOWER
      write a random plain tree LOWER (files of mixed sizes, modes, owners
      and mtimes, xattrs, symlinks, fifos, a device, hard links, empty
      directories, a few odd names).
  diff_ops.py ops --seed N --ops K MNT EXPECT
      read the overlay mounted at MNT (with an empty upper: the old view)
      into a model, then make K random changes THROUGH it, applying each
      to the model too; write the changes the model predicts into EXPECT.txt
      ("K PATH" lines, as hunion diff --exact prints them) and EXPECT.json
      (one object per line, as hunion diff --exact --json), the
      operations into EXPECT.log, and the groups of names that link(2)
      made one inode into EXPECT.links (JSON).
  diff_ops.py root-meta TOP UPPER
      give the empty UPPER the mode, owner, times and user.* xattrs of
      the lower root TOP (what the merged root shows is the upper's).
  diff_ops.py links EXPECT.links DIR
      each group of EXPECT.links is one inode in DIR.
  diff_ops.py json-eq EXPECT.json GOT.json
      compare two JSON listings (parsed, so escaping styles do not matter);
      exit 1 with the first difference.
  diff_ops.py json-sub EXACT.json PLAIN.json
      PLAIN (hunion diff --json) must be EXACT (hunion diff --exact
      --json) plus M lines of entries that are not directories.

The model knows what every operation does to the tree: which entries it
creates, removes, renames or changes, and that creating, removing or
renaming an entry touches its parent directory's mtime (to "now", which no
generated mtime can equal).  A lower hard-link group is separate files in
the model: the kernel (index=off) breaks it at copy-up.  A link made
through the mount is one node under two names.
"""

import json
import os
import random
import shutil
import stat
import sys

NOW = "now"		# an mtime set by the clock: unequal to any generated one

ODD_NAMES = ["with space", "caf\u00e9", "new\nline", "tab\there", "-dash",
             ".hidden", "back\\slash"]


class Node:
    def __init__(self, kind, mode, uid=0, gid=0, mtime=NOW, xattrs=None,
                 data=b""):
        self.kind = kind	# f d l p c
        self.mode = mode	# permission bits
        self.uid, self.gid = uid, gid
        self.mtime = mtime	# ns, or NOW
        self.xattrs = dict(xattrs or {})
        self.data = data	# f: bytes, l: target bytes, c: (maj, min)
        self.children = {} if kind == "d" else None


# ---- generating the lower tree ---------------------------------------------

def gen(seed, root):
    rng = random.Random(seed)
    os.umask(0)
    os.makedirs(root)
    dirs = [root]
    files = []
    times = []		# (path, ns) set at the end, children first
    serial = [0]

    def name():
        serial[0] += 1
        if rng.random() < 0.06:
            return ODD_NAMES[rng.randrange(len(ODD_NAMES))] + str(serial[0])
        return rng.choice("abcdefghkmnpqrstuvwxyz") + str(serial[0])

    def mtime():
        return (1000000000 + rng.randrange(10 ** 7)) * 10 ** 9 + \
            rng.choice([0, 0, rng.randrange(10 ** 9)])

    for _ in range(rng.randrange(40, 160)):
        parent = rng.choice(dirs)
        if parent.count("/") - root.count("/") > 4:
            continue
        p = os.path.join(parent, name())
        r = rng.random()
        if r < 0.25:
            os.mkdir(p, rng.choice([0o755, 0o755, 0o700, 0o775]))
            dirs.append(p)
        elif r < 0.80:
            size = rng.choice([0, rng.randrange(1, 200), rng.randrange(4096),
                               rng.randrange(70000)])
            with open(p, "wb") as f:
                f.write(rng.randbytes(size))
            os.chmod(p, rng.choice([0o644, 0o644, 0o600, 0o755, 0o444]))
            files.append(p)
        elif r < 0.90:
            os.symlink(rng.choice(["target", "../up", "/abs/path", "x" * 80]),
                       p)
        elif r < 0.95:
            os.mkfifo(p, 0o644)
        else:
            os.mknod(p, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        if rng.random() < 0.15:
            os.lchown(p, rng.choice([1000, 33, 65534]),
                      rng.choice([1000, 33, 0]))
        if (p in files or p in dirs) and rng.random() < 0.12:
            os.setxattr(p, b"user.gen", rng.randbytes(rng.randrange(1, 40)),
                        follow_symlinks=False)
        times.append((p, mtime()))
    for _ in range(rng.randrange(0, 3)):
        if files:
            src = rng.choice(files)
            dst = os.path.join(rng.choice(dirs), name())
            os.link(src, dst)
    for p, ns in reversed(times):
        os.utime(p, ns=(ns, ns), follow_symlinks=False)
    os.utime(root, ns=(10 ** 18, 10 ** 18))


# ---- the model ---------------------------------------------------------------

def read_node(path):
    st = os.lstat(path)
    kind = {stat.S_IFDIR: "d", stat.S_IFREG: "f", stat.S_IFLNK: "l",
            stat.S_IFIFO: "p", stat.S_IFCHR: "c"}[stat.S_IFMT(st.st_mode)]
    xattrs = {}
    if kind != "l":
        for x in os.listxattr(path, follow_symlinks=False):
            xattrs[x.encode("utf-8", "surrogateescape")] = \
                os.getxattr(path, x, follow_symlinks=False)
    data = b""
    if kind == "f":
        with open(path, "rb") as f:
            data = f.read()
    elif kind == "l":
        data = os.readlink(os.fsencode(path))
    elif kind == "c":
        data = (os.major(st.st_rdev), os.minor(st.st_rdev))
    n = Node(kind, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
             st.st_mtime_ns, xattrs, data)
    if kind == "d":
        for name in os.listdir(path):
            n.children[name] = read_node(os.path.join(path, name))
    return n


def copy_model(n, memo=None):
    memo = {} if memo is None else memo
    if id(n) in memo:
        return memo[id(n)]
    c = Node(n.kind, n.mode, n.uid, n.gid, n.mtime, n.xattrs, n.data)
    memo[id(n)] = c
    if n.kind == "d":
        c.children = {k: copy_model(v, memo) for k, v in n.children.items()}
    return c


def walk(n, path=()):
    yield path, n
    if n.kind == "d":
        for name in sorted(n.children):
            yield from walk(n.children[name], path + (name,))


def lookup(root, path):
    n = root
    for c in path:
        n = n.children[c]
    return n


# ---- the changes the model predicts -------------------------------------------

TYPE = {"f": "file", "d": "dir", "l": "symlink", "p": "fifo", "c": "char"}


def what_differs(o, n):
    if o.kind != n.kind:
        return ["type"]
    w = []
    if n.kind != "d" and o.data != n.data:
        w.append("content")
    if o.mode != n.mode:
        w.append("mode")
    if (o.uid, o.gid) != (n.uid, n.gid):
        w.append("owner")
    if o.mtime != n.mtime:
        w.append("mtime")
    if o.xattrs != n.xattrs:
        w.append("xattrs")
    return w


def model_diff(o, n, path, out):
    def key(name):
        return os.fsencode(name)
    for name in sorted(set(o.children) - set(n.children), key=key):
        out.append({"change": "D", "path": path + (name,),
                    "type": TYPE[o.children[name].kind]})
    for name in sorted(n.children, key=key):
        nc, oc = n.children[name], o.children.get(name)
        p = path + (name,)
        if oc is None:
            out.append({"change": "A", "path": p, "type": TYPE[nc.kind]})
            continue
        w = what_differs(oc, nc)
        if w:
            d = {"change": "M", "path": p, "type": TYPE[nc.kind]}
            if w == ["type"]:
                d["old_type"] = TYPE[oc.kind]
            d["what"] = w
            out.append(d)
        if nc.kind == "d" and oc.kind == "d":
            model_diff(oc, nc, p, out)


def escape(s):
    """cmd/common.c print_path_escaped()"""
    out = []
    b = os.fsencode(s)
    i = 0
    while i < len(b):
        c = b[i]
        if c == 0x5c:
            out.append("\\\\")
        elif c == 0x0a:
            out.append("\\n")
        elif c == 0x09:
            out.append("\\t")
        elif c < 0x20 or c == 0x7f:
            out.append("\\x%02x" % c)
        elif c < 0x80:
            out.append(chr(c))
        else:
            for n in (4, 3, 2):
                try:
                    out.append(b[i:i + n].decode("utf-8"))
                    i += n - 1
                    break
                except UnicodeDecodeError:
                    pass
            else:
                out.append("\\x%02x" % c)
        i += 1
    return "".join(out)


def write_expect(old, new, prefix):
    out = []
    w = what_differs(old, new)
    if w:
        out.append({"change": "M", "path": (), "type": "dir", "what": w})
    model_diff(old, new, (), out)
    with open(prefix + ".txt", "w", encoding="utf-8") as f:
        for d in out:
            f.write("%s %s\n" % (d["change"],
                                 escape("/".join(d["path"]) or ".")))
    with open(prefix + ".json", "w", encoding="utf-8") as f:
        for d in out:
            d["path"] = "/".join(d["path"]) or "."
            f.write(json.dumps(d, ensure_ascii=False) + "\n")


# ---- operations through the mount ----------------------------------------------

class Ops:
    def __init__(self, rng, root, mnt, log, tag):
        self.rng, self.root, self.mnt, self.log = rng, root, mnt, log
        self.tag = tag		# new names unlike any earlier session's
        self.serial = 0

    def real(self, path):
        return os.path.join(self.mnt, *path) if path else self.mnt

    def new_name(self):
        self.serial += 1
        if self.rng.random() < 0.08:
            return "%sn %s%d" % (self.tag, ODD_NAMES[self.rng.randrange(
                len(ODD_NAMES))], self.serial)
        return "%snew%d" % (self.tag, self.serial)

    def entries(self, kinds=None, root=False):
        return [(p, n) for p, n in walk(self.root)
                if (root or p) and (kinds is None or n.kind in kinds)]

    def dirs(self):
        return [p for p, n in walk(self.root) if n.kind == "d"]

    def touch_parent(self, path):
        lookup(self.root, path[:-1]).mtime = NOW

    def say(self, *words):
        self.log.write(" ".join(escape(str(w)) if isinstance(w, str) else
                                escape("/".join(w)) for w in words) + "\n")

    # each returns False when it does not apply to the tree as it is
    def op_create(self):
        d = self.rng.choice(self.dirs())
        p = d + (self.new_name(),)
        data = self.rng.randbytes(self.rng.randrange(3000))
        mode = self.rng.choice([0o644, 0o600, 0o755])
        fd = os.open(self.real(p), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        os.write(fd, data)
        os.close(fd)
        lookup(self.root, d).children[p[-1]] = Node("f", mode, data=data)
        self.touch_parent(p)
        self.say("create", p)
        return True

    def op_mkdir(self):
        d = self.rng.choice(self.dirs())
        p = d + (self.new_name(),)
        os.mkdir(self.real(p), 0o755)
        n = Node("d", 0o755)
        lookup(self.root, d).children[p[-1]] = n
        self.touch_parent(p)
        self.say("mkdir", p)
        if self.rng.random() < 0.5:
            c = p + (self.new_name(),)
            with open(self.real(c), "wb") as f:
                f.write(b"in new dir\n")
            os.chmod(self.real(c), 0o644)
            n.children[c[-1]] = Node("f", 0o644, data=b"in new dir\n")
        return True

    def op_unlink(self):
        cand = self.entries("flpc")
        if not cand:
            return False
        p, _ = self.rng.choice(cand)
        os.unlink(self.real(p))
        del lookup(self.root, p[:-1]).children[p[-1]]
        self.touch_parent(p)
        self.say("unlink", p)
        return True

    def op_rmtree(self):
        cand = self.entries("d")
        if not cand:
            return False
        p, _ = self.rng.choice(cand)
        shutil.rmtree(self.real(p))
        del lookup(self.root, p[:-1]).children[p[-1]]
        self.touch_parent(p)
        self.say("rmtree", p)
        return True

    def op_rmdir(self):
        cand = [(p, n) for p, n in self.entries("d") if not n.children]
        if not cand:
            return False
        p, _ = self.rng.choice(cand)
        os.rmdir(self.real(p))
        del lookup(self.root, p[:-1]).children[p[-1]]
        self.touch_parent(p)
        self.say("rmdir", p)
        return True

    def op_rename_file(self):
        cand = self.entries("flpc")
        if not cand:
            return False
        src, node = self.rng.choice(cand)
        d = self.rng.choice(self.dirs())
        dparent = lookup(self.root, d)
        olds = [k for k, v in dparent.children.items()
                if v.kind != "d" and v is not node]
        if olds and self.rng.random() < 0.3:
            dst = d + (self.rng.choice(olds),)		# replaces a file
        else:
            dst = d + (self.new_name(),)
        os.rename(self.real(src), self.real(dst))
        del lookup(self.root, src[:-1]).children[src[-1]]
        dparent.children[dst[-1]] = node
        self.touch_parent(src)
        self.touch_parent(dst)
        self.say("rename", src, dst)
        return True

    def op_rename_dir(self):
        cand = self.entries("d")
        if not cand:
            return False
        src, node = self.rng.choice(cand)
        dirs = [d for d in self.dirs() if d[:len(src)] != src]
        d = self.rng.choice(dirs)
        dparent = lookup(self.root, d)
        empty = [k for k, v in dparent.children.items()
                 if v.kind == "d" and not v.children and d + (k,) != src]
        if empty and self.rng.random() < 0.3:
            dst = d + (self.rng.choice(empty),)	# replaces an empty dir
        else:
            dst = d + (self.new_name(),)
        os.rename(self.real(src), self.real(dst))
        del lookup(self.root, src[:-1]).children[src[-1]]
        dparent.children[dst[-1]] = node
        self.touch_parent(src)
        self.touch_parent(dst)
        self.say("rename-dir", src, dst)
        return True

    def op_chmod(self):
        cand = self.entries("fdpc")
        if not cand:
            return False
        p, n = self.rng.choice(cand)
        mode = self.rng.choice([0o600, 0o640, 0o700, 0o711, 0o755, 0o4755,
                                0o1777, 0o444])
        os.chmod(self.real(p), mode)
        n.mode = mode
        self.say("chmod", oct(mode), p)
        return True

    def op_chown(self):
        cand = self.entries()
        if not cand:
            return False
        p, n = self.rng.choice(cand)
        uid, gid = self.rng.choice([0, 33, 1000, 4242]), \
            self.rng.choice([0, 33, 1000])
        os.lchown(self.real(p), uid, gid)
        n.uid, n.gid = uid, gid
        if n.kind != "d" and n.kind != "l":
            # chown(2) drops set-user-ID, and set-group-ID where group
            # execution is allowed, even for root
            n.mode &= ~0o4000
            if n.mode & 0o010:
                n.mode &= ~0o2000
        self.say("chown", "%d:%d" % (uid, gid), p)
        return True

    def op_xattr(self):
        cand = self.entries("fd", root=True)
        p, n = self.rng.choice(cand)
        if n.xattrs and self.rng.random() < 0.4:
            x = self.rng.choice(sorted(n.xattrs))
            os.removexattr(self.real(p), x, follow_symlinks=False)
            del n.xattrs[x]
            self.say("rmxattr", x.decode(), p)
        else:
            x = self.rng.choice([b"user.gen", b"user.op"])
            v = self.rng.randbytes(self.rng.randrange(1, 30))
            os.setxattr(self.real(p), x, v, follow_symlinks=False)
            n.xattrs[x] = v
            self.say("setxattr", x.decode(), p)
        return True

    def op_link(self):
        cand = self.entries("f")
        if not cand:
            return False
        src, node = self.rng.choice(cand)
        d = self.rng.choice(self.dirs())
        dst = d + (self.new_name(),)
        os.link(self.real(src), self.real(dst))
        lookup(self.root, d).children[dst[-1]] = node
        self.touch_parent(dst)
        self.say("link", src, dst)
        return True

    def op_write(self):
        cand = [(p, n) for p, n in self.entries("f") if n.mode & 0o200]
        if not cand:
            return False
        p, n = self.rng.choice(cand)
        how = self.rng.choice(["append", "overwrite", "truncate"])
        with open(self.real(p), "r+b") as f:
            if how == "append":
                extra = self.rng.randbytes(self.rng.randrange(1, 500))
                f.seek(0, 2)
                f.write(extra)
                n.data = n.data + extra
            elif how == "overwrite" and n.data:
                data = bytes(b ^ 0x5a for b in n.data)
                f.write(data)
                n.data = data
            else:
                size = self.rng.randrange(len(n.data) + 1) if n.data else 7
                f.truncate(size)
                n.data = (n.data + b"\0" * size)[:size]
        n.mtime = NOW
        self.say("write", how, p)
        return True

    def op_file_to_dir(self):
        cand = self.entries("flpc")
        if not cand:
            return False
        p, _ = self.rng.choice(cand)
        os.unlink(self.real(p))
        os.mkdir(self.real(p), 0o750)
        lookup(self.root, p[:-1]).children[p[-1]] = Node("d", 0o750)
        self.touch_parent(p)
        self.say("file-to-dir", p)
        return True

    def op_dir_to_file(self):
        cand = self.entries("d")
        if not cand:
            return False
        p, _ = self.rng.choice(cand)
        shutil.rmtree(self.real(p))
        with open(self.real(p), "wb") as f:
            f.write(b"was a dir\n")
        os.chmod(self.real(p), 0o644)
        lookup(self.root, p[:-1]).children[p[-1]] = \
            Node("f", 0o644, data=b"was a dir\n")
        self.touch_parent(p)
        self.say("dir-to-file", p)
        return True

    def op_recreate_dir(self):
        cand = self.entries("d")
        if not cand:
            return False
        p, old = self.rng.choice(cand)
        shutil.rmtree(self.real(p))
        os.mkdir(self.real(p), old.mode & 0o1777)
        n = Node("d", old.mode & 0o1777)
        lookup(self.root, p[:-1]).children[p[-1]] = n
        self.touch_parent(p)
        self.say("recreate-dir", p)
        if old.children and self.rng.random() < 0.6:
            name = self.rng.choice(sorted(old.children))
            with open(self.real(p + (name,)), "wb") as f:
                f.write(b"again\n")
            os.chmod(self.real(p + (name,)), 0o644)
            n.children[name] = Node("f", 0o644, data=b"again\n")
        return True

    def op_symlink(self):
        d = self.rng.choice(self.dirs())
        p = d + (self.new_name(),)
        target = self.rng.choice(["t", "../../somewhere", "/etc/passwd"])
        os.symlink(target, self.real(p))
        lookup(self.root, d).children[p[-1]] = \
            Node("l", 0o777, data=target.encode())
        self.touch_parent(p)
        self.say("symlink", p)
        return True

    def op_mkfifo(self):
        d = self.rng.choice(self.dirs())
        p = d + (self.new_name(),)
        os.mkfifo(self.real(p), 0o640)
        lookup(self.root, d).children[p[-1]] = Node("p", 0o640)
        self.touch_parent(p)
        self.say("mkfifo", p)
        return True

    def op_utime(self):
        cand = self.entries("fdpc")
        if not cand:
            return False
        p, n = self.rng.choice(cand)
        ns = 1100000000 * 10 ** 9 + self.rng.randrange(10 ** 9)
        os.utime(self.real(p), ns=(ns, ns), follow_symlinks=False)
        n.mtime = ns
        self.say("utime", p)
        return True


OPS = [name for name in dir(Ops) if name.startswith("op_")]


def do_ops(seed, nops, mnt, prefix):
    rng = random.Random(seed * 7919 + 1)
    os.umask(0)
    old = read_node(mnt)	# nothing changed yet: the old view
    new = copy_model(old)
    with open(prefix + ".log", "w", encoding="utf-8") as log:
        ops = Ops(rng, new, mnt, log, "s%d" % seed)
        done = 0
        while done < nops:
            if getattr(ops, rng.choice(OPS))():
                done += 1
    write_expect(old, new, prefix)
    groups = {}
    for path, n in walk(new):
        if n.kind != "d":
            groups.setdefault(id(n), []).append("/".join(path))
    with open(prefix + ".links", "w", encoding="utf-8") as f:
        json.dump([g for g in groups.values() if len(g) > 1], f)


def root_meta(src, dst):
    """Give the empty upper @dst what the merged root shows: the mode,
    owner, times and public xattrs of the top lower layer's root."""
    st = os.lstat(src)
    for x in os.listxattr(src):
        if x.startswith("user."):
            os.setxattr(dst, x, os.getxattr(src, x))
    os.chown(dst, st.st_uid, st.st_gid)
    os.chmod(dst, stat.S_IMODE(st.st_mode))
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    return 0


def links_check(links_path, root):
    """Each group of names the model made with link(2) is one inode."""
    with open(links_path, encoding="utf-8") as f:
        groups = json.load(f)
    for g in groups:
        inos = {os.lstat(os.path.join(root, p)).st_ino for p in g}
        if len(inos) != 1:
            print("not one inode: %s" % json.dumps(g))
            return 1
    return 0


def json_eq(want_path, got_path):
    def load(p):
        with open(p, encoding="utf-8", errors="surrogateescape") as f:
            return [json.loads(line) for line in f]
    want, got = load(want_path), load(got_path)
    for g in got:
        g.pop("opaque", None)	# the model does not say
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            print("line %d: want %s" % (i + 1, json.dumps(w)))
            print("line %d:  got %s" % (i + 1, json.dumps(g)))
            return 1
    if len(want) != len(got):
        print("want %d lines, got %d" % (len(want), len(got)))
        return 1
    return 0


def json_sub(exact_path, plain_path):
    """Without --exact the listing is the exact one plus M lines for
    entries that are not directories (copy-ups that changed nothing)."""
    def load(p):
        with open(p, encoding="utf-8", errors="surrogateescape") as f:
            return [json.loads(line) for line in f]
    exact, plain = load(exact_path), load(plain_path)
    keyed = {(d["change"], d["path"]) for d in exact}
    for d in plain:
        if (d["change"], d["path"]) in keyed:
            keyed.discard((d["change"], d["path"]))
        elif d["change"] != "M" or d["type"] == "dir":
            print("not in the exact listing: %s" % json.dumps(d))
            return 1
    if keyed:
        print("missing: %s" % sorted(keyed)[0])
        return 1
    order = [(d["change"], d["path"]) for d in plain
             if (d["change"], d["path"]) in {(e["change"], e["path"])
                                             for e in exact}]
    if order != [(d["change"], d["path"]) for d in exact]:
        print("the order differs")
        return 1
    return 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "gen" and argv[2] == "--seed":
        gen(int(argv[3]), argv[4])
        return 0
    if len(argv) == 8 and argv[1] == "ops" and argv[2] == "--seed" and \
            argv[4] == "--ops":
        do_ops(int(argv[3]), int(argv[5]), argv[6], argv[7])
        return 0
    if len(argv) == 4 and argv[1] == "json-eq":
        return json_eq(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "root-meta":
        return root_meta(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "links":
        return links_check(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "json-sub":
        return json_sub(argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
