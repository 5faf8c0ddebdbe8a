#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tarextract.py ARCHIVE DIR - extract ARCHIVE into DIR with Python's
tarfile.extractall, as a Python program would (no extraction filter: the
"fully_trusted" behaviour, owners kept as root).  .zst archives are
decompressed with the zstd command, since tarfile reads only gzip, bzip2
and xz (into a temporary file: tarfile needs to seek to extract a hard
link whose target it cannot link to).  For the flatten round-trip
test."""

import subprocess
import sys
import tarfile
import tempfile


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
            with tarfile.open(fileobj=tmp, mode="r:") as t:
                t.extractall(dest, **kw)
        return 0
    with tarfile.open(archive, mode="r:*") as t:
        t.extractall(dest, **kw)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
