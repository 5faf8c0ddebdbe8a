#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mkstack.py --seed N --out DIR [--layers K] [--features F] [--no-odd-names]
           [--fixed deep|opaque-root|xwhiteout-anywhere]

Generate a random stack of layers from a seed, deterministically, for the
kernel differential test.  L0 is the bottom.  The same logical stack is
written in up to three on-disk forms:

  DIR/overlay/L0..Lk   Linux overlayfs: whiteout = char device 0/0 (some
                       hard-linked to one inode, as the kernel does),
                       opaque = trusted.overlay.opaque "y"; plus, when the
                       stack uses overlay-only features: redirect dirs
                       (absolute "/a/b" and relative "name"), metacopy files
                       (with and without an absolute or relative redirect),
                       xattr whiteouts in middle layers, and foreign markers
                       kept as ordinary entries.
  DIR/union/L0..Lk     the native union format: whiteout = symlink to
                       "(union-whiteout)" with trusted.union.whiteout "y",
                       opaque = trusted.union.opaque "y".  Written only when
                       the stack uses no overlay-only feature (the union
                       format has no redirects, metacopy or xattr
                       whiteouts, and an overlay-form ordinary entry such as
                       a full union whiteout symlink has no union
                       spelling).
  DIR/oci/L0..Lk       OCI/AUFS layers unpacked on disk: whiteout = empty
                       file .wh.NAME, opaque = DIR/.wh..wh..opq (the
                       lookalike opaque "n" is left out).  Written with the
                       union form, when no ordinary name starts with
                       ".wh." and no whited-out name is longer than 251
                       bytes (".wh." + name must fit in NAME_MAX).

--features: auto (default: the seed decides, about half the seeds use
overlay-only features), common (never: the union form is written too),
overlay-only (always: only the overlay form).

Prints one line "forms: overlay [union [oci]]" and writes DIR/info.json:
  {"seed": N, "layers": K, "forms": [...], "features": [...],
   "ambiguous": {FORM: bool, ...}, "userxattr": bool,
   "counts": {KIND: N, ...}}
("counts": how many entries of each kind the layers hold, to see what a
seed covers.)
--userxattr writes the markers under user.overlay.* (mount with the
"userxattr" option, run hunion with --userxattr): no redirects or metacopy
then (the kernel refuses redirect_dir/metacopy with userxattr) and no
union form (union whiteouts are symlinks, and Linux allows no user.*
xattrs on symlinks).
A form is "ambiguous" when format auto-detection cannot be expected to pick
it: it holds lookalikes of another format's markers (a ".wh.NAME" file, a
foreign marker xattr such as trusted.union.whiteout "n" in the overlay
form).  Tests force --format for every form and also try auto-detection on
the forms that are not ambiguous.

Lookalikes that must stay ordinary entries: symlink to "(union-whiteout)"
without the xattr, the union xattr with value "n", char device 0/1, block
device 0/0, ".wh.foo" files, opaque xattr "n" (in the form's own
namespace), a non-empty file with overlay.whiteout in an "x" directory, and
(overlay form only) a full union whiteout.  Not generated: an empty file
with overlay.whiteout outside an "x" directory or in the top or bottom
layer; the kernel's lookup treats it as a whiteout but its readdir lists
it (see --fixed xwhiteout-anywhere).

Generator rules that follow from the formats, not from the engine:
 - xattr whiteouts only in middle layers (neither the top, which hunion
   treats as the upper, nor the bottom);
 - a metacopy file always has its data below (the kernel fails the lookup
   with EIO otherwise): placements are checked with a model of the
   kernel's lookup and undone when no data would be found;
 - a redirected directory's origin is covered in the same layer (whiteout,
   or opaque dir / non-dir already there), as the kernel leaves it;
 - redirect values stay below redirect_max (256 bytes).
Sockets are never generated (the kernel shows them, hunion skips them).
"""

import argparse
import copy
import json
import os
import random
import stat
import sys

UW_TARGET = b"(union-whiteout)"

# ---------------------------------------------------------------- model


class Node:
    """One entry of one layer.  kind:
    f file, d dir, l symlink, p fifo, c/b device, w whiteout,
    xw xattr whiteout (overlay), m metacopy file (overlay),
    h hard link to another node of the same layer,
    uw a full union whiteout kept as an ordinary symlink (overlay form)."""

    def __init__(self, kind, **kw):
        self.kind = kind
        self.mode = 0o644
        self.uid = 0
        self.gid = 0
        self.mtime = 0
        self.xattrs = {}        # written in both forms
        self.oxattrs = {}       # written in the overlay form only
        self.uxattrs = {}       # written in the union form only
        self.children = {}
        self.opaque = None      # None, "y", "x" (overlay), "n" (lookalike)
        self.redirect = None    # bytes (overlay)
        self.chunks = []        # [(offset, bytes)]
        self.size = 0
        self.target = b""
        self.rdev = (0, 0)
        self.link = None        # for "h": the target Node
        self.wgroup = None      # overlay whiteouts sharing an inode
        self.__dict__.update(kw)


def is_dir(n):
    return n is not None and n.kind == "d"


def real(n):
    """The node a hard link stands for."""
    return n.link if n is not None and n.kind == "h" else n


ODD_XATTRS = [b"user.sp ace", "user.\u00fc".encode(), b"user.\xff",
              b"user.a%b", b"user.a=b", b"user.a%20b"]


class Gen:
    def __init__(self, seed, nlayers, features, odd_names, healthy=False):
        self.r = random.Random(seed)
        # --healthy: nothing fsck would report (see healthy_prune)
        self.healthy = healthy
        r = self.r
        self.seed = seed
        self.k = nlayers or r.randint(2, 4)
        if features == "auto":
            self.ovl_only = r.random() < 0.5
        else:
            self.ovl_only = features == "overlay-only"
        self.odd = odd_names
        # xattr names a tar writer must keep as they are (a space, UTF-8
        # and not, the two bytes GNU tar escapes), drawn from their own
        # generator: the rest of each seed's stack is what it was before
        self.xr = random.Random(seed * 7919 + 1)
        self.userxattr = False
        # lookalikes of another format's markers (".wh.NAME" files, union
        # xattrs in the overlay form...) make auto-detection ambiguous:
        # only some seeds use them, so the others can test detection
        self.foreign = r.random() < 0.5 and not healthy
        self.layers = [self.mkdir_node() for _ in range(self.k)]
        self.used = set()
        self.counter = 0
        self.wgroups = 0

    # ---- random metadata
    def meta(self, n):
        r = self.r
        n.uid = r.choice([0, 0, 0, 1000, 1001, 65534, 123456])
        n.gid = r.choice([0, 0, 0, 100, 1000, 65534, 654321])
        n.mtime = (r.randint(1_000_000_000, 1_700_000_000) * 10**9 +
                   r.choice([0, 0, r.randint(0, 10**9 - 1)]))
        return n

    def xattrs(self, n, user_ok):
        r = self.r
        if user_ok and r.random() < 0.25:
            n.xattrs[b"user.foo"] = r.choice(
                [b"bar", b"", bytes(r.randrange(256) for _ in range(20))])
        if user_ok and r.random() < 0.08:
            n.xattrs[b"user.z"] = b"1"
        if r.random() < 0.15:
            n.xattrs[b"trusted.test"] = r.choice([b"cap", b"\x00\x01\x02"])
        if user_ok and self.xr.random() < 0.1:
            n.xattrs[self.xr.choice(ODD_XATTRS)] = b"odd"

    def mkdir_node(self):
        n = Node("d")
        n.mode = 0o755
        return n

    def new_dir(self):
        r = self.r
        n = self.meta(Node("d"))
        n.mode = r.choice([0o755, 0o755, 0o755, 0o700, 0o1777, 0o2775,
                           0o555, 0o711, 0o3750, 0o7755])
        self.xattrs(n, True)
        return n

    def new_file(self):
        r = self.r
        n = self.meta(Node("f"))
        n.mode = r.choice([0o644, 0o644, 0o600, 0o755, 0o444, 0o4755,
                           0o2755, 0o1644, 0o6711, 0o000, 0o777])
        shape = r.random()
        if shape < 0.15:
            n.size = 0
        elif shape < 0.3:
            # sparse: holes at the start, the middle and/or the end, data
            # chunks 64 KiB aligned so every filesystem sees the holes
            size = r.randint(2, 40) * 65536
            chunks = []
            for _ in range(r.randint(1, 3)):
                off = r.randrange(0, size // 65536) * 65536
                chunks.append((off, self.rbytes(r.randint(1, 5000))))
            n.chunks = chunks
            n.size = max([size] + [o + len(b) for o, b in chunks])
        elif shape < 0.35:
            n.chunks = [(0, self.rbytes(r.randint(100_000, 300_000)))]
            n.size = len(n.chunks[0][1])
        else:
            b = self.rbytes(r.randint(1, 3000))
            n.chunks = [(0, b)]
            n.size = len(b)
        self.xattrs(n, True)
        return n

    def rbytes(self, n):
        return self.r.randbytes(n)

    def new_symlink(self, target=None):
        r = self.r
        n = self.meta(Node("l"))
        n.mode = 0o777
        n.target = target if target is not None else r.choice(
            [b"a", b"../x", b"/abs/path", b"dangling", b"sub/./f",
             b"t\xff\nx y", b"long" * 300, UW_TARGET + b"x"])
        self.xattrs(n, False)
        return n

    def new_special(self, kind):
        r = self.r
        n = self.meta(Node(kind))
        n.mode = r.choice([0o644, 0o600, 0o666, 0o640])
        if kind == "c":
            n.rdev = r.choice([(1, 3), (4, 64), (136, 1)])
        elif kind == "b":
            n.rdev = r.choice([(7, 0), (8, 1), (259, 3)])
        self.xattrs(n, False)
        return n

    def new_whiteout(self):
        r = self.r
        n = self.meta(Node("w"))
        n.mode = r.choice([0o000, 0o000, 0o644])
        if r.random() < 0.4:
            # the kernel links whiteouts to one shared inode per layer
            n.wgroup = "shared"
        return n

    def fresh(self, prefix):
        self.counter += 1
        return b"%s%d" % (prefix, self.counter)

    # ---- names
    COMMON = [b"a", b"b", b"c", b"d", b"e", b"sub", b"dir", b"x", b"f.txt",
              b"A", b"a.b", b"a-b", b".hidden"]

    def odd_names(self):
        return [b"new\nline", b"\xff\xfe", b"-dash", b"with space",
                b"N" * 200 + b"-" + b"n" * 54, b".wh.bar", b"tab\tx",
                b"back\\slash", b"\xc3\xa9t\xc3\xa9"]

    def names_for(self, depth):
        r = self.r
        pool = list(self.COMMON)
        k = r.randint(3, 7) if depth < 3 else r.randint(1, 4)
        names = r.sample(pool, k)
        if self.odd and r.random() < (0.5 if depth < 2 else 0.15):
            names += r.sample(self.odd_names(), r.randint(1, 3))
        if self.foreign and r.random() < 0.2:
            names.append(b".wh.foo")
        names = [n for n in names
                 if self.foreign or not n.startswith(b".wh.")]
        if depth < 4:
            names.append(b"deep")
        return sorted(set(names))

    # ---- the random tree, all layers at once so names collide
    def gen_dir(self, dirs, depth):
        """@dirs: {layer index: dir Node} of one path."""
        r = self.r
        for name in self.names_for(depth):
            for li in sorted(dirs):
                d = dirs[li]
                if name == b"deep":
                    # a chain of merged dirs, 3-4 levels deep
                    if r.random() < 0.85:
                        d.children[name] = self.new_dir()
                    continue
                if r.random() < 0.45:
                    continue
                d.children[name] = self.random_entry(li, depth, name)
            sub = {li: dirs[li].children[name] for li in dirs
                   if is_dir(dirs[li].children.get(name))}
            if sub and depth < 5:
                self.gen_dir(sub, depth + 1)
            # opaque markers decided after the contents
            for li, d in sub.items():
                if li > 0 and r.random() < (0.05 if name == b"deep"
                                            else 0.15):
                    d.opaque = "y"
                elif r.random() < 0.05 and not self.healthy:
                    d.opaque = "n"          # lookalike: not opaque

    def random_entry(self, li, depth, name):
        r = self.r
        if name.startswith(b".wh."):
            return self.new_file()          # lookalike: an ordinary file
        choices = [("d", 30 if depth < 4 else 4), ("f", 30), ("l", 8),
                   ("w", 14 if li > 0 else 2), ("p", 3), ("c", 2), ("b", 2),
                   ("lk_sym", 0 if self.healthy else 2), ("lk_c01", 2),
                   ("lk_b00", 2)]
        if self.foreign:
            choices += [("lk_symn", 2)]
        if self.ovl_only and self.foreign:
            choices += [("uw", 2)]
        kind = r.choices([c for c, _ in choices],
                         [w for _, w in choices])[0]
        if kind == "d":
            return self.new_dir()
        if kind == "f":
            return self.new_file()
        if kind == "l":
            return self.new_symlink()
        if kind == "w":
            return self.new_whiteout()
        if kind in ("p", "c", "b"):
            return self.new_special(kind)
        if kind == "lk_sym":
            return self.new_symlink(UW_TARGET)
        if kind == "lk_symn":
            n = self.new_symlink(UW_TARGET)
            n.xattrs[b"trusted.union.whiteout"] = r.choice([b"n", b"yes",
                                                            b""])
            return n
        if kind == "lk_c01":
            n = self.new_special("c")
            n.rdev = (0, 1)
            return n
        if kind == "lk_b00":
            n = self.new_special("b")
            n.rdev = (0, 0)
            return n
        if kind == "uw":
            n = self.new_symlink(UW_TARGET)
            n.kind = "uw"
            return n
        raise AssertionError(kind)

    # ---- helpers over paths in one layer
    def get(self, li, comps):
        n = self.layers[li]
        for c in comps:
            if not is_dir(n):
                return None
            n = n.children.get(c)
            if n is None:
                return None
        return n

    def ensure_dir(self, li, comps):
        """The dir at @comps in layer @li, creating plain dirs; None if a
        non-dir is in the way."""
        n = self.layers[li]
        for c in comps:
            ch = n.children.get(c)
            if ch is None:
                ch = n.children[c] = self.new_dir()
            if not is_dir(ch):
                return None
            n = ch
        return n

    def walk_layer(self, li):
        """(comps, node) for every entry of layer @li, parents first."""
        out = []

        def rec(n, comps):
            for name in sorted(n.children):
                ch = n.children[name]
                out.append((comps + (name,), ch))
                if is_dir(ch):
                    rec(ch, comps + (name,))
        rec(self.layers[li], ())
        return out

    # ---- a model of the kernel's lookup, to place metacopy and redirects
    def klookup(self, top, comps):
        """Resolve @comps in the view of layers 0..top as overlayfs does.
        Returns ("dir", [(li, node)...]), ("file", [(li, node)...]) with the
        data node last, ("neg", None), or ("bad", None) when a metacopy
        would find no data or the model is unsure."""
        root = [(li, self.layers[li]) for li in range(top, -1, -1)]
        stack = root
        for i, name in enumerate(comps):
            kind, ents = self.klookup_child(stack, root, comps[:i], name)
            if i == len(comps) - 1:
                return kind, ents
            if kind != "dir":
                return ("neg", None) if kind in ("neg", "file") else \
                    (kind, None)
            stack = ents
        return "dir", root

    def layer_walk(self, li, comps):
        """Walk an absolute redirect path in one layer: (node, stop).
        Unsure cases (redirects on the way) raise KeyError."""
        n = self.layers[li]
        stop = False
        for j, c in enumerate(comps):
            last = j == len(comps) - 1
            if not is_dir(n):
                return None, stop
            ch = n.children.get(c)
            if ch is None:
                return None, stop
            ch = real(ch)
            if ch.kind in ("w", "xw"):
                if ch.kind == "xw":
                    raise KeyError("xwhiteout on a redirect path")
                return ch, True
            if not last:
                if not is_dir(ch):
                    return None, True
                if ch.redirect is not None:
                    raise KeyError("redirect inside a redirect path")
                if ch.opaque == "y":
                    stop = True
            n = ch
        return n, stop

    def klookup_child(self, stack, root, parent, name):
        found = []
        is_dir_ = False
        metacopy = False
        path = None             # absolute redirect path, or None
        cur = name              # relative name in the parent's stack
        i = 0
        cur_stack = stack
        bottom = 0
        while i < len(cur_stack):
            li, base = cur_stack[i]
            last_layer = li == bottom
            try:
                if path is not None:
                    n, stop = self.layer_walk(li, path)
                else:
                    n = real(base.children.get(cur)) if is_dir(base) \
                        else None
                    stop = False
            except KeyError:
                return "bad", None
            i += 1
            if n is None:
                if stop:
                    break
                continue
            if n.kind == "w":
                break
            if n.kind == "xw":
                # honoured when the parent's dir in that layer is "x" and
                # the layer is a middle one; the generator puts them
                # nowhere else, so treat it as a whiteout
                break
            if metacopy and n.kind not in ("f", "m"):
                break
            if n.kind != "d":
                if is_dir_:
                    break
                if found and not metacopy:
                    break
                found.append((li, n))
                if n.kind == "m":
                    metacopy = True
                    if last_layer:
                        break
                    if n.redirect is not None:
                        if n.redirect.startswith(b"/"):
                            path = tuple(n.redirect[1:].split(b"/"))
                            cur_stack = root
                            i = [x for x, _ in root].index(li) + 1
                        else:
                            cur = n.redirect
                    continue
                metacopy = False
                break
            # a directory
            if found and not is_dir_:
                break
            is_dir_ = True
            found.append((li, n))
            if last_layer:
                break
            if n.opaque == "y":
                break
            if n.redirect is None and stop:
                break
            if n.redirect is not None:
                if n.redirect.startswith(b"/"):
                    path = tuple(n.redirect[1:].split(b"/"))
                    cur_stack = root
                    i = [x for x, _ in root].index(li) + 1
                else:
                    if path is not None:
                        return "bad", None
                    cur = n.redirect
        if not found:
            return "neg", None
        if is_dir_:
            return "dir", found
        if metacopy:
            return "bad", None          # no data found below
        return "file", found

    def visible(self, top):
        """(comps, kind, ents) for the visible entries of the view of
        layers 0..top, computed with klookup over every path of every
        layer (good enough to pick targets)."""
        seen = set()
        out = []
        for li in range(top + 1):
            for comps, _ in self.walk_layer(li):
                if comps in seen:
                    continue
                seen.add(comps)
                kind, ents = self.klookup(top, comps)
                if kind in ("dir", "file"):
                    out.append((comps, kind, ents))
        out.sort()
        return out

    # ---- post passes
    def add_hardlinks(self):
        r = self.r
        for li in range(self.k):
            ents = [(c, n) for c, n in self.walk_layer(li)
                    if n.kind in ("f", "l", "p", "c")]
            dirs = [()] + [c for c, n in self.walk_layer(li) if is_dir(n)]
            if not ents:
                continue
            for _ in range(r.choice([0, 1, 2, 3])):
                tcomps, tnode = r.choice(ents)
                if tnode.kind != "f" and r.random() < 0.7:
                    continue
                dcomps = r.choice(dirs)
                d = self.get(li, dcomps)
                name = r.choice([self.fresh(b"hl"), b"a", b"b", b"x"])
                if name in d.children:
                    continue
                d.children[name] = Node("h", link=tnode)
                # hide or replace one of the names in a higher layer
                if li + 1 < self.k and r.random() < 0.6:
                    hi = r.randint(li + 1, self.k - 1)
                    victim = r.choice([tcomps, dcomps + (name,)])
                    pd = self.ensure_dir(hi, victim[:-1])
                    if pd is not None and victim[-1] not in pd.children:
                        pd.children[victim[-1]] = r.choice(
                            [self.new_whiteout, self.new_file])()

    def add_redirects(self):
        r = self.r
        for li in range(1, self.k):
            origins = set()
            for _ in range(r.choice([0, 1, 1, 2])):
                vis = [(c, e) for c, kind, e in self.visible(li - 1)
                       if kind == "dir" and
                       len(b"/".join(c)) + 1 < 200]
                if not vis:
                    break
                pcomps, _ = r.choice(vis)
                # two redirects to one origin, or to origins one inside
                # the other: the second would have been renamed from
                # where the first one's rename put it (the kernel moves
                # what it sees), and naming its old path leaves it
                # reached twice (ESTALE)
                if self.healthy and any(
                        o[:len(pcomps)] == pcomps or pcomps[:len(o)] == o
                        for o in origins):
                    continue
                origins.add(pcomps)
                saved = copy.deepcopy(self.layers[li])
                if not self.try_redirect(li, pcomps):
                    self.layers[li] = saved

    def try_redirect(self, li, pcomps):
        r = self.r
        relative = r.random() < 0.35
        if relative:
            qparent = pcomps[:-1]
            value = pcomps[-1]
        else:
            cands = [()] + [c for c, n in self.walk_layer(li)
                            if is_dir(n) and c[:len(pcomps)] != pcomps]
            qparent = r.choice(cands)
            value = b"/" + b"/".join(pcomps)
        qd = self.ensure_dir(li, qparent)
        if qd is None:
            return False
        q = self.fresh(b"ren")
        nd = self.new_dir()
        nd.redirect = value
        for _ in range(r.randint(0, 3)):
            nm = r.choice([b"a", b"b", b"new", b"x"])
            nd.children[nm] = r.choice([self.new_file, self.new_whiteout,
                                        self.new_dir])()
        qd.children[q] = nd
        # cover the origin in the same layer, as the kernel leaves it
        old = self.get(li, pcomps)
        if old is None:
            pd = self.ensure_dir(li, pcomps[:-1])
            if pd is None:
                return True     # a non-dir above already hides it
            pd.children[pcomps[-1]] = self.new_whiteout()
        elif is_dir(old):
            old.opaque = "y"
            old.redirect = None
        # sanity: the new dir must be a dir in the model (--healthy: one
        # that merges with the origin, or the redirect points nowhere)
        kind, ents = self.klookup(li, qparent + (q,))
        return kind == "dir" and (not self.healthy or len(ents) > 1)

    def add_metacopy(self):
        r = self.r
        for li in range(1, self.k):
            for _ in range(r.choice([0, 1, 2, 3])):
                vis = [(c, e) for c, kind, e in self.visible(li - 1)
                       if kind == "file" and real(e[-1][1]).kind == "f"]
                if not vis:
                    break
                pcomps, ents = r.choice(vis)
                data = real(ents[-1][1])
                saved = copy.deepcopy(self.layers[li])
                # deepcopy breaks node identity for hard links of this
                # layer: remember and restore the whole layer on failure
                ok = self.try_metacopy(li, pcomps, data)
                if not ok:
                    self.layers[li] = saved

    def try_metacopy(self, li, pcomps, data):
        r = self.r
        m = self.meta(Node("m"))
        m.mode = r.choice([0o600, 0o644, 0o755, 0o4711])
        m.size = data.size
        self.xattrs(m, True)
        how = r.random()
        if how < 0.5:
            qcomps = pcomps
            if self.get(li, pcomps) is not None:
                return False
        elif how < 0.75:
            qcomps = pcomps[:-1] + (self.fresh(b"mv"),)
            m.redirect = pcomps[-1]
        else:
            cands = [()] + [c for c, n in self.walk_layer(li) if is_dir(n)]
            qcomps = r.choice(cands) + (self.fresh(b"mv"),)
            m.redirect = b"/" + b"/".join(pcomps)
            if len(m.redirect) > 250:
                return False
        pd = self.ensure_dir(li, qcomps[:-1])
        if pd is None or qcomps[-1] in pd.children:
            return False
        pd.children[qcomps[-1]] = m
        if qcomps != pcomps and r.random() < 0.5:
            # a rename: the old name whited out
            od = self.ensure_dir(li, pcomps[:-1])
            if od is not None and pcomps[-1] not in od.children:
                od.children[pcomps[-1]] = self.new_whiteout()
        kind, ents = self.klookup(li, qcomps)
        return kind == "file" and ents[0][1] is m and \
            real(ents[-1][1]).kind == "f" and real(ents[-1][1]).size == m.size

    def add_xwhiteouts(self):
        r = self.r
        for li in range(1, self.k - 1):         # middle layers only
            dirs = [(c, n) for c, n in self.walk_layer(li) if is_dir(n)]
            dirs.append(((), self.layers[li]))
            for _ in range(r.choice([1, 1, 2, 3])):
                comps, d = r.choice(dirs)
                if d.opaque is not None and d.opaque != "x":
                    continue
                d.opaque = "x"
                below = [c[-1] for c, kind, e in self.visible(li - 1)
                         if c[:-1] == comps]
                for _ in range(r.randint(1, 3)):
                    if below and r.random() < 0.7:
                        name = r.choice(below)
                    else:
                        name = self.fresh(b"xw")
                    if name in d.children:
                        continue
                    n = self.meta(Node("xw"))
                    d.children[name] = n
                # lookalike: a non-empty file with the xattr, in an x dir
                if r.random() < 0.5 and not self.healthy:
                    f = self.new_file()
                    if f.size == 0:
                        f.chunks = [(0, b"not empty")]
                        f.size = 9
                    f.oxattrs[b"overlay.whiteout"] = b""
                    d.children[self.fresh(b"xwlk")] = f
    def healthy_prune(self):
        """--healthy: take out what fsck rightly reports in a generated
        stack, and add what the kernel would have written: whiteouts that
        hide nothing (in a directory that merges with nothing, or of a
        name no layer below has), layer by layer from the bottom (a
        whiteout gone in one layer can make one above it hide something);
        and the overlay.impure mark on each directory that holds a
        redirected directory or a metacopy file."""
        for li in range(self.k):
            for comps, n in self.walk_layer(li):
                if n.kind != "w":
                    continue
                d = self.get(li, comps[:-1])
                del d.children[comps[-1]]
                kind = "neg" if li == 0 else self.klookup(li, comps)[0]
                if kind != "neg":
                    d.children[comps[-1]] = n       # it hides something
        for li in range(1, self.k):
            dirs = [((), self.layers[li])] + \
                [(c, n) for c, n in self.walk_layer(li) if is_dir(n)]
            for comps, d in dirs:
                if any(ch.kind == "m" or
                       (is_dir(ch) and ch.redirect is not None)
                       for ch in d.children.values()):
                    d.impure = True

    def oci_ok(self):
        """Whether the stack has an OCI spelling: no ordinary ".wh.*"
        names (they would be whiteouts) and no whiteout of a name longer
        than NAME_MAX - 4 bytes (".wh." + name must fit)."""
        for li in range(self.k):
            for comps, n in self.walk_layer(li):
                if comps[-1].startswith(b".wh."):
                    return False
                if n.kind == "w" and len(comps[-1]) > 251:
                    return False
        return True

    def counts(self):
        """How many entries of each kind the stack holds (for info.json:
        shows what a seed covers)."""
        c = {}

        def add(k):
            c[k] = c.get(k, 0) + 1
        for li in range(self.k):
            for comps, n in self.walk_layer(li):
                k = n.kind
                if k == "l" and n.target == UW_TARGET:
                    k = "lookalike-symlink"
                elif k in ("c", "b") and n.rdev in ((0, 1), (0, 0)):
                    k = "lookalike-dev"
                elif k == "f" and comps[-1].startswith(b".wh."):
                    k = "lookalike-wh-name"
                elif k == "f" and n.oxattrs:
                    k = "lookalike-xwhiteout"
                add(k)
                if k == "f" and n.chunks and n.chunks[0][0] > 0:
                    add("sparse")
                if is_dir(n):
                    if n.opaque:
                        add("opaque-" + n.opaque)
                    if n.redirect is not None:
                        add("redirect-" + ("abs" if n.redirect[:1] == b"/"
                                           else "rel"))
                if n.kind == "m" and n.redirect is not None:
                    add("metacopy-redirect")
                if n.kind == "w" and n.wgroup:
                    add("whiteout-shared")
        return dict(sorted(c.items()))

    # ---- fixed stacks (--fixed NAME), for the checks a seed may miss
    def fixed(self, name):
        """Returns (features, forms) of fixed stack @name."""
        self.k = 3 if name == "deep" else 2
        self.layers = [self.mkdir_node() for _ in range(self.k)]
        for n in self.layers:
            self.meta(n)
        if name == "deep":
            # 18 levels of 240-byte names: paths > 4096 bytes (PATH_MAX)
            chain = [b"%02d-" % i + b"p" * 236 for i in range(1, 19)]
            top = []
            for li in range(self.k):
                depth = 18 if li < 2 else 16
                d = self.ensure_dir(li, chain[:depth])
                top.append(d)
            for lvl in (5, 10, 17, 18):
                d = self.get(0, chain[:lvl])
                d.children[b"f%d" % lvl] = self.new_file()
                d.children[b"x"] = self.new_file()
            self.get(0, chain[:18]).children[b"gone"] = self.new_file()
            self.get(0, chain[:18]).children[b"lnk"] = \
                self.new_symlink(b"../" * 17 + b"f")
            d18 = self.get(1, chain[:18])
            d18.children[b"gone"] = self.new_whiteout()
            d18.children[b"new"] = self.new_file()
            self.get(1, chain[:10]).children[b"x"] = self.new_dir()
            self.get(1, chain[:17]).children[b"x"] = self.new_whiteout()
            self.get(2, chain[:16]).children[b"top"] = self.new_file()
            self.get(2, chain[:5]).children[b"x"] = self.new_symlink(b"t")
            return ["common", "fixed-deep"], ["overlay", "union", "oci"]
        if name == "opaque-root":
            # the kernel ignores an opaque marker on a layer root: the
            # root always merges (overlay form only: the union format
            # does not say)
            self.layers[0].children[b"under"] = self.new_file()
            self.layers[1].children[b"top"] = self.new_file()
            self.layers[1].opaque = "y"
            return ["common", "fixed-opaque-root"], ["overlay"]
        if name == "xwhiteout-anywhere":
            # an empty regular file with trusted.overlay.whiteout is a
            # whiteout for the kernel's lookup in every layer, top and
            # bottom included, whether or not its parent has opaque "x":
            # readdir still lists it unless the parent is "x" (in a lower
            # layer), but lstat says ENOENT.  DESIGN.md 2.2 honours them
            # in middle layers under "x" only: this check shows the
            # difference.
            self.k = 3
            self.layers = [self.mkdir_node() for _ in range(3)]
            for n in self.layers:
                self.meta(n)
            for li in range(3):
                for dn in (b"marked", b"plain"):
                    d = self.ensure_dir(li, (dn,))
                    for f in (b"f0", b"f1", b"f2", b"keep"):
                        if li == 0:
                            d.children[f] = self.new_file()
                    if li > 0 or dn == b"marked":
                        x = self.meta(Node("xw"))
                        d.children[b"f%d" % li if li else b"own"] = x
                    if dn == b"marked":
                        d.opaque = "x"
            return ["overlay-only", "fixed-xwhiteout-anywhere"], ["overlay"]
        raise SystemExit("mkstack.py: unknown fixed stack %r" % name)

    def generate(self):
        r = self.r
        # random layer roots' metadata (the view's root is the top's)
        for n in self.layers:
            self.meta(n)
            n.mode = r.choice([0o755, 0o755, 0o700, 0o1777])
            self.xattrs(n, True)
        self.gen_dir({li: self.layers[li] for li in range(self.k)}, 0)
        feats = ["common"]
        if self.ovl_only and not self.userxattr:
            # the kernel refuses redirect_dir and metacopy with userxattr
            self.add_redirects()
            self.add_metacopy()
        if self.ovl_only:
            if self.k >= 3:
                self.add_xwhiteouts()
            feats.append("overlay-only")
        self.add_hardlinks()
        return feats


# --------------------------------------------------------------- writer

def procpath(dirfd, name):
    return b"/proc/self/fd/%d/%s" % (dirfd, name)


def open_dir(rootfd, comps):
    fd = os.dup(rootfd)
    for c in comps:
        nfd = os.open(c, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                      dir_fd=fd)
        os.close(fd)
        fd = nfd
    return fd


class Writer:
    def __init__(self, form, userxattr):
        self.form = form            # "overlay" or "union"
        self.ns = b"user." if userxattr else b"trusted."
        self.ambiguous = False
        self.links = []             # (node, link comps)
        self.where = {}             # id(node) -> comps of its first name
        self.wnode = None           # the layer's shared whiteout inode

    def setx(self, dirfd, name, k, v):
        os.setxattr(procpath(dirfd, name), k, v, follow_symlinks=False)

    def check_ambiguous(self, name, xattrs):
        if name.startswith(b".wh."):
            self.ambiguous = True
        other = {"overlay": (b".union.",), "union": (b".overlay.",),
                 "oci": (b".union.", b".overlay.")}[self.form]
        for k in xattrs:
            if any(o in k for o in other):
                self.ambiguous = True

    def meta(self, dirfd, name, n, chmod=True):
        os.chown(name, n.uid, n.gid, dir_fd=dirfd, follow_symlinks=False)
        if chmod:
            os.chmod(name, n.mode, dir_fd=dirfd)
        xa = dict(n.xattrs)
        for k, v in (n.oxattrs if self.form == "overlay"
                     else n.uxattrs).items():
            xa[self.ns + k] = v
        self.check_ambiguous(name, xa)
        for k in sorted(xa):
            self.setx(dirfd, name, k, xa[k])

    def times(self, dirfd, name, n):
        os.utime(name, ns=(n.mtime, n.mtime), dir_fd=dirfd,
                 follow_symlinks=False)

    def write(self, path, root):
        os.makedirs(path)
        rootfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.pass1(rootfd, root, ())
            for n, comps in self.links:
                tcomps = self.where[id(n)]
                sfd = open_dir(rootfd, tcomps[:-1])
                dfd = open_dir(rootfd, comps[:-1])
                try:
                    os.link(tcomps[-1], comps[-1], src_dir_fd=sfd,
                            dst_dir_fd=dfd, follow_symlinks=False)
                finally:
                    os.close(sfd)
                    os.close(dfd)
            self.pass3(rootfd, root, ())
        finally:
            os.close(rootfd)

    def pass1(self, rootfd, d, comps):
        fd = open_dir(rootfd, comps)
        try:
            for name in sorted(d.children):
                self.create(rootfd, fd, name, d.children[name],
                            comps + (name,))
            if self.form == "oci" and d.opaque == "y":
                os.close(os.open(b".wh..wh..opq", os.O_WRONLY | os.O_CREAT |
                                 os.O_EXCL, 0o644, dir_fd=fd))
                os.utime(b".wh..wh..opq", ns=(d.mtime, d.mtime), dir_fd=fd)
        finally:
            os.close(fd)
        for name in sorted(d.children):
            if is_dir(d.children[name]):
                self.pass1(rootfd, d.children[name], comps + (name,))

    def create(self, rootfd, fd, name, n, comps):
        k = n.kind
        if k == "h":
            self.links.append((n.link, comps))
            return
        if k == "w" and self.form == "overlay" and n.wgroup:
            if self.wnode is not None:
                self.links.append((self.wnode, comps))
                return
            self.wnode = n
        self.where[id(n)] = comps
        if k == "d":
            os.mkdir(name, 0o700, dir_fd=fd)
        elif k in ("f", "m", "xw"):
            wfd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                          0o600, dir_fd=fd)
            try:
                if k == "f":
                    for off, b in n.chunks:
                        os.pwrite(wfd, b, off)
                os.ftruncate(wfd, n.size)
            finally:
                os.close(wfd)
            self.meta(fd, name, n)
            if k == "m":
                self.setx(fd, name, self.ns + b"overlay.metacopy", b"")
                if n.redirect is not None:
                    self.setx(fd, name, self.ns + b"overlay.redirect",
                              n.redirect)
            elif k == "xw":
                self.setx(fd, name, self.ns + b"overlay.whiteout", b"")
            self.times(fd, name, n)
        elif k in ("l", "uw"):
            os.symlink(n.target, name, dir_fd=fd)
            self.meta(fd, name, n, chmod=False)
            if k == "uw":
                self.ambiguous = True
                self.setx(fd, name, b"trusted.union.whiteout", b"y")
            self.times(fd, name, n)
        elif k == "w" and self.form == "oci":
            wh = b".wh." + name
            os.close(os.open(wh, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                             0o644, dir_fd=fd))
            self.times(fd, wh, n)
        elif k == "w":
            if self.form == "overlay":
                os.mknod(name, stat.S_IFCHR | n.mode, os.makedev(0, 0),
                         dir_fd=fd)
                self.meta(fd, name, n)
            else:
                os.symlink(UW_TARGET, name, dir_fd=fd)
                os.chown(name, n.uid, n.gid, dir_fd=fd,
                         follow_symlinks=False)
                self.setx(fd, name, self.ns + b"union.whiteout", b"y")
            self.times(fd, name, n)
        elif k in ("p", "c", "b"):
            t = {"p": stat.S_IFIFO, "c": stat.S_IFCHR, "b": stat.S_IFBLK}[k]
            os.mknod(name, t | 0o600, os.makedev(*n.rdev), dir_fd=fd)
            self.meta(fd, name, n)
            self.times(fd, name, n)
        else:
            raise AssertionError(k)

    def pass3(self, rootfd, d, comps):
        for name in sorted(d.children):
            if is_dir(d.children[name]):
                self.pass3(rootfd, d.children[name], comps + (name,))
        pfd = open_dir(rootfd, comps[:-1]) if comps else None
        fd = open_dir(rootfd, comps)
        try:
            if comps:
                dirfd, name = pfd, comps[-1]
            else:
                dirfd, name = fd, b"."
            self.meta(dirfd, name, d)
            ns = self.ns + (b"overlay." if self.form == "overlay"
                            else b"union.")
            if self.form == "oci":
                pass        # "y" is the .wh..wh..opq file, "n" nothing
            elif d.opaque in ("y", "n"):
                self.setx(dirfd, name, ns + b"opaque",
                          d.opaque.encode())
            elif d.opaque == "x":
                assert self.form == "overlay"
                self.setx(dirfd, name, self.ns + b"overlay.opaque", b"x")
            if d.redirect is not None:
                assert self.form == "overlay"
                self.setx(dirfd, name, self.ns + b"overlay.redirect",
                          d.redirect)
            if self.form == "overlay" and getattr(d, "impure", False):
                self.setx(dirfd, name, self.ns + b"overlay.impure", b"y")
            self.times(dirfd, name, d)
        finally:
            os.close(fd)
            if pfd is not None:
                os.close(pfd)


# --------------------------------------------------------------- damage

# Every kind of damage --damage knows: (forms it applies to, the problem
# IDs fsck should report for it).  Each is made in the top layer, the one
# "hunion fsck" checks against those beneath.
DAMAGE = {
    "orphan-whiteout": (("overlay", "union"), "whiteoutOrphan"),
    "whiteout-unmerged": (("overlay", "union"), "whiteoutInUnmergedDir"),
    "lookalike-symlink": (("union",), "whiteoutUnmarked"),
    "whiteout-mark-misplaced": (("union",), "whiteoutMarkMisplaced"),
    "whiteout-mark-value": (("union",), "whiteoutMarkValue"),
    "opaque-mark-misplaced": (("overlay", "union"), "opaqueMarkMisplaced"),
    "opaque-mark-value": (("overlay", "union"), "opaqueMarkValue"),
    # overlayfs marks opaque the directories it makes itself, over
    # nothing or not: a redundant mark is a fault of the union format only
    "opaque-redundant": (("union",), "opaqueRedundant"),
    "leftover-temp": (("overlay", "union"), "hunionLeftover"),
    "leftover-lock": (("overlay", "union"), "hunionLeftover"),
    "foreign-whiteout": (("overlay", "union"), "formatMixed"),
    "foreign-oci-name": (("overlay", "union"), "formatMixed"),
    "foreign-opaque": (("overlay", "union"), "formatMixed"),
    "redirect-invalid": (("overlay",), "redirectInvalid"),
    "redirect-missing": (("overlay",), "redirectTargetMissing"),
    "redirect-on-file": (("overlay",), "redirectOnFile"),
    "redirect-shared": (("overlay",), "redirectShared"),
    "redirect-uncovered": (("overlay",), "redirectOriginUncovered"),
    "metacopy-bad-size": (("overlay",), "metacopyBadSize"),
    "metacopy-no-data": (("overlay",), "metacopyNoData"),
    "impure-missing": (("overlay",), "impureMissing"),
    "xwhiteout-top": (("overlay",), "xwhiteoutIgnored"),
    "namespace-mixed": (("overlay",), "namespaceMixed"),
}


class Damager:
    """Damage the top layer of form @form of a --healthy stack on disk,
    choosing targets with the model of @g (the same seed's).  Records
    each damage as (kind, problem ID, path, subtree): @subtree when what
    the view shows beneath the path may change with the repair too."""

    def __init__(self, g, form, root, r):
        self.g, self.form, self.r = g, form, r
        self.t = g.k - 1
        self.rootfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        self.ns = b"trusted."
        self.own = b"trusted.overlay." if form == "overlay" \
            else b"trusted.union."
        self.done = []          # (kind, id, comps, subtree)
        self.taken = set()      # paths already damaged (comps)
        self.n = 0
        top = g.layers[self.t]
        linked = {id(n.link) for _, n in g.walk_layer(self.t)
                  if n.kind == "h"}
        self.tdirs = [((), top)] + [(c, n) for c, n in g.walk_layer(self.t)
                                    if is_dir(n)]
        self.merging = []       # top dirs that merge with one below
        self.unmerged = []      # top dirs that merge with nothing
        for c, n in self.tdirs:
            kind, ents = g.klookup(self.t, c)
            if kind != "dir":
                continue
            (self.merging if len(ents) > 1 or c == () else
             self.unmerged).append((c, n))
        self.files = [(c, n) for c, n in g.walk_layer(self.t)
                      if n.kind == "f" and id(n) not in linked and
                      n.size > 0]
        self.metacopy = [(c, n) for c, n in g.walk_layer(self.t)
                         if n.kind == "m" and id(n) not in linked]
        # impure directories that need it: the kernel marks one that
        # holds a redirected directory or file (or one with an origin,
        # which the generator never writes); a metacopy file with
        # neither does not need it
        self.impure = [(c, n) for c, n in self.tdirs
                       if getattr(n, "impure", False) and
                       any(ch.redirect is not None and
                           (is_dir(ch) or ch.kind == "m")
                           for ch in n.children.values())]
        # symlinks: a redirect on a regular file is the kernel's own
        # (copying up a renamed metacopy file's data keeps it), on a
        # symlink it is nobody's
        self.symlinks = [(c, n) for c, n in g.walk_layer(self.t)
                         if n.kind == "l" and id(n) not in linked]
        # redirected directories of the top layer, with their origin
        self.redirected = []
        for c, n in self.tdirs:
            if c and n.redirect is not None:
                origin = tuple(n.redirect[1:].split(b"/")) \
                    if n.redirect[:1] == b"/" else c[:-1] + (n.redirect,)
                self.redirected.append((c, n, origin))
        # names the layers beneath show, in a directory of the top layer
        # that does not have them
        self.below = []
        for c, kind, ents in g.visible(self.t):
            pd = g.get(self.t, c[:-1])
            if ents[0][0] < self.t and is_dir(pd) and \
                    c[-1] not in pd.children:
                self.below.append((c, kind))
        self.data_below = [c for c, kind in self.below if kind == "file" and
                           real(g.klookup(self.t, c)[1][-1][1]).kind == "f"]

    def close(self):
        os.close(self.rootfd)

    def fresh(self):
        self.n += 1
        return b"dmg-%d" % self.n

    def pick(self, seq):
        seq = [x for x in seq if x[0] not in self.taken]
        return self.r.choice(seq) if seq else None

    # keep the times of the directory an entry is added to (the view
    # shows the top layer's directory: it must not change)
    def in_dir(self, comps, fn):
        fd = open_dir(self.rootfd, comps)
        try:
            st = os.stat(fd)
            fn(fd)
            os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(fd)

    def setx(self, comps, k, v):
        fd = open_dir(self.rootfd, comps[:-1])
        try:
            os.setxattr(procpath(fd, comps[-1]), k, v, follow_symlinks=False)
        finally:
            os.close(fd)

    def whiteout(self, fd, name, form):
        if form == "overlay":
            os.mknod(name, stat.S_IFCHR | 0o644, os.makedev(0, 0), dir_fd=fd)
        else:
            os.symlink(UW_TARGET, name, dir_fd=fd)
            os.setxattr(procpath(fd, name), b"trusted.union.whiteout", b"y",
                        follow_symlinks=False)

    def record(self, kind, comps, subtree=False, pid=None):
        """@pid "-": a path the damage changes, where fsck is not
        expected to report it (the name an OCI whiteout hides)."""
        self.taken.add(comps)
        self.done.append((kind, pid or DAMAGE[kind][1], comps, subtree))
        return True

    def apply(self, kind):
        """Make one damage of @kind; False when the stack offers no
        target for it."""
        g, r = self.g, self.r
        if kind in ("orphan-whiteout", "whiteout-unmerged"):
            # a whiteout of a fresh name: in a directory that merges, it
            # hides nothing; in one that does not, the kernel lists it
            d = self.pick(self.merging if kind == "orphan-whiteout" else
                          self.unmerged)
            if d is None:
                return False
            name = self.fresh()
            self.in_dir(d[0], lambda fd: self.whiteout(fd, name, self.form))
            return self.record(kind, d[0] + (name,))
        if kind in ("lookalike-symlink", "whiteout-mark-value",
                    "foreign-whiteout", "foreign-oci-name", "xwhiteout-top"):
            # something in place of a name the layers beneath show: a
            # whiteout of it, meant or mangled
            c = self.pick(self.below)
            if c is None:
                return False
            comps = c[0]
            name = comps[-1]
            if kind == "foreign-oci-name" and len(name) > 251:
                return False

            def make(fd):
                if kind == "lookalike-symlink":
                    os.symlink(UW_TARGET, name, dir_fd=fd)
                elif kind == "whiteout-mark-value":
                    os.symlink(UW_TARGET, name, dir_fd=fd)
                    os.setxattr(procpath(fd, name), b"trusted.union.whiteout",
                                r.choice([b"n", b"yes", b"1"]),
                                follow_symlinks=False)
                elif kind == "foreign-whiteout":
                    self.whiteout(fd, name, "union" if self.form == "overlay"
                                  else "overlay")
                elif kind == "foreign-oci-name":
                    os.close(os.open(b".wh." + name, os.O_WRONLY |
                                     os.O_CREAT | os.O_EXCL, 0o644,
                                     dir_fd=fd))
                else:
                    os.close(os.open(name, os.O_WRONLY | os.O_CREAT |
                                     os.O_EXCL, 0o644, dir_fd=fd))
                    os.setxattr(procpath(fd, name),
                                b"trusted.overlay.whiteout", b"",
                                follow_symlinks=False)
            self.in_dir(comps[:-1], make)
            if kind == "foreign-oci-name":
                self.record(kind, comps[:-1] + (b".wh." + name,))
                return self.record(kind, comps, True, "-")
            return self.record(kind, comps, True)
        if kind == "whiteout-mark-misplaced":
            f = self.pick(self.files)
            if f is None:
                return False
            self.setx(f[0], b"trusted.union.whiteout", b"y")
            return self.record(kind, f[0])
        if kind == "opaque-mark-misplaced":
            f = self.pick(self.files)
            if f is None:
                return False
            self.setx(f[0], self.own + b"opaque", b"y")
            return self.record(kind, f[0])
        if kind == "opaque-mark-value":
            d = self.pick([x for x in self.merging
                           if x[0] and x[1].opaque is None])
            if d is None:
                return False
            self.setx(d[0], self.own + b"opaque", r.choice([b"1", b"yes",
                                                            b"Y"]))
            return self.record(kind, d[0])
        if kind in ("opaque-redundant", "redirect-missing"):
            d = self.pick(self.merging)
            if d is None:
                return False
            name = self.fresh()

            def make(fd):
                os.mkdir(name, 0o755, dir_fd=fd)
                if kind == "opaque-redundant":
                    os.setxattr(procpath(fd, name), self.own + b"opaque",
                                b"y", follow_symlinks=False)
                else:
                    os.setxattr(procpath(fd, name),
                                b"trusted.overlay.redirect",
                                b"/no-such-%s/%s" % (name, name),
                                follow_symlinks=False)
            self.in_dir(d[0], make)
            return self.record(kind, d[0] + (name,))
        if kind in ("leftover-temp", "leftover-lock"):
            d = self.pick(self.tdirs)
            if d is None:
                return False
            base = self.r.choice(sorted(d[1].children) or [b"out"])
            if len(base) > 200:
                base = b"out"
            name = b".%s.hunion-%s" % (base, b"lock" if kind ==
                                       "leftover-lock" else
                                       b"%06x" % r.randrange(1 << 24))

            def make(fd):
                f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                            0o600, dir_fd=fd)
                if kind == "leftover-temp":
                    os.write(f, b"half written")
                os.close(f)
            self.in_dir(d[0], make)
            return self.record(kind, d[0] + (name,))
        if kind == "foreign-opaque":
            # the other format's opaque mark on a directory: the repair
            # makes it opaque in the layer's format
            d = self.pick([x for x in self.merging
                           if x[0] and x[1].opaque is None and
                           x[1].redirect is None])
            if d is None:
                return False
            other = b"trusted.union." if self.form == "overlay" \
                else b"trusted.overlay."
            self.setx(d[0], other + b"opaque", b"y")
            return self.record(kind, d[0], True)
        if kind == "redirect-invalid":
            d = self.pick([x for x in self.merging
                           if x[0] and x[1].redirect is None])
            if d is None:
                return False
            self.setx(d[0], b"trusted.overlay.redirect",
                      r.choice([b"a/b", b".", b"..", b""]))
            return self.record(kind, d[0], True)
        if kind == "redirect-on-file":
            f = self.pick(self.symlinks)
            if f is None:
                return False
            self.setx(f[0], b"trusted.overlay.redirect", b"/" + f[0][-1])
            return self.record(kind, f[0])
        if kind == "redirect-shared":
            # a second directory redirecting to the origin of one
            rd = self.pick([x for x in self.redirected
                            if x[1].redirect[:1] == b"/"])
            d = self.pick(self.merging)
            if rd is None or d is None:
                return False
            name = self.fresh()

            def make(fd):
                os.mkdir(name, 0o755, dir_fd=fd)
                os.setxattr(procpath(fd, name), b"trusted.overlay.redirect",
                            rd[1].redirect, follow_symlinks=False)
            self.in_dir(d[0], make)
            # either of the two may lose its redirect
            self.record(kind, rd[0], True, "-")
            return self.record(kind, d[0] + (name,), True)
        if kind == "redirect-uncovered":
            # the whiteout or opaque mark that covers a redirect's origin
            # in its layer taken away: the kernel answers ESTALE
            rd = self.pick([x for x in self.redirected
                            if x[2] not in self.taken])
            if rd is None:
                return False
            cover = g.get(self.t, rd[2])
            if cover is None or cover.kind not in ("w", "d"):
                return False
            if cover.kind == "d" and cover.opaque != "y":
                return False
            if cover.kind == "w":
                self.in_dir(rd[2][:-1], lambda fd: os.unlink(rd[2][-1],
                                                             dir_fd=fd))
            else:
                fd = open_dir(self.rootfd, rd[2])
                try:
                    os.removexattr(fd, b"trusted.overlay.opaque")
                finally:
                    os.close(fd)
            self.record(kind, rd[0], True, "-")
            return self.record(kind, rd[2], True)
        if kind == "metacopy-bad-size":
            m = self.pick(self.metacopy)
            if m is None:
                return False
            self.setx(m[0], b"trusted.overlay.metacopy",
                      bytes(r.randrange(1, 256) for _ in
                            range(r.randint(1, 3))))
            return self.record(kind, m[0], True)
        if kind == "metacopy-no-data":
            d = self.pick(self.merging)
            if d is None:
                return False
            name = self.fresh()

            def make(fd):
                f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                            0o644, dir_fd=fd)
                os.write(f, b"own bytes")
                os.close(f)
                os.setxattr(procpath(fd, name), b"trusted.overlay.metacopy",
                            b"", follow_symlinks=False)
            self.in_dir(d[0], make)
            return self.record(kind, d[0] + (name,))
        if kind == "impure-missing":
            d = self.pick(self.impure)
            if d is None:
                return False
            fd = open_dir(self.rootfd, d[0])
            try:
                os.removexattr(fd, b"trusted.overlay.impure")
            finally:
                os.close(fd)
            return self.record(kind, d[0])
        if kind == "namespace-mixed":
            # a mix only beside trusted.overlay.* markers of the layer
            # (user.overlay.* alone would be a layer of the other
            # namespace, which the mount option decides)
            if not any(n.opaque or n.redirect is not None or
                       getattr(n, "impure", False) or n.kind in ("m", "xw")
                       for _, n in g.walk_layer(self.t)):
                return False
            d = self.pick([x for x in self.merging
                           if x[0] and x[1].opaque is None and
                           x[1].redirect is None])
            if d is None:
                return False
            self.setx(d[0], b"user.overlay.opaque", b"y")
            return self.record(kind, d[0], True)
        raise AssertionError(kind)


def damage(a):
    """--damage: the stack in --out was written by the same arguments
    with --healthy; damage the top layer of its overlay and union forms
    and write FORM/damage.txt: one line per damage, KIND, the problem ID
    expected ("-": none, the path is changed by a damage reported at
    another path), 1 when the view beneath its path may change with the
    repair (0: the path alone), the path in hex ("-" for the root) and
    escaped as manifest.py escapes it."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from manifest import escape
    g = Gen(a.seed, a.layers, a.features, not a.no_odd_names, healthy=True)
    g.generate()
    g.healthy_prune()
    with open(os.path.join(a.out, "info.json")) as f:
        forms = json.load(f)["forms"]
    r = random.Random(a.seed * 104729 + 17)
    kinds_wanted = a.damage_kinds.split(",") if a.damage_kinds else None
    for form in forms:
        if form not in ("overlay", "union"):
            continue
        kinds = [k for k, (fs, _) in sorted(DAMAGE.items())
                 if form in fs and (not kinds_wanted or k in kinds_wanted)]
        dm = Damager(g, form, os.path.join(a.out, form, "L%d" % (g.k - 1)),
                     r)
        try:
            chosen = kinds if kinds_wanted else \
                r.sample(kinds, min(len(kinds), r.randint(3, 8)))
            for kind in chosen:
                for _ in range(r.choice([1, 1, 2])):
                    dm.apply(kind)
        finally:
            dm.close()
        with open(os.path.join(a.out, form, "damage.txt"), "w") as f:
            for kind, pid, comps, sub in dm.done:
                path = b"/".join(comps)
                f.write("%s %s %d %s %s\n" % (
                    kind, pid, int(sub), path.hex() or "-",
                    escape(path) if path else "."))
        print("%s: %d damaged" % (form, len(dm.done)))
    return 0


def main():
    ap = argparse.ArgumentParser(description="random layer stack")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=0)
    ap.add_argument("--features", default="auto",
                    choices=["auto", "common", "overlay-only"])
    ap.add_argument("--no-odd-names", action="store_true")
    ap.add_argument("--userxattr", action="store_true",
                    help="markers under user.overlay.* (overlay form only)")
    ap.add_argument("--healthy", action="store_true",
                    help="nothing hunion fsck reports: no lookalikes, no "
                    "whiteouts that hide nothing, impure marks")
    ap.add_argument("--damage", action="store_true",
                    help="damage the top layer of the --healthy stack "
                    "already in --out (the same arguments wrote it); "
                    "FORM/damage.txt says where")
    ap.add_argument("--damage-kinds", metavar="K,K",
                    help="with --damage: these kinds (each once), not a "
                    "random choice")
    ap.add_argument("--fixed", metavar="NAME",
                    help="a fixed stack instead: deep, opaque-root, "
                    "xwhiteout-anywhere")
    a = ap.parse_args()
    if a.layers and not 2 <= a.layers <= 8:
        ap.error("--layers must be 2..8")
    if a.damage:
        return damage(a)
    g = Gen(a.seed, a.layers, a.features, not a.no_odd_names,
            healthy=a.healthy)
    g.userxattr = a.userxattr
    if a.fixed:
        feats, forms = g.fixed(a.fixed)
    else:
        feats = g.generate()
        if a.healthy:
            g.healthy_prune()
        forms = ["overlay"] if g.ovl_only or a.userxattr \
            else ["overlay", "union"]
        if "union" in forms and g.oci_ok():
            forms.append("oci")
    amb = {}
    for form in forms:
        amb[form] = False
        for li, root in enumerate(g.layers):
            w = Writer(form, a.userxattr)
            w.write(os.path.join(a.out, form, "L%d" % li), root)
            amb[form] = amb[form] or w.ambiguous
    info = dict(seed=a.seed, layers=g.k, forms=forms, features=feats,
                ambiguous=amb, userxattr=a.userxattr, counts=g.counts())
    with open(os.path.join(a.out, "info.json"), "w") as f:
        json.dump(info, f, sort_keys=True)
        f.write("\n")
    print("forms: " + " ".join(forms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
