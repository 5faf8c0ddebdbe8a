#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/mergedown.sh HUNION - merge --into against the floor and what
# people do today (bench/README.md, "Merge-down").
#
# On a freshly made ext4 filesystem (a sparse image, loop-mounted) it
# writes the bench stack (bench/mkstack.c: L0, L1, L2 in overlay format)
# and times, alternating, BENCH_MD_ROUNDS (3) rounds of:
#   hunion   hunion merge --into L0 L1 L2          (L2 into L1, in place)
#   floor    renamewalk L2 L1: each upper entry renamed once into the
#            lower (bench/renamewalk.c; no markers, no metadata)
#   cp-a     the upper's whiteouts removed from the lower (rm -rf), then
#            cp -a L2/. L1/, then the whiteouts copied along removed
# each on fresh copies of L1 and L2 (cp -a, not timed), each followed by
# a syncfs.  Prints each time, then the median of each in seconds.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: bench/mergedown.sh HUNION (root)" >&2; exit 2; }
HUNION=$(readlink -f "$1")
ROUNDS=${BENCH_MD_ROUNDS:-3}
ENTRIES=${BENCH_MD_ENTRIES:-230000}
BYTES=${BENCH_MD_BYTES:-512M}
IMG_SIZE=${BENCH_MD_IMG_SIZE:-12G}
TMPBASE=${BENCH_TMPDIR:-/var/tmp}
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "bench: needs root" >&2; exit 1; }

W=$(mktemp -d "$TMPBASE/hunion-mdbench.XXXXXX")
IMG=$W/img FS=$W/fs
cleanup() {
	mountpoint -q "$FS" && umount "$FS"
	rm -rf "$W"
}
trap cleanup EXIT
cc -O2 -o "$W/mkstack" "$HERE/mkstack.c" -lm
cc -O2 -o "$W/renamewalk" "$HERE/renamewalk.c"
truncate -s "$IMG_SIZE" "$IMG"
mkfs.ext4 -q -F -i 4096 -E lazy_itable_init=0,lazy_journal_init=0 "$IMG"
mkdir -p "$FS"
mount -o loop "$IMG" "$FS"
"$W/mkstack" -q -s 1 -n "$ENTRIES" -b "$BYTES" "$FS/stack"
S=$FS/stack
count() { find "$1" | wc -l; }
echo "stack: L0 $(count "$S/L0"), L1 $(count "$S/L1"), L2 (the upper) $(count "$S/L2") entries"

fresh() {
	rm -rf "$FS/w"
	mkdir "$FS/w"
	cp -a "$S/L1" "$FS/w/L1"
	cp -a "$S/L2" "$FS/w/L2"
	sync -f "$FS"
	echo 3 >/proc/sys/vm/drop_caches
	# warm, as bench/run.sh: the inputs in the page cache
	find "$FS/w" "$S/L0" >/dev/null
}

run_hunion() { "$HUNION" merge -q --into "$S/L0" "$FS/w/L1" "$FS/w/L2"; }
run_floor() { "$W/renamewalk" "$FS/w/L2" "$FS/w/L1"; }
run_cp() {
	local u=$FS/w/L2 l=$FS/w/L1
	# whiteouts (char 0/0) and opaque directories: their lower paths go
	(cd "$u" && find . -type c -print0) | while IFS= read -r -d '' p; do
		rm -rf "${l:?}/$p"
	done
	(cd "$u" && { getfattr -R --absolute-names -n trusted.overlay.opaque \
		. 2>/dev/null || true; } | sed -n 's/^# file: //p') |
	while IFS= read -r p; do
		[ "$p" = . ] || rm -rf "${l:?}/$p"
	done
	cp -a "$u/." "$l/"
	(cd "$u" && find . -type c -print0) | while IFS= read -r -d '' p; do
		rm -f "${l:?}/$p"
	done
}

declare -A T
order=(hunion floor cp)
for r in $(seq 1 "$ROUNDS"); do
	for k in "${order[@]}"; do
		fresh
		t0=$(date +%s.%N)
		"run_$k" >/dev/null || echo "round $r $k: failed" 
		sync -f "$FS"
		t1=$(date +%s.%N)
		t=$(echo "$t1 - $t0" | bc)
		T[$k]="${T[$k]:-} $t"
		echo "round $r $k: $t s"
	done
	order=("${order[@]:1}" "${order[0]}")	# rotate
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for k in hunion floor cp; do
	echo "median $k: $(echo "${T[$k]}" | median) s"
done
