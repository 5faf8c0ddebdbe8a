#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""convert_crash.py [--kill-only] [--kernel=OPTS] HUNION LOWER SOURCE ARG...
- interrupt a conversion at
every step, and check what each interrupted run leaves.

Runs `HUNION whiteout convert --in-place ARG... COPY` on fresh copies of the
layer SOURCE, first to the end (the clean conversion), then once for each
N with HUNION_FAULT=kill:N (SIGKILL before the Nth change) and with
HUNION_FAULT=OP:N for each write operation OP (the Nth call of OP fails),
until a run gets through (with --kill-only, only the former).  After each interrupted run:
  - the merged view of LOWER + the copy (hunion merge -o, compared as
    tests/tools/manifest.py manifests) is the view of LOWER + SOURCE;
  - running the same command again succeeds, and leaves the copy equal
    to the clean conversion: every entry, its type, mode, times, data and
    all its xattrs (the private union/overlay ones too).
With --kernel=OPTS (an overlay target), the kernel's overlayfs also mounts
LOWER under the clean conversion (mount -t overlay -o OPTS,...), and its
view must be the same.
Prints one line per mode: how many interrupted runs, and each difference.
Exit status 1 when any check failed.
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import manifest  # noqa: E402

OPS = ("kill", "mknod", "symlink", "create", "unlink", "rename", "setxattr",
       "removexattr", "utimens")


def view(hunion, lower, layer, tmp):
    out = tempfile.mkdtemp(dir=tmp) + "/view"
    r = subprocess.run([hunion, "merge", "-o", out, lower, layer],
                       capture_output=True)
    if r.returncode != 0:
        return ["merge failed: " + r.stderr.decode(errors="replace")]
    return manifest.Walker(dict(no_dir_mtime=False, no_mtime=False,
                                no_xattrs=False, no_owner=False,
                                holes=False)).run(os.fsencode(out))


def private_xattrs(top):
    """Every xattr of every entry, the private ones included."""
    rows = []
    for dirpath, dirs, files in os.walk(top):
        for name in [""] + sorted(dirs + files):
            p = os.path.join(dirpath, name) if name else dirpath
            try:
                names = sorted(os.listxattr(p, follow_symlinks=False))
            except OSError:
                names = []
            for x in names:
                v = os.getxattr(p, x, follow_symlinks=False)
                rows.append("%s %s=%s" % (os.path.relpath(p, top), x,
                                          v.hex()))
    return rows


def layer(top):
    return manifest.Walker(dict(no_dir_mtime=False, no_mtime=False,
                                no_xattrs=False, no_owner=False,
                                holes=False)).run(os.fsencode(top)) + \
        private_xattrs(top)


def copy(src, tmp):
    dst = tempfile.mkdtemp(dir=tmp) + "/layer"
    subprocess.run(["cp", "-a", src, dst], check=True)
    return dst


def convert(hunion, args, target, fault=None):
    env = dict(os.environ)
    env.pop("HUNION_FAULT", None)
    if fault:
        env["HUNION_FAULT"] = fault
    return subprocess.run([hunion, "whiteout", "convert", "-q",
                           "--in-place"] + args + [target], env=env,
                          capture_output=True)


def kernel_view(lower, layer, opts, tmp):
    """The kernel's view of LOWER under (a copy of) LAYER."""
    top = tempfile.mkdtemp(dir=tmp)
    up, work, mnt = top + "/up", top + "/work", top + "/mnt"
    subprocess.run(["cp", "-a", layer, up], check=True)
    os.mkdir(work)
    os.mkdir(mnt)
    o = "%slowerdir=%s,upperdir=%s,workdir=%s" % (
        opts + "," if opts else "", os.path.abspath(lower), up, work)
    r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", o, mnt],
                       capture_output=True)
    if r.returncode != 0:
        return ["mount failed: " + r.stderr.decode(errors="replace")]
    try:
        return manifest.Walker(dict(no_dir_mtime=False, no_mtime=False,
                                    no_xattrs=False, no_owner=False,
                                    holes=False)).run(os.fsencode(mnt))
    finally:
        subprocess.run(["umount", mnt], check=True)


def diff(what, want, got):
    a, b = set(want), set(got)
    return ["  %s: - %s" % (what, x) for x in sorted(a - b)] + \
        ["  %s: + %s" % (what, x) for x in sorted(b - a)]


def main(argv):
    ops, kernel = OPS, None
    while len(argv) > 1 and argv[1].startswith("--"):
        if argv[1] == "--kill-only":
            ops = OPS[:1]
        elif argv[1].startswith("--kernel="):
            kernel = argv[1][len("--kernel="):]
        argv = argv[:1] + argv[2:]
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    hunion, lower, source, args = argv[1], argv[2], argv[3], argv[4:]
    bad = False
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        want_view = view(hunion, lower, source, tmp)
        work = copy(source, tmp)
        r = convert(hunion, args, work)
        if r.returncode != 0:
            print("the clean conversion failed: %s" %
                  r.stderr.decode(errors="replace"))
            return 1
        want_layer = layer(work)
        if kernel is not None:
            problems = diff("the kernel's view", want_view,
                            kernel_view(lower, work, kernel, tmp))
            print("kernel: the view of the clean conversion%s" %
                  ("" if problems else " is the same"))
            for p in problems[:20]:
                print(p)
            bad = bad or bool(problems)
        for op in ops:
            n, problems = 0, []
            while n < 1000:
                n += 1
                work = copy(source, tmp)
                r = convert(hunion, args, work, "%s:%d" % (op, n))
                if r.returncode == 0:
                    break
                problems += diff("view after %s:%d" % (op, n), want_view,
                                 view(hunion, lower, work, tmp))
                r = convert(hunion, args, work)
                if r.returncode != 0:
                    problems.append("  re-run after %s:%d: %s" % (
                        op, n, r.stderr.decode(errors="replace")))
                    continue
                problems += diff("layer after %s:%d and a re-run" %
                                 (op, n), want_layer, layer(work))
            print("%s: %d interrupted run%s%s" % (
                op, n - 1, "" if n == 2 else "s",
                ", each view kept and finished by a re-run"
                if not problems else ""))
            for p in problems[:20]:
                print(p)
            bad = bad or bool(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
