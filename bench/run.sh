#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/run.sh HUNION - the `make bench` harness.
#
# On a freshly made ext4 filesystem (a sparse image, loop-mounted) it writes
# a generated three-layer overlayfs stack (bench/mkstack.c) and times, in
# alternating rounds:
#   hunion merge -o OUT L0 L1 L2
#   hunion merge --link -o OUT L0 L1 L2
#   cp -a MERGED OUT                (MERGED: the stack merged beforehand)
#   mount -t overlay + cp -a MNT OUT
# first on a ~200k-entry / 2 GB stack, then (hunion merge -o and cp -a only)
# on a 1M-entry stack of tiny files, for memory.  Every timed run includes the
# syncfs(2) that puts its output on disk; by default every run starts with its
# inputs in the page cache (BENCH_CACHE=warm; cold drops the caches first and
# takes about three times as long).  See bench/README.md for the knobs
# (BENCH_* variables) and how to read the table.
set -euo pipefail

usage() {
	echo "usage: bench/run.sh HUNION   (root; see bench/README.md)" >&2
	exit 2
}
[ $# -eq 1 ] || usage
case $1 in -h|--help) usage ;; esac

HUNION=$(readlink -f "$1")
ROUNDS=${BENCH_ROUNDS:-3}
ENTRIES=${BENCH_ENTRIES:-200000}
BYTES=${BENCH_BYTES:-2G}
BIG_ENTRIES=${BENCH_BIG_ENTRIES:-1000000}
BIG_ROUNDS=${BENCH_BIG_ROUNDS:-1}
read -ra CONTENDERS <<< "${BENCH_CONTENDERS:-merge link cp ovl}"
read -ra BIG_CONTENDERS <<< "${BENCH_BIG_CONTENDERS:-merge cp}"
SEED=${BENCH_SEED:-1}
CACHE=${BENCH_CACHE:-warm}
IMG_SIZE=${BENCH_IMG_SIZE:-16G}
TMPBASE=${BENCH_TMPDIR:-/var/tmp}
RESULTS=${BENCH_RESULTS:-}
STRICT=${BENCH_STRICT:-0}
CC=${CC:-cc}
HERE=$(cd "$(dirname "$0")" && pwd)

die() { echo "bench: $*" >&2; exit 1; }

[ -x "$HUNION" ] || die "$1: not an executable (build it first: make)"
[ "$(id -u)" = 0 ] || die "needs root (loop device, mounts, drop_caches)"
[ -x /usr/bin/time ] || die "/usr/bin/time missing: apt-get install time"
for t in mkfs.ext4 losetup mount umount getfattr "$CC"; do
	command -v "$t" >/dev/null || die "$t missing (make deps)"
done
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
	die "no overlay filesystem in this kernel"
case $CACHE in cold|warm) ;; *) die "BENCH_CACHE must be cold or warm" ;; esac
case $ROUNDS$BIG_ROUNDS in *[!0-9]*) die "rounds must be numbers" ;; esac
[ "$ROUNDS" -ge 1 ] || die "BENCH_ROUNDS must be at least 1"
for k in "${CONTENDERS[@]}" "${BIG_CONTENDERS[@]}"; do
	case $k in merge|link|cp|ovl) ;;
	*) die "unknown contender '$k' (merge, link, cp, ovl)" ;; esac
done

W=$(mktemp -d "$TMPBASE/hunion-bench.XXXXXX")
IMG=$W/fs.img
FS=$W/fs		# the image's mount point
MNT=$W/ovl		# overlay mount point
LOOP=
mkdir "$FS" "$MNT"

# shellcheck disable=SC2317  # reached through the trap
cleanup() {
	local ok=1
	trap - EXIT INT TERM
	if mountpoint -q "$MNT"; then umount "$MNT" || umount -l "$MNT" || ok=0; fi
	if mountpoint -q "$FS"; then umount "$FS" || umount -l "$FS" || ok=0; fi
	if [ -n "$LOOP" ]; then losetup -d "$LOOP" 2>/dev/null || true; fi
	if [ "$ok" = 1 ]; then
		rm -f "$IMG" "$W"/mkstack "$W"/*.txt "$W"/*.tsv "$W"/rss "$W"/run.*
		rmdir "$FS" "$MNT" "$W" 2>/dev/null || true
	else
		echo "bench: could not unmount; left $W in place" >&2
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { "$W/mkstack" --now; }

# ---- the filesystem -----------------------------------------------------------

# A fresh ext4 with room for a 1M-entry stack and two merged copies of it.
# Inode tables are initialised by mkfs, so no ext4lazyinit thread writes
# behind the measurements.
fresh_fs() {
	if mountpoint -q "$FS"; then umount "$FS"; fi
	if [ -n "$LOOP" ]; then losetup -d "$LOOP"; LOOP=; fi
	rm -f "$IMG"
	truncate -s "$IMG_SIZE" "$IMG"
	# direct I/O on the backing file: the page cache holds the data once
	LOOP=$(losetup -f --show --direct-io=on "$IMG" 2>/dev/null) ||
		LOOP=$(losetup -f --show "$IMG")
	mkfs.ext4 -q -F -i 4096 -E lazy_itable_init=0,lazy_journal_init=0 \
		"$LOOP"
	mount -o noatime "$LOOP" "$FS"
}

settle() {
	sync
	if [ "$CACHE" = cold ]; then echo 3 > /proc/sys/vm/drop_caches; fi
}

# ---- one timed run --------------------------------------------------------------

declare -A LABEL=(
	[merge]="hunion merge -o"
	[link]="hunion merge --link -o"
	[cp]="cp -a pre-merged"
	[ovl]="overlay mount + cp -a"
)
FAILED=0

timed() {
	/usr/bin/time -f %M -o "$W/rss" "$@" >"$W/run.out" 2>"$W/run.err"
}

# run PHASE KEY ROUND: time one contender into $W/results.tsv
run() {
	local phase=$1 key=$2 round=$3 rc=0 t0 t1 t2 rss status=ok
	local S=$FS/stack OUT=$FS/out
	rm -rf "$OUT"
	settle
	: > "$W/rss"
	t0=$(now)
	case $key in
	merge)	timed "$HUNION" merge -o "$OUT" "$S/L0" "$S/L1" "$S/L2" || rc=$? ;;
	link)	timed "$HUNION" merge --link -o "$OUT" "$S/L0" "$S/L1" "$S/L2" ||
			rc=$? ;;
	cp)	timed cp -a "$FS/merged" "$OUT" || rc=$? ;;
	ovl)	if mount -t overlay -o "ro,lowerdir=$S/L2:$S/L1:$S/L0" \
			overlay "$MNT"; then
			timed cp -a "$MNT" "$OUT" || rc=$?
			umount "$MNT" || rc=$?
		else
			rc=$?
		fi ;;
	esac
	t1=$(now)
	sync -f "$FS"
	t2=$(now)
	rss=$(tail -n 1 "$W/rss" 2>/dev/null)
	case $rss in ''|*[!0-9]*) rss=0 ;; esac
	if [ "$rc" != 0 ]; then
		status=FAIL
		FAILED=1
		echo "bench: ${LABEL[$key]} failed (exit $rc):" >&2
		tail -n 5 "$W/run.err" >&2 || true
	elif [ "$key" = merge ] || [ "$key" = link ]; then
		verify "$OUT" || { status=WRONG; FAILED=1; }
	fi
	if [ "$status" = ok ] && [ "$key" = link ]; then
		local single
		single=$(find "$OUT" -type f -links 1 | wc -l)
		[ "$single" = 0 ] || echo "bench: note: $single regular files of" \
			"the --link output have one link only (copied, not linked)"
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$phase" "$key" "$round" \
		"$(awk -v a="$t0" -v b="$t2" 'BEGIN { printf "%.3f", b - a }')" \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" \
		"$rss" "$status" >> "$W/results.tsv"
	printf '  %-7s round %s  %-24s %8.2f s  %7.1f MiB  %s\n' "$phase" \
		"$round" "${LABEL[$key]}" \
		"$(awk -v a="$t0" -v b="$t2" 'BEGIN { print b - a }')" \
		"$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" "$status"
}

# ---- checking an output against the pre-merged tree -----------------------------

# Names, types, sizes (not of directories), modes, owners, mtimes, link
# targets; then the number of distinct regular-file inodes (hard links kept)
# and the xattrs (none of trusted.overlay.* may leak into a merged tree).
listing() {
	(cd "$1" && find . -printf '%P\t%y\t%s\t%m\t%U:%G\t%T@\t%l\n' |
		awk -F'\t' -v OFS='\t' '$2 == "d" { $3 = "-" } { print }' |
		LC_ALL=C sort
	 echo "inodes $(find . -type f -printf '%i\n' | sort -u | wc -l)"
	 getfattr -R -h -d -m - -e hex . 2>/dev/null | awk '
		/^# file: / { f = substr($0, 9); next }
		/=/ { print "xattr " f " " $0 }' | LC_ALL=C sort)
}

verify() {
	listing "$1" > "$W/out.txt"
	if cmp -s "$W/merged.txt" "$W/out.txt"; then return 0; fi
	echo "bench: output differs from the pre-merged tree" \
		"($(diff "$W/merged.txt" "$W/out.txt" | grep -c '^[<>]') lines):" >&2
	diff "$W/merged.txt" "$W/out.txt" | grep '^[<>]' | head -n 8 >&2
	return 1
}

# ---- one stack ---------------------------------------------------------------------

# phase NAME ROUNDS "CONTENDER..." MKSTACK-ARGS...
phase() {
	local name=$1 rounds=$2 r i k t0 t1 order
	read -ra order <<< "$3"
	shift 3
	echo "== $name: fresh ext4 on $IMG_SIZE image, mkstack -s $SEED $*"
	fresh_fs
	t0=$(now)
	"$W/mkstack" -q -s "$SEED" "$@" "$FS/stack" > "$W/$name.stack.txt"
	sync
	t1=$(now)
	sed 's/^/  /' "$W/$name.stack.txt"
	awk -v a="$t0" -v b="$t1" \
		'BEGIN { printf "  generated in %.1f s\n", b - a }'

	# the pre-merged tree, made by the kernel's own merge
	settle
	t0=$(now)
	mount -t overlay -o "ro,lowerdir=$FS/stack/L2:$FS/stack/L1:$FS/stack/L0" \
		overlay "$MNT"
	cp -a "$MNT" "$FS/merged"
	umount "$MNT"
	sync -f "$FS"
	t1=$(now)
	local want got
	want=$(awk '/^merged:/ { print $2 }' "$W/$name.stack.txt")
	got=$(($(find "$FS/merged" | wc -l) - 1))
	awk -v a="$t0" -v b="$t1" -v g="$got" 'BEGIN {
		printf "  pre-merged (overlay + cp -a): %d entries in %.1f s\n",
			g, b - a }'
	if [ "$want" != "$got" ]; then
		echo "bench: the kernel's merged view has $got entries," \
			"mkstack predicted $want" >&2
		FAILED=1
	fi
	listing "$FS/merged" > "$W/merged.txt"

	if [ "$CACHE" = warm ]; then
		tar -cf - -C "$FS" stack merged | cat > /dev/null
	fi
	for ((r = 1; r <= rounds; r++)); do
		# rotate the order so that no contender always runs first
		for ((i = 0; i < ${#order[@]}; i++)); do
			k=${order[$(((i + r - 1) % ${#order[@]}))]}
			run "$name" "$k" "$r"
		done
	done
	rm -rf "$FS/out"
}

# ---- main --------------------------------------------------------------------------

echo "bench: building mkstack"
"$CC" -O2 -o "$W/mkstack" "$HERE/mkstack.c" -lm
T_START=$(now)
: > "$W/results.tsv"
echo "bench: $HUNION; $CACHE cache before every timed run;" \
	"$ROUNDS rounds (1M stack: $BIG_ROUNDS); work dir $W"

phase stack "$ROUNDS" "${CONTENDERS[*]}" -n "$ENTRIES" -b "$BYTES"
if [ "$BIG_ENTRIES" -gt 0 ] && [ "$BIG_ROUNDS" -gt 0 ]; then
	phase 1M "$BIG_ROUNDS" "${BIG_CONTENDERS[*]}" -t -n "$BIG_ENTRIES"
fi
if mountpoint -q "$FS"; then umount "$FS"; fi

# ---- the table ----------------------------------------------------------------------

summarize() {
	awk -F'\t' -v strict="$STRICT" '
	function median(key,   n, i, j, t, a) {
		n = split(walls[key], a, " ")
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
				t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
			}
		if (n == 0) return -1
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function mmedian(key,   n, i, j, t, a) {
		n = split(cmds[key], a, " ")
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
				t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
			}
		if (n == 0) return -1
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{
		key = $1 SUBSEP $2
		if (!(key in seen)) { seen[key] = 1; order[++n] = key }
		if ($7 == "ok") {
			walls[key] = walls[key] " " $4
			cmds[key] = cmds[key] " " $5
			if ($6 + 0 > rss[key] + 0) rss[key] = $6
			if (!(key in lo) || $4 + 0 < lo[key]) lo[key] = $4 + 0
			if (!(key in hi) || $4 + 0 > hi[key]) hi[key] = $4 + 0
		} else bad[key]++
		runs[key]++
	}
	END {
		label["merge"] = "hunion merge -o"
		label["link"] = "hunion merge --link -o"
		label["cp"] = "cp -a pre-merged"
		label["ovl"] = "overlay mount + cp -a"
		printf "\n%-6s %-24s %9s %15s %7s %9s %9s %s\n", "stack", \
			"contender", "median s", "(min - max)", "ratio", \
			"cmd s", "peak MiB", "runs"
		for (i = 1; i <= n; i++) {
			split(order[i], p, SUBSEP)
			m = median(order[i]); base = median(p[1] SUBSEP "cp")
			if (m < 0) {
				printf "%-6s %-24s %9s %15s %7s %9s %9s %d failed\n", \
					p[1], label[p[2]], "-", "", "-", "-", "-", \
					bad[order[i]]
				continue
			}
			ratio[order[i]] = base > 0 ? m / base : -1
			printf "%-6s %-24s %9.2f %6.2f - %6.2f %6.2fx %9.2f %9.1f %d%s\n", \
				p[1], label[p[2]], m, lo[order[i]], hi[order[i]], \
				ratio[order[i]], mmedian(order[i]), \
				rss[order[i]] / 1024, runs[order[i]], \
				bad[order[i]] ? " (" bad[order[i]] " failed)" : ""
		}
		printf "\ntargets\n"
		miss = 0
		miss += target("merge -o wall <= 0.90x cp -a pre-merged (stack)", \
			"stack" SUBSEP "merge", 0.90, "x")
		miss += target("merge --link wall <= 0.40x cp -a pre-merged (stack)", \
			"stack" SUBSEP "link", 0.40, "x")
		miss += target("merge -o peak RSS <= 32 MiB (1M stack)", \
			"1M" SUBSEP "merge", 32, "MiB")
		exit strict && miss ? 3 : 0
	}
	function target(text, key, limit, unit,   v, verdict) {
		if (unit == "x") v = (key in ratio) ? ratio[key] : -1
		else v = (key in rss && !bad[key]) ? rss[key] / 1024 : -1
		if (!(key in seen)) {
			printf "  %-52s %10s  not run\n", text, "-"; return 0
		}
		if (v < 0) { printf "  %-52s %10s  MISS\n", text, "n/a"; return 1 }
		verdict = v <= limit ? "PASS" : "MISS"
		if (unit == "x") printf "  %-52s %9.2fx  %s\n", text, v, verdict
		else printf "  %-52s %6.1f MiB  %s\n", text, v, verdict
		return verdict == "MISS"
	}' "$W/results.tsv"
}

rc=0
summarize || rc=$?
if [ -n "$RESULTS" ]; then
	{
		printf 'stack\tcontender\tround\twall_s\tcmd_s\tpeak_rss_kib\tstatus\n'
		cat "$W/results.tsv"
	} > "$RESULTS"
	echo "raw results: $RESULTS"
fi
awk -v a="$T_START" -v b="$(now)" -v c="$CACHE" 'BEGIN {
	printf "\nwall = command + syncfs of the output, %s cache at the start of each run; ratio = median wall / median wall of cp -a pre-merged on the same stack; total bench time %.0f s\n", c, b - a }'
if [ "$FAILED" = 1 ]; then
	echo "bench: some runs failed or produced a wrong tree (see above)" >&2
	exit 1
fi
exit $rc
