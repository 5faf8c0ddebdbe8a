#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/fuzz/mkcorpus.sh: write the seed corpus of the tarball-layer fuzz
# target, tests/fuzz/corpus/tarlayer/ (tiny tarballs, hostile ones
# included).  The files are committed; run this again only to change them.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$HERE/corpus/tarlayer
MKTAR=$HERE/../tools/mktar.py
mkdir -p "$OUT"
cd "$OUT"

# Plain tarballs without the padding to 10240 bytes: entries, then the two
# end-of-archive blocks.
bare() {
	python3 "$MKTAR" "$1.full" && python3 - "$1" <<'PY'
import sys
name = sys.argv[1]
raw = open(name + ".full", "rb").read().rstrip(b"\0")
raw += b"\0" * (-len(raw) % 512) + b"\0" * 1024
open(name, "wb").write(raw)
PY
	rm -f "$1.full"
}

bare basic.tar <<'SPEC'
d ./
d etc
f etc/hostname box
l etc/link hostname
h etc/hard etc/hostname
d:0555 ro
f:0444 ro/f read only
p fifo
x withxattr user.note=hello
SPEC
bare whiteouts.tar <<'SPEC'
f .wh.etc
d usr
f usr/new
f usr/.wh..wh..opq
d re
f re/made
f .wh.re
f .wh..wh.plnk
SPEC
bare duplicates.tar <<'SPEC'
f x one
f ./x two
f /x three
d d
f d/child
d d/
f d now a file
SPEC
bare implied-parents.tar <<'SPEC'
f etc/deep/er/file
f usr/bin/tool
SPEC
bare dotdot.tar <<'SPEC'
f ok
f ../escape
SPEC
bare bad-whiteout.tar <<'SPEC'
f .wh..
SPEC
bare link-unseen.tar <<'SPEC'
h a b
f b
SPEC
bare through-symlink.tar <<'SPEC'
l etc /etc
f etc/passwd
SPEC
bare through-whiteout.tar <<'SPEC'
f .wh.d/x
SPEC
printf 'd d\nf d/a aaaa\nf .wh.x\n' | python3 "$MKTAR" small.tar.gz
printf 'd d\nf d/a aaaa\nf .wh.x\n' | python3 "$MKTAR" small.tar.zst
printf 'd d\nf d/a aaaa\nf d/b bbbb\n' |
	python3 "$MKTAR" --cut=3 truncated-end.tar.zst
printf 'd d\nf d/a aaaa\nf d/b bbbb\n' |
	python3 "$MKTAR" --cut=3 truncated-end.tar.gz
# A GNU sparse file (a hole, then data), when GNU tar is at hand.
if tar --version 2>/dev/null | grep -q GNU; then
	d=$(mktemp -d)
	truncate -s 65536 "$d/sparse" && printf 'end' >>"$d/sparse"
	tar -C "$d" --sparse --format=pax --owner=0 --group=0 \
		--mtime=@1000000000 -cf - sparse | python3 -c '
import sys
raw = sys.stdin.buffer.read().rstrip(b"\0")
raw += b"\0" * (-len(raw) % 512) + b"\0" * 1024
sys.stdout.buffer.write(raw)' >sparse.tar
	rm -rf "$d"
fi
ls -l "$OUT"
