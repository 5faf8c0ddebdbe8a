#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fsck_damage.py - what tests/kernel/fsck-damage.sh asks of a damaged stack.

  fsck_damage.py caught DAMAGE.txt FSCK.json
      For each damage mkstack.py --damage made (DAMAGE.txt, see there),
      whether "hunion fsck -y --json" (FSCK.json, one object per line)
      reported a problem at its path: one line "caught KIND ID PATH",
      "caught KIND ID PATH at ." (the problem expected, reported at the
      layer's root: a problem of the whole layer), "caught KIND ID PATH
      at its partner" (reported at the other path the damage changed,
      the line before or after with ID "-"),
      "caught KIND ID PATH as OTHER-ID[,...]" (a problem at the path, not
      the one expected) or "missed KIND ID PATH".  Exit 0.

  fsck_damage.py healthy HEALTHY.txt REPAIRED.txt DAMAGE.txt
      HEALTHY and REPAIRED are manifest.py listings of the merged view
      before the damage and after the repair.  Every entry the damage did
      not touch (not a damaged path, nor beneath one whose line says the
      view beneath may change) must be the same in both, and no entry may
      appear outside those paths.  Prints the first differences; exit 1
      when there are any.
"""

import json
import sys


def damages(path):
    out = []
    with open(path) as f:
        for line in f:
            kind, pid, sub, hexpath, esc = line.split()
            raw = b"" if hexpath == "-" else bytes.fromhex(hexpath)
            out.append((kind, pid, sub == "1", raw, esc))
    return out


def caught(dpath, fpath):
    found = {}
    with open(fpath) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            o = json.loads(line)
            if "id" not in o:
                continue
            p = o["path"].encode("utf-8", "surrogateescape")
            found.setdefault(b"" if p == b"." else p, []).append(o["id"])
    ds = damages(dpath)
    for i, (kind, pid, _, raw, esc) in enumerate(ds):
        if pid == "-":
            continue
        ids = found.get(raw, [])
        # a path changed by the same damage (the line before or after,
        # "-"): the problem may be reported there (of two directories
        # redirecting to one origin, either is the one in the way)
        partners = [d[3] for d in (ds[i - 1:i] + ds[i + 1:i + 2])
                    if d[0] == kind and d[1] == "-"]
        if pid in ids:
            print("caught %s %s %s" % (kind, pid, esc))
        elif any(pid in found.get(p, []) for p in partners):
            print("caught %s %s %s at its partner" % (kind, pid, esc))
        elif pid in found.get(b"", []):
            # a problem of the whole layer (both namespaces in use),
            # reported at its root
            print("caught %s %s %s at ." % (kind, pid, esc))
        elif ids:
            print("caught %s %s %s as %s" % (kind, pid, esc,
                                             ",".join(sorted(set(ids)))))
        else:
            print("missed %s %s %s" % (kind, pid, esc))
    return 0


def listing(path):
    """{path: line} and {path: its hard-link group's label}."""
    out, link = {}, {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            p = line.split(" ", 1)[0]
            out[p] = line
            for tok in line.split(" "):
                if tok.startswith("link="):
                    link[p] = tok[5:]
    return out, link


def unlinked(line):
    return " ".join(t for t in line.split(" ")
                    if not t.startswith("link=")) if line else line


def healthy(hpath, rpath, dpath):
    (h, hl), (r, rl) = listing(hpath), listing(rpath)
    touched, under = set(), []
    for _, _, sub, _, esc in damages(dpath):
        touched.add(esc)
        if sub:
            under.append(esc + "/")

    def spared(p):
        return p not in touched and not any(p.startswith(u) for u in under)
    # a hard-link group that lost or gained a touched member changes
    # the labels of its spared members: the rest of their lines must not
    groups = {}
    for links in (hl, rl):
        for p, first in links.items():
            groups.setdefault((id(links), first), set()).add(p)
    touched_group = set()
    for (which, first), members in groups.items():
        if not all(spared(m) for m in members):
            touched_group |= members
    bad = []
    for p in sorted(set(h) | set(r)):
        if not spared(p) or h.get(p) == r.get(p):
            continue
        if p in touched_group and unlinked(h.get(p)) == unlinked(r.get(p)):
            continue
        bad.append((p, h.get(p), r.get(p)))
    for p, a, b in bad[:12]:
        print("    healthy: %s" % (a or "(absent)")[:300])
        print("    repaired: %s" % (b or "(absent)")[:300])
    if bad:
        print("  %d healthy entries changed" % len(bad))
    return 1 if bad else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "caught":
        return caught(argv[2], argv[3])
    if len(argv) == 5 and argv[1] == "healthy":
        return healthy(argv[2], argv[3], argv[4])
    print(__doc__.strip().split("\n\n")[0], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
