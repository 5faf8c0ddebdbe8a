#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tarextract.py ARCHIVE DIR - extract ARCHIVE into DIR with Python's
tarfile.extractall, as a Python program would (no extraction filter: the
"fully_trusted" behaviour, owners kept as root).  .zst archives are
decompressed with the zstd command, since tarfile reads only gzip, bzip2
and xz (into a temporary file: tarfile needs to seek to extract a hard
link whose target it cannot link to).  tarfile parses the xattrs
(SCHILY.xattr.* pax records) but never sets them: this program sets them
after the extraction, the names with GNU tar's two escapes (%25, %3D)
undone, as GNU tar does.  For the flatten round-trip test."""

import os
import re
import subprocess
import sys
import tarfile
import tempfile

XATTR = "SCHILY.xattr."
ENC = dict(encoding="utf-8", errors="surrogateescape")


def set_xattrs(t, dest):
    """The xattrs of every member of the extracted @t, under @dest."""
    for m in t.getmembers():
        p = os.path.join(os.fsencode(dest),
                         m.name.encode("utf-8", "surrogateescape"))
        for k, v in sorted(m.pax_headers.items()):
            if not k.startswith(XATTR):
                continue
            n = re.sub("%(25|3D)", lambda x: "%" if x.group(1) == "25"
                       else "=", k[len(XATTR):])
            os.setxattr(p, n.encode("utf-8", "surrogateescape"),
                        v.encode("utf-8", "surrogateescape"),
                        follow_symlinks=False)


def extract(t, dest, kw):
    t.extractall(dest, **kw)
    set_xattrs(t, dest)


def main(argv):
    if len(argv) != 3:
        print("usage: tarextract.py ARCHIVE DIR", file=sys.stderr)
        return 2
    archive, dest = argv[1], argv[2]
    kw = {}
    if hasattr(tarfile, "fully_trusted_filter"):
        kw["filter"] = "fully_trusted"
    if archive.endswith(".zst"):
        with tempfile.TemporaryFile() as tmp:
            subprocess.run(["zstd", "-qdc", archive], stdout=tmp, check=True)
            tmp.seek(0)
            with tarfile.open(fileobj=tmp, mode="r:", **ENC) as t:
                extract(t, dest, kw)
        return 0
    with tarfile.open(archive, mode="r:*", **ENC) as t:
        extract(t, dest, kw)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
