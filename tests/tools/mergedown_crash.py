#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""mergedown_crash.py [--kernel=OPTS] [--fault=OP] [ARG...] -- HUNION LAYER...
- merge the top layer down at every step, killed there, and re-run.

LAYER... is a stack, bottom first.  The reference is its merged view: the
kernel's (mount -t overlay -o OPTS,lowerdir=..., read only) with
--kernel=OPTS, else `hunion merge -o` (a union stack).  Then, on fresh
copies of the stack (cp -a):
  - `HUNION merge --into -q ARG... LAYER...` run clean: it must succeed,
    and the number of changes it makes is counted (the N at which
    HUNION_FAULT=kill:N no longer kills it);
  - for every N from 1 to that number: the run killed at N, then run
    again without a fault: the re-run must succeed, and
  - after every finished run (clean or killed and re-run): the stack
    without its top layer shows the reference view (the kernel's, with
    no mount options, when --kernel is given; `hunion merge -o` for
    union), the top layer is empty (its root kept), no private state of
    the merge is left anywhere (.hunion-md.* names, *.union.mergedown-*
    xattrs), the target holds no private xattr it did not hold but
    whiteout, opaque and redirect markers and the impure marks of the
    redirects' parents (none at all in a two-layer stack), and
    the layers beneath the target are unchanged byte for byte.
With --keep-upper among ARG...: the top layer is unchanged byte for byte
instead (xattr values too), but for the record *.union.mergedown-kept on
its root, which may be left saying "merged DEV:INO"; and after the clean
run a second one must change no layer where that record is there (an
upper merged through a clone), else pass the same checks.
With --kill-names: also right after each kill, before the re-run, the view
of the whole stack (the top layer included) shows no name of ours
(.hunion-md.*).  With --kill-view: that view is also the reference view
but for the times of directories (put back when the run is done), for a
stack without redirected directories (their moves are the steps that
change it, written down first).  With --temps-shown, the temporary names
of copies are let through (--keep-upper's, which the view shows).
With --clean-only: the clean run alone (the kernel proof of random stacks).
With --fault=OP: also HUNION_FAULT=OP:N:ENOSPC for each N until a run gets
through, each failed run then re-run.
Prints one line per mode.  Exit status 1 when any check failed.
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import manifest  # noqa: E402

OPTS = dict(no_dir_mtime=False, no_mtime=False, no_xattrs=False,
            no_owner=False, holes=False)


def walk_manifest(top, dir_times=True):
    return manifest.Walker(dict(OPTS, no_dir_mtime=not dir_times)).run(
        os.fsencode(top))


def is_temp(row):
    """Is manifest @row an entry under a temporary name of ours?"""
    path = row.split(" ", 1)[0]
    return any(c.startswith(".hunion-md.") for c in path.split("/"))


def private_rows(top):
    """(path, xattr) of every private xattr, and every name of ours."""
    rows, ours = set(), []
    for dirpath, dirs, files in os.walk(top):
        for name in [""] + sorted(dirs + files):
            p = os.path.join(dirpath, name) if name else dirpath
            rel = os.path.relpath(p, top)
            if name.startswith(".hunion-md."):
                ours.append("name " + rel)
            try:
                names = os.listxattr(p, follow_symlinks=False)
            except OSError:
                names = []
            for x in names:
                if ".union.mergedown" in x:
                    ours.append("xattr %s %s" % (rel, x))
                if x.split(".")[1:2] in (["overlay"], ["union"]):
                    rows.add((rel, x))
    return rows, ours


def counts(rows):
    """How many entries carry each private xattr (paths change when a
    redirected directory moves)."""
    c = {}
    for _, x in rows:
        c[x] = c.get(x, 0) + 1
    return c


KEPT = ".union.mergedown-kept"


def layer_bytes(top, values=False):
    """A layer byte for byte: the manifest, private xattrs included (with
    @values, theirs too, but the kept record's)."""
    rows, _ = private_rows(top)
    out = []
    for rel, x in sorted(rows):
        v = ""
        if values and not x.endswith(KEPT):
            v = " " + os.getxattr(os.path.join(top, rel), x,
                                  follow_symlinks=False).hex()
        out.append("%s %s%s" % (rel, x, v))
    return walk_manifest(top) + out


def kept_record(top):
    """The value of the kept record on @top's root, or None."""
    for x in os.listxattr(top):
        if x.endswith(KEPT):
            return os.getxattr(top, x).decode(errors="replace")
    return None


def hunion_view(hunion, layers, tmp, args, dir_times=True):
    out = tempfile.mkdtemp(dir=tmp) + "/view"
    r = subprocess.run([hunion, "merge", "-q", "-o", out] + [
        a for a in args if a.startswith(("--format", "--userxattr"))] +
        layers,
                       capture_output=True)
    if r.returncode != 0:
        return ["merge -o failed: " + r.stderr.decode(errors="replace")]
    return walk_manifest(out, dir_times)


def kernel_view(layers, opts, tmp, dir_times=True):
    """The kernel's read-only view of @layers (bottom first).  One layer
    alone is mounted over an empty one (the kernel wants two)."""
    mnt = tempfile.mkdtemp(dir=tmp)
    if len(layers) == 1:
        layers = [tempfile.mkdtemp(dir=tmp)] + layers
    o = "%slowerdir=%s" % (opts + "," if opts else "", ":".join(
        os.path.abspath(x) for x in reversed(layers)))
    r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", o, mnt],
                       capture_output=True)
    if r.returncode != 0:
        return ["mount failed: " + r.stderr.decode(errors="replace")]
    try:
        return walk_manifest(mnt, dir_times)
    finally:
        subprocess.run(["umount", mnt], check=True)


def copy(layers, tmp):
    top = tempfile.mkdtemp(dir=tmp)
    out = []
    for i, layer in enumerate(layers):
        dst = "%s/L%d" % (top, i)
        subprocess.run(["cp", "-a", layer, dst], check=True)
        out.append(dst)
    return out


def run(hunion, args, layers, fault=None):
    env = dict(os.environ)
    env.pop("HUNION_FAULT", None)
    if fault:
        env["HUNION_FAULT"] = fault
    return subprocess.run([hunion, "merge", "--into", "-q"] + args + layers,
                          env=env, capture_output=True)


def diff(what, want, got):
    a, b = set(want), set(got)
    return ["  %s: - %s" % (what, x) for x in sorted(a - b)] + \
        ["  %s: + %s" % (what, x) for x in sorted(b - a)]


class Check:
    def __init__(self, hunion, layers, kernel, tmp, args):
        self.hunion, self.kernel, self.tmp = hunion, kernel, tmp
        self.args = args
        self.keep = "--keep-upper" in args
        self.layers, self.want_untimed = layers, None
        self.top = layer_bytes(layers[-1], True)
        self.n = len(layers)
        if kernel is not None:
            self.want = kernel_view(layers, kernel, tmp)
        else:
            self.want = hunion_view(hunion, layers, tmp, args)
        self.below = [layer_bytes(x) for x in layers[:-2]]
        rows, _ = private_rows(layers[-2])
        self.target_private = counts(rows)
        # The stack after needs the options its own layers need (their
        # own redirects and metacopy files), and no more.
        self.after_opts = ""
        for layer in layers[:-1]:
            rows, _ = private_rows(layer)
            if any(x.endswith((".redirect", ".metacopy")) for _, x in rows):
                self.after_opts = kernel
        if kernel and "userxattr" in kernel:
            self.after_opts = "userxattr"

    def killed(self, what, layers, full, temps_shown):
        """The checks of a killed run's stack @layers, before the re-run:
        the whole stack's view shows no name of ours (with @temps_shown,
        but the copies' temporary names) and, with @full, the reference
        view, but for directory times."""
        got = self.view(layers, False)
        ours = [x for x in got if is_temp(x)]
        problems = [] if temps_shown else [
            "  %s: the view shows %s" % (what, x.split(" ", 1)[0])
            for x in ours]
        if full:
            if self.want_untimed is None:
                self.want_untimed = self.view(self.layers, False)
            problems += diff(what + ": view", self.want_untimed,
                             [x for x in got if not is_temp(x)])
        return problems

    def view(self, layers, dir_times, opts=None):
        """The view of stack @layers: the kernel's (with @opts, else the
        reference's options) or hunion's."""
        if self.kernel is None:
            return hunion_view(self.hunion, layers, self.tmp, self.args,
                               dir_times)
        return kernel_view(layers, self.kernel if opts is None else opts,
                           self.tmp, dir_times)

    def after(self, what, layers):
        """Every check of a finished merge-down of copy @layers."""
        rest = layers[:-1]
        got = kernel_view(rest, self.after_opts, self.tmp) \
            if self.kernel is not None \
            else hunion_view(self.hunion, rest, self.tmp, self.args)
        problems = diff(what + ": view", self.want, got)
        if self.keep:
            problems += diff(what + ": upper", [
                x for x in self.top if not x.endswith(KEPT)], [
                    x for x in layer_bytes(layers[-1], True)
                    if not x.endswith(KEPT)])
            kept = kept_record(layers[-1])
            if kept is not None and not kept.startswith("merged "):
                problems.append("  %s: the record says %s" % (what, kept))
        elif os.listdir(layers[-1]):
            problems.append("  %s: the upper is not empty: %s" % (
                what, sorted(os.listdir(layers[-1]))))
        for layer in layers:
            _, ours = private_rows(layer)
            problems += ["  %s: left: %s" % (what, x) for x in ours
                         if not (self.keep and layer == layers[-1] and
                                 x.startswith("xattr . ") and
                                 x.endswith(KEPT))]
        rows, _ = private_rows(layers[-2])
        for x, n in sorted(counts(rows).items()):
            extra = n - self.target_private.get(x, 0)
            if extra > 0 and (self.n == 2 or not x.endswith(
                    (".opaque", ".whiteout", ".redirect", ".impure"))):
                problems.append("  %s: %d more %s in the target: %s" % (
                    what, extra, x, " ".join(sorted(
                        p for p, y in rows if y == x))[:200]))
        for i, want in enumerate(self.below):
            problems += diff("%s: layer %d" % (what, i), want,
                             layer_bytes(layers[i]))
        return problems


def main(argv):
    kernel, fault, args, kills = None, None, [], True
    kill_view, kill_names, temps_shown = False, False, False
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    sep = argv.index("--")
    for a in argv[1:sep]:
        if a.startswith("--kernel="):
            kernel = a[len("--kernel="):]
        elif a.startswith("--fault="):
            fault = a[len("--fault="):]
        elif a == "--kill-view":
            kill_view = True
        elif a == "--kill-names":
            kill_names = True
        elif a == "--temps-shown":
            temps_shown = True
        elif a == "--clean-only":
            kills = False
        else:
            args.append(a)
    hunion, layers = argv[sep + 1], argv[sep + 2:]
    bad = False
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        chk = Check(hunion, layers, kernel, tmp, args)
        work = copy(layers, tmp)
        r = run(hunion, args, work)
        if r.returncode != 0:
            print("the clean run failed: %s" %
                  r.stderr.decode(errors="replace"))
            return 1
        problems = chk.after("clean run", work)
        if chk.keep:
            # through a clone (the record says so) it does nothing; a
            # plain copy again keeps the view
            spent = kept_record(work[-1]) is not None
            before = [layer_bytes(x, True) for x in work]
            r = run(hunion, args, work)
            if r.returncode != 0:
                problems.append("  a second run failed: %s" %
                                r.stderr.decode(errors="replace").strip())
            elif not spent:
                problems += chk.after("second run", work)
            for i, x in enumerate(work if spent else []):
                problems += diff("second run: layer %d" % i, before[i],
                                 layer_bytes(x, True))
        print("clean run: %s" % ("the view kept, nothing private left, "
                                 "the layers beneath unchanged"
                                 if not problems else "FAILED"))
        for p in problems[:20]:
            print(p)
        bad = bad or bool(problems)
        for op in (["kill"] if kills else []) + ([fault] if fault else []):
            n, problems = 0, []
            while n < 2000:
                n += 1
                work = copy(layers, tmp)
                spec = "kill:%d" % n if op == "kill" else \
                    "%s:%d:ENOSPC" % (op, n)
                r = run(hunion, args, work, spec)
                if r.returncode == 0:
                    break
                if (kill_view or kill_names) and op == "kill":
                    problems += chk.killed("after " + spec, work,
                                           kill_view, temps_shown)
                r = run(hunion, args, work)
                if r.returncode != 0:
                    problems.append("  re-run after %s: %s" % (
                        spec, r.stderr.decode(errors="replace").strip()))
                    continue
                problems += chk.after("after %s and a re-run" % spec, work)
            print("%s: %d interrupted run%s%s" % (
                op, n - 1, "" if n == 2 else "s",
                ", each finished by a re-run: the view kept, nothing "
                "private left" if not problems else ""))
            for p in problems[:20]:
                print(p)
            bad = bad or bool(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
