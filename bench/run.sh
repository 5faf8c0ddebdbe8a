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
#   hunion flatten -o OUT.tar.zst --level 3 L0 L1 L2
#   tar -C MERGED -cf - . | zstd -T0 -3 -o OUT.tar.zst
#   hunion merge -o OUT MERGED.tar.zst  (the merged tree as one tarball layer)
#   tar --zstd -xpf MERGED.tar.zst -C OUT
#   hunion flatten -o erofs:OUT.erofs L0 L1 L2
#   hunion merge -o DIR L0 L1 L2 && mkfs.erofs OUT.erofs DIR
#   hunion flatten -o OUT.tar L0 L1 L2   (the uncompressed tar: erofs's peer)
# first on a ~200k-entry / 2 GB stack, then (hunion merge -o, cp -a and the
# two flatten contenders only) on a 1M-entry stack of tiny files, for memory.
# On the 1M stack it then writes ten changes into a fourth layer L3 and times
# hunion diff L0 L1 L2 L3 against rsync -n --itemize-changes of the two
# overlay views.  On the first stack, damaged a little in its top layer
# (bench_damage), it also times hunion fsck -n (the top layer against those
# beneath) and fsck -n --all-layers against bench/walkx.c, a walk of all
# three layers that lstats every entry and lists its xattrs (what a checker
# without the upper-only walk must do).  First of all, with no filesystem
# of its own, it times the start of short commands (bench/startcost.c,
# BENCH_START_RUNS runs of each, alternating): hunion --version, hunion
# whiteout ls and hunion diff of a small stack against tar --version.
# The 200k stack is also made an OCI image twice: by hunion (image_bench)
# and as other tools make one, GNU tar and pigz or zstd (bench/mkimage.sh,
# tarimage_bench); hunion's flatten, merge and diff of the latter run
# beside their floors and umoci unpack, pair by pair.
# Every timed run includes the
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
# set but empty: no contender (the fsck rows alone, say)
read -ra CONTENDERS <<< \
	"${BENCH_CONTENDERS-merge link cp ovl flat tarz zready tarx untar erofs mkfs flattar}"
read -ra BIG_CONTENDERS <<< "${BENCH_BIG_CONTENDERS:-merge cp flat tarz erofs}"
SKIP_MERGE=${BENCH_SKIP_MERGE:-0}
DIFF_ROUNDS=${BENCH_DIFF_ROUNDS:-5}
RSYNC_ROUNDS=${BENCH_RSYNC_ROUNDS:-1}
FSCK_ROUNDS=${BENCH_FSCK_ROUNDS:-$ROUNDS}
IMAGE_ROUNDS=${BENCH_IMAGE_ROUNDS:-$ROUNDS}
# the images made without hunion (tarimage_bench): gzip, zstd, both or none
read -ra TARIMAGES <<< "${BENCH_TARIMAGE-gzip}"
START_RUNS=${BENCH_START_RUNS:-200}
SEED=${BENCH_SEED:-1}
CACHE=${BENCH_CACHE:-warm}
IMG_SIZE=${BENCH_IMG_SIZE:-16G}
TMPBASE=${BENCH_TMPDIR:-/var/tmp}
RESULTS=${BENCH_RESULTS:-}
STRICT=${BENCH_STRICT:-0}
CC=${CC:-cc}
# BENCH_ONLY=tarx: the tarball rows alone (merge -o of one tar.zst against
# tar --zstd -x), 5 rounds unless BENCH_ROUNDS says otherwise;
# BENCH_ONLY=image: the image rows alone (image_bench);
# BENCH_ONLY=start: the start-cost rows alone (start_bench);
# BENCH_ONLY=fsck: the fsck rows alone (fsck -n and --all-layers against
# a walk of the three layers), 5 rounds unless BENCH_ROUNDS says otherwise;
# BENCH_ONLY=progress: what the progress line costs (issue 25): flatten of
# the stack to a .tar on a pty (script(1)), --progress=always against
# --progress=never, 5 rounds, on a ~50k-entry / 500 MB stack unless
# BENCH_ROUNDS, BENCH_ENTRIES, BENCH_BYTES say otherwise
ONLY=${BENCH_ONLY:-}
case $ONLY in
'') ;;
start)	CONTENDERS=()
	BIG_ENTRIES=0
	IMAGE_ROUNDS=0
	FSCK_ROUNDS=0 ;;
tarx)	CONTENDERS=(tarx untar)
	ROUNDS=${BENCH_ROUNDS:-5}
	BIG_ENTRIES=0
	IMAGE_ROUNDS=0
	FSCK_ROUNDS=0 ;;
image)	CONTENDERS=()
	BIG_ENTRIES=0
	FSCK_ROUNDS=0 ;;
fsck)	CONTENDERS=()
	BIG_ENTRIES=0
	IMAGE_ROUNDS=0
	START_RUNS=0
	FSCK_ROUNDS=${BENCH_ROUNDS:-5} ;;
progress) CONTENDERS=(prog noprog)
	ROUNDS=${BENCH_ROUNDS:-5}
	ENTRIES=${BENCH_ENTRIES:-50000}
	BYTES=${BENCH_BYTES:-500M}
	BIG_ENTRIES=0
	IMAGE_ROUNDS=0
	FSCK_ROUNDS=0
	START_RUNS=0
	command -v script >/dev/null ||
		{ echo "bench: script(1) missing (bsdutils)" >&2; exit 2; } ;;
*)	echo "bench: BENCH_ONLY must be tarx, image, start, fsck or progress" >&2
	exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)

die() { echo "bench: $*" >&2; exit 1; }

[ -x "$HUNION" ] || die "$1: not an executable (build it first: make)"
[ "$(id -u)" = 0 ] || die "needs root (loop device, mounts, drop_caches)"
[ -x /usr/bin/time ] || die "/usr/bin/time missing: apt-get install time"
for t in mkfs.ext4 losetup mount umount getfattr setfattr "$CC"; do
	command -v "$t" >/dev/null || die "$t missing (make deps)"
done
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
	die "no overlay filesystem in this kernel"
case $CACHE in cold|warm) ;; *) die "BENCH_CACHE must be cold or warm" ;; esac
case $ROUNDS$BIG_ROUNDS$DIFF_ROUNDS$RSYNC_ROUNDS$FSCK_ROUNDS$IMAGE_ROUNDS$START_RUNS in
*[!0-9]*) die "rounds must be numbers" ;; esac
[ "$ROUNDS" -ge 1 ] || die "BENCH_ROUNDS must be at least 1"
for k in "${CONTENDERS[@]}" "${BIG_CONTENDERS[@]}"; do
	case $k in merge|link|cp|ovl|flat|tarz|zready|tarx|untar|prog|noprog|\
		erofs|mkfs|flattar) ;;
	*) die "unknown contender '$k' (merge, link, cp, ovl, flat, tarz, zready," \
		"tarx, untar, erofs, mkfs, flattar)" ;;
	esac
done
# BENCH_SKIP_MERGE=1: only the flatten contenders (and diff)
if [ "$SKIP_MERGE" = 1 ]; then
	skip_merge() {
		local k out=()
		for k in "$@"; do
			case $k in merge|link|cp|ovl) ;; *) out+=("$k") ;; esac
		done
		echo "${out[*]}"
	}
	read -ra CONTENDERS <<< "$(skip_merge "${CONTENDERS[@]}")"
	read -ra BIG_CONTENDERS <<< "$(skip_merge "${BIG_CONTENDERS[@]}")"
fi
for t in tar zstd; do
	command -v "$t" >/dev/null || die "$t missing (make deps)"
done
for k in "${TARIMAGES[@]}"; do
	case $k in gzip|zstd) ;; *) die "BENCH_TARIMAGE: gzip, zstd or both" ;; esac
done
if [ "$IMAGE_ROUNDS" -gt 0 ]; then
	for t in umoci python3; do
		command -v "$t" >/dev/null || die "$t missing (make deps)"
	done
	if [ "${#TARIMAGES[@]}" -gt 0 ]; then
		for t in pigz skopeo sha256sum; do
			command -v "$t" >/dev/null || die "$t missing (make deps)"
		done
	fi
fi
if [ "$BIG_ENTRIES" -gt 0 ] && [ "$DIFF_ROUNDS" -gt 0 ] &&
	[ "$RSYNC_ROUNDS" -gt 0 ]; then
	command -v rsync >/dev/null || die "rsync missing (apt-get install rsync)"
fi

W=$(mktemp -d "$TMPBASE/hunion-bench.XXXXXX")
IMG=$W/fs.img
FS=$W/fs		# the image's mount point
MNT=$W/ovl		# overlay mount point
MNT2=$W/ovl2		# a second one (the new view, for rsync)
LOOP=
mkdir "$FS" "$MNT" "$MNT2"

# shellcheck disable=SC2317  # reached through the trap
cleanup() {
	local ok=1
	trap - EXIT INT TERM
	if mountpoint -q "$MNT"; then umount "$MNT" || umount -l "$MNT" || ok=0; fi
	if mountpoint -q "$MNT2"; then
		umount "$MNT2" || umount -l "$MNT2" || ok=0
	fi
	if mountpoint -q "$FS"; then umount "$FS" || umount -l "$FS" || ok=0; fi
	if [ -n "$LOOP" ]; then losetup -d "$LOOP" 2>/dev/null || true; fi
	if [ "$ok" = 1 ]; then
		rm -f "$IMG" "$W"/mkstack "$W"/walkx "$W"/startcost "$W"/*.txt "$W"/*.tsv "$W"/rss "$W"/run.* "$W"/*.out
		rmdir "$FS" "$MNT" "$MNT2" "$W" 2>/dev/null || true
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
	[flat]="hunion flatten .tar.zst"
	[tarz]="tar | zstd -T0 -3"
	[zready]="zstd -T0 -3 of a ready tar"
	[tarx]="hunion merge -o one tar.zst"
	[untar]="tar --zstd -x"
	[diff]="hunion diff --format=overlay"
	[diffauto]="hunion diff (detect)"
	[rsync]="rsync -n of 2 overlays"
	[fsck]="hunion fsck -n"
	[fsckall]="hunion fsck -n --all-layers"
	[walkx]="walkx: lstat+listxattr all"
	[img]="hunion merge -o oci:IMG"
	[umoci]="umoci unpack"
	[imgflat]="hunion flatten oci:IMG"
	[imgpeer]="gzip -d blobs + tar|zstd"
	[xflat]="flatten oci:IMG -o .tar.zst"
	[xflatf]="floor: -d blobs + zstd tar"
	[xoci]="flatten oci:IMG -o oci:"
	[xocif]="floor: -d blobs + pigz tar"
	[xmerge]="merge -o DIR oci:IMG"
	[xumoci]="umoci unpack"
	[xdiff1]="diff -o oci: 1st, no cache"
	[xdiff1f]="floor: -d + sha256 of base"
	[xdiff2]="diff -o oci: 2nd, cached"
	[xdiffd]="diff --oci over dirs"
	[prog]="flatten .tar, progress on pty"
	[noprog]="flatten .tar, progress never"
	[erofs]="hunion flatten -o erofs:"
	[mkfs]="merge -o + mkfs.erofs"
	[flattar]="hunion flatten .tar"
)
FAILED=0

timed() {
	/usr/bin/time -f %M -o "$W/rss" "$@" >"$W/run.out" 2>"$W/run.err"
}

# The 1-minute load average now: how busy the machine was during a run.
load1() { cut -d' ' -f1 /proc/loadavg; }

# Every file of the stack read once (not timed): its pages in the cache.
warm_stack() {
	find "$FS/stack" -type f -print0 | xargs -0 -r cat > /dev/null
}

# run PHASE KEY ROUND: time one contender into $W/results.tsv
run() {
	local phase=$1 key=$2 round=$3 rc=0 t0 t1 t2 rss status=ok load
	local S=$FS/stack OUT=$FS/out
	rm -rf "$OUT"
	case $key in flat|tarz|zready|untar|imgflat|imgpeer|prog|noprog|\
		erofs|mkfs|flattar)
		mkdir "$OUT" ;;
	x*)	[ "$key" = xmerge ] || [ "$key" = xumoci ] || mkdir "$OUT" ;;
	esac
	settle
	# the EROFS rows (issue 33) start with the stack read back into the
	# page cache: mkfs.erofs's 1 GB and its 2 GB tree push it out (this
	# machine pages cold memory out too), and whichever row ran after
	# mkfs paid for it
	case $key in erofs|mkfs|flattar) [ "$CACHE" = cold ] || warm_stack ;; esac
	: > "$W/rss"
	load=$(load1)
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
	flat)	timed "$HUNION" flatten -o "$OUT/flat.tar.zst" --level 3 \
			"$S/L0" "$S/L1" "$S/L2" || rc=$? ;;
	tarz)	# shellcheck disable=SC2016  # expanded by the inner bash
		timed bash -c 'set -o pipefail
			tar -C "$1" -cf - . | zstd -T0 -3 -q -o "$2"' \
			tarz "$FS/merged" "$OUT/tar.tar.zst" || rc=$? ;;
	# the floor of a flatten (issue 35): compressing a tarball of the
	# merged tree that is there already, every byte through zstd once
	zready)	timed zstd -T0 -3 -q -o "$OUT/ready.tar.zst" "$FS/ready.tar" ||
			rc=$? ;;
	# issue 33: the image in one pass, against the two passes it
	# replaces (erofs-utils 1.5, which reads no layers) and against the
	# same flatten to an uncompressed tar
	erofs)	timed "$HUNION" flatten -o "erofs:$OUT/flat.erofs" \
			"$S/L0" "$S/L1" "$S/L2" || rc=$? ;;
	mkfs)	# shellcheck disable=SC2016  # expanded by the inner bash
		timed bash -c 'set -e
			"$1" merge -o "$2/tree" "${@:4}"
			mkfs.erofs --quiet "$3" "$2/tree"' mkfs "$HUNION" "$OUT" \
			"$OUT/mkfs.erofs" "$S/L0" "$S/L1" "$S/L2" || rc=$? ;;
	flattar) timed "$HUNION" flatten -o "$OUT/flat.tar" \
			"$S/L0" "$S/L1" "$S/L2" || rc=$? ;;
	tarx)	timed "$HUNION" merge -o "$OUT" "$FS/merged.tar.zst" || rc=$? ;;
	untar)	timed tar --zstd -xpf "$FS/merged.tar.zst" --xattrs \
			--xattrs-include='*' -C "$OUT" || rc=$? ;;
	# fsck -n exits 4 when it finds problems (the damage put there), 0
	# when clean: both are success here
	fsck)	timed "$HUNION" fsck -n "$S/L0" "$S/L1" "$S/L2" || rc=$? ;;
	fsckall) timed "$HUNION" fsck -n --all-layers "$S/L0" "$S/L1" "$S/L2" ||
			rc=$? ;;
	walkx)	timed "$W/walkx" "$S/L0" "$S/L1" "$S/L2" || rc=$? ;;
	# the image of the stack (image_bench); the blobs unpacked on the
	# bench filesystem, as umoci's output is
	img)	TMPDIR=$FS/tmp timed "$HUNION" merge -o "$OUT" "oci:$FS/img:t" ||
			rc=$? ;;
	umoci)	timed umoci unpack --image "$FS/img:t" "$OUT" || rc=$? ;;
	# flatten of the image against its floor: every layer blob
	# decompressed once, and the result (the pre-merged tree) put
	# through tar | zstd -T0 -3, as flatten's output is made
	imgflat) TMPDIR=$FS/tmp timed "$HUNION" flatten -o "$OUT/flat.tar.zst" \
			--level 3 "oci:$FS/img:t" || rc=$? ;;
	imgpeer) # shellcheck disable=SC2016  # expanded by the inner bash
		timed bash -c 'set -o pipefail
			for b in "${@:3}"; do gzip -dc "$b" >/dev/null || exit; done
			tar -C "$1" -cf - . | zstd -T0 -3 -q -o "$2"' imgpeer \
			"$FS/merged" "$OUT/tar.tar.zst" "${IMG_BLOBS[@]}" || rc=$? ;;
	# the image made without hunion (tarimage_bench), its layer blobs
	# XBLOBS, XCOMP gzip or zstd; each hunion row beside its peer
	xflat)	TMPDIR=$FS/tmp timed "$HUNION" flatten -o "$OUT/flat.tar.zst" \
			"oci:$XIMG:t" || rc=$? ;;
	xoci)	TMPDIR=$FS/tmp timed "$HUNION" flatten -o "oci:$OUT/img:t" \
			"oci:$XIMG:t" || rc=$? ;;
	xmerge)	TMPDIR=$FS/tmp timed "$HUNION" merge -o "$OUT" "oci:$XIMG:t" ||
			rc=$? ;;
	xumoci)	timed umoci unpack --image "$XIMG:t" "$OUT" || rc=$? ;;
	# the change layer written into the image's own layout under a new
	# tag, as umoci repack does (a fresh layout would copy every base
	# blob); the first run with an empty index cache, the second with
	# the one the warm-up run filled
	xdiff1)	mkdir "$OUT/cache"
		cache_opts "$OUT/cache" cold
		XDG_CACHE_HOME=$OUT/cache TMPDIR=$FS/tmp timed "$HUNION" diff \
			--oci "${COPTS[@]}" -o "oci:$XIMG:d" "oci:$XIMG:t" \
			"$XUPPER" || rc=$? ;;
	xdiff2)	cache_opts "$FS/dcache"
		XDG_CACHE_HOME=$FS/dcache TMPDIR=$FS/tmp timed "$HUNION" diff \
			--oci "${COPTS[@]}" -o "oci:$XIMG:d" "oci:$XIMG:t" \
			"$XUPPER" || rc=$? ;;
	xdiffd)	timed "$HUNION" diff --oci -o "$OUT/layer.tar.gz" \
			"$S/L0" "$S/L1" "$S/L2" "$XUPPER" || rc=$? ;;
	# the floors: every layer blob decompressed once (pigz -dc or
	# zstd -dc), then the merged tree's ready tar compressed as the
	# output is; for diff the blobs decompressed and their sha256
	# checked against their names
	xflatf|xocif|xdiff1f)
		# shellcheck disable=SC2016  # expanded by the inner bash
		timed bash -c 'set -o pipefail
			for b in "${@:5}"; do
				if [ "$1" = gzip ]; then pigz -dc "$b"
				else zstd -dcq "$b"; fi >/dev/null || exit
			done
			case $2 in
			xflatf)	zstd -T0 -3 -q -o "$3/floor.tar.zst" "$4" ;;
			xocif)	pigz -c "$4" > "$3/floor.tar.gz" ;;
			xdiff1f) for b in "${@:5}"; do
					[ "$(sha256sum < "$b" | cut -c1-64)" = \
					  "${b##*/}" ] || exit
				done ;;
			esac' floor "$XCOMP" "$key" "$OUT" "$FS/ready.tar" \
			"${XBLOBS[@]}" || rc=$? ;;
	# the progress line's cost: both on a terminal (script(1) gives
	# one, its output to run.out), only the option differs; a .tar,
	# where the least time goes to each byte counted
	prog|noprog)
		local when=always
		[ "$key" = prog ] || when=never
		timed script -qec "'$HUNION' flatten --progress=$when -o \
			'$OUT/flat.tar' '$S/L0' '$S/L1' '$S/L2'" /dev/null ||
			rc=$? ;;
	esac
	case $key:$rc in fsck*:4) rc=0 ;; esac
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
	elif [ "$key" = merge ] || [ "$key" = link ] || [ "$key" = img ] ||
	     [ "$key" = tarx ] || [ "$key" = xmerge ]; then
		verify "$OUT" || { status=WRONG; FAILED=1; }
	elif [ "$key" = flat ] || [ "$key" = imgflat ] || [ "$key" = xflat ]; then
		verify_names "$OUT/flat.tar.zst" || { status=WRONG; FAILED=1; }
	elif [ "$key" = erofs ]; then
		verify_erofs "$OUT/flat.erofs" || { status=WRONG; FAILED=1; }
	elif [ "$key" = xoci ]; then
		verify_names "$(top_layer "$OUT/img" t)" "pigz -dc" ||
			{ status=WRONG; FAILED=1; }
	fi
	case $key in flat|tarz|zready) [ "$status" != ok ] ||
		echo "  $(du -k "$OUT"/*.tar.zst | awk '{ printf "%.1f", $1 / 1024 }')" \
			"MiB written by ${LABEL[$key]}" ;;
	esac
	# what hunion says on stderr about the image made without it (once)
	case $key:$round:$status in
	xflat:1:ok|xoci:1:ok|xmerge:1:ok|xdiff1:1:ok)
		[ ! -s "$W/run.err" ] ||
			echo "  note: ${LABEL[$key]} wrote $(wc -l < "$W/run.err")" \
				"lines on stderr, the first: $(head -c 300 "$W/run.err" |
				head -n 1)" ;;
	esac
	if [ "$status" = ok ] && [ "$key" = link ]; then
		local single
		single=$(find "$OUT" -type f -links 1 | wc -l)
		[ "$single" = 0 ] || echo "bench: note: $single regular files of" \
			"the --link output have one link only (copied, not linked)"
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$phase" "$key" "$round" \
		"$(awk -v a="$t0" -v b="$t2" 'BEGIN { printf "%.3f", b - a }')" \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" \
		"$rss" "$status" "$load" >> "$W/results.tsv"
	printf '  %-7s round %s  %-27s %8.2f s  %7.1f MiB  load %5s  %s\n' \
		"$phase" "$round" "${LABEL[$key]}" \
		"$(awk -v a="$t0" -v b="$t2" 'BEGIN { print b - a }')" \
		"$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" "$load" "$status"
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

# The image mounted against the pre-merged tree, as verify() compares a
# tree.
verify_erofs() {	# IMAGE
	local rc
	mount -t erofs -o ro "$1" "$MNT" || return 1
	verify "$MNT"
	rc=$?
	umount "$MNT" || rc=1
	return $rc
}

# The names in a tarball against those of the pre-merged tree (the contents
# are not compared: that would cost more than the flatten itself); DECOMP
# is zstd -dcq unless given.
verify_names() {	# TARBALL [DECOMP]
	${2:-zstd -dcq} "$1" |
		tar --quoting-style=literal --warning=no-unknown-keyword -tf - |
		sed 's|^\./||; s|/$||' | awk 'NF' | LC_ALL=C sort > "$W/out.txt"
	cut -f 1 "$W/merged.txt" | awk 'NF && !/^inodes / && !/^xattr /' |
		LC_ALL=C sort > "$W/names.txt"
	if cmp -s "$W/names.txt" "$W/out.txt"; then return 0; fi
	echo "bench: the tarball's names differ from the pre-merged tree" \
		"($(diff "$W/names.txt" "$W/out.txt" | grep -c '^[<>]') lines):" >&2
	diff "$W/names.txt" "$W/out.txt" | grep '^[<>]' | head -n 8 >&2
	return 1
}

# ---- one stack ---------------------------------------------------------------------

# The floors' ready tar: the pre-merged tree as one uncompressed tar,
# xattrs and all, as GNU tar writes it, made once per stack (the flatten's
# floor, zready, and the image rows' floors read the same file).
ready_tar() {
	[ -e "$FS/ready.tar" ] && return 0
	tar --sort=name --format=pax --xattrs --xattrs-include='*' \
		--numeric-owner -C "$FS/merged" -cf "$FS/ready.tar" .
}

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
	# no contender (BENCH_CONTENDERS=""): no pre-merged tree to compare with
	[ "${#order[@]}" -gt 0 ] || [ "$ONLY" = image ] || return 0

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
	case " ${order[*]} " in *" zready "*)
		ready_tar
		sync -f "$FS"
		echo "  ready.tar: $(du -m "$FS/ready.tar" | cut -f1) MiB"
		;;
	esac
	# the tarball rows: the pre-merged tree as one tarball layer, as GNU
	# tar writes it
	case " ${order[*]} " in *" tarx "*|*" untar "*)
		t0=$(now)
		tar --xattrs --xattrs-include='*' -C "$FS/merged" -cf - . |
			zstd -T0 -3 -q -o "$FS/merged.tar.zst"
		sync -f "$FS"
		t1=$(now)
		awk -v a="$t0" -v b="$t1" -v s="$(du -m "$FS/merged.tar.zst" |
			cut -f1)" 'BEGIN { printf "  merged.tar.zst: %d MiB in %.1f s\n", s, b - a }'
		;;
	esac

	if [ "$CACHE" = warm ]; then
		tar -cf - -C "$FS" stack merged | cat > /dev/null
		if [ -e "$FS/merged.tar.zst" ]; then
			cat "$FS/merged.tar.zst" > /dev/null
		fi
		if [ -e "$FS/ready.tar" ]; then
			cat "$FS/ready.tar" > /dev/null
		fi
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

# ---- diff: ten changes in a fourth layer -------------------------------------------

# Copy the directories leading to REL (a path in the merged view) up into L3,
# with their metadata, as the kernel would before changing anything in them.
copy_up_dirs() {
	local rel=$1 d='' p
	local -a parts
	IFS=/ read -ra parts <<< "$(dirname "$rel")"
	for p in "${parts[@]}"; do
		[ "$p" = . ] && continue
		d=${d:+$d/}$p
		[ -d "$L3/$d" ] && continue
		mkdir "$L3/$d"
		chown --reference="$FS/merged/$d" "$L3/$d"
		chmod --reference="$FS/merged/$d" "$L3/$d"
		COPIED_UP+=("$d")
	done
}

# run_ms KEY ROUND CMD...: time one run without /usr/bin/time (whose fork
# would be a good part of a few milliseconds) into $W/results.tsv
run_ms() {
	local key=$1 round=$2 rc=0 t0 t1 status=ok load
	shift 2
	settle
	load=$(load1)
	t0=$EPOCHREALTIME
	"$@" >"$W/run.out" 2>"$W/run.err" || rc=$?
	t1=$EPOCHREALTIME
	# hunion diff exits 1 when there are differences, as diff(1) does
	case $key:$rc in diff*:1) rc=0 ;; diff*:0) rc=0-no-changes ;; esac
	if [ "$rc" != 0 ]; then
		status=FAIL
		FAILED=1
		echo "bench: ${LABEL[$key]} failed (exit $rc):" >&2
		tail -n 5 "$W/run.err" >&2 || true
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' 1M "$key" "$round" \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')" \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')" \
		"${RSS_KIB:-0}" "$status" "$load" >> "$W/results.tsv"
	printf '  %-7s round %s  %-28s %9.1f ms  %s line(s) out  %s\n' 1M \
		"$round" "${LABEL[$key]}" \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) * 1000 }')" \
		"$(wc -l < "$W/run.out")" "$status"
}

# Ten changes in a new layer $L3 over the merged view ($FS/merged, listed
# in $W/merged.txt), as a person (or the kernel) would make them: 4 files
# created, 2 overwritten, 2 deleted with whiteouts, 1 directory made, 1
# file's mode changed, the directories leading to them copied up.
ten_changes() {
	local r rel
	local -a files
	COPIED_UP=()
	mkdir "$L3"
	# five regular files spread over the merged view, in directories
	mapfile -t files < <(awk -F'\t' '$2 == "f" && $1 ~ /\// { print $1 }' \
		"$W/merged.txt" | awk '{ a[NR] = $0 } END {
			for (i = 1; i <= 5; i++) print a[int(NR * i / 6)] }')
	[ "${#files[@]}" = 5 ] || die "could not pick five files from the merged view"
	for rel in "${files[@]}"; do copy_up_dirs "$rel"; done
	# create 4 files next to the picked ones
	for r in 0 1 2 3; do
		rel=$(dirname "${files[$r]}")/bench-new-$r.txt
		echo "new file $r" > "$L3/$rel"
	done
	# overwrite 2 files (copy-up, then new content)
	for r in 0 1; do
		cp -a "$FS/merged/${files[$r]}" "$L3/${files[$r]}"
		echo "changed" >> "$L3/${files[$r]}"
	done
	# delete 2 files with whiteouts
	for r in 2 3; do mknod "$L3/${files[$r]}" c 0 0; done
	# one new directory
	mkdir "$L3/$(dirname "${files[4]}")/bench-new-dir"
	# chmod one copied-up file
	cp -a "$FS/merged/${files[4]}" "$L3/${files[4]}"
	chmod 0604 "$L3/${files[4]}"
	# the copied-up directories keep their mtimes (the kernel would change
	# those of the directories whose entries changed)
	for ((r = ${#COPIED_UP[@]} - 1; r >= 0; r--)); do
		touch -h -r "$FS/merged/${COPIED_UP[$r]}" "$L3/${COPIED_UP[$r]}"
	done
	sync -f "$FS"
	echo "  ${L3##*/}: 4 created, 2 overwritten, 2 whiteouts, 1 mkdir," \
		"1 chmod; ${#COPIED_UP[@]} directories copied up"
}

diff_bench() {
	local S=$FS/stack r
	L3=$S/L3
	echo "== diff: ten changes in a new top layer L3 of the 1M stack"
	ten_changes

	# warm the lower layers' directories on the way to the changes
	"$HUNION" diff --format=overlay "$S/L0" "$S/L1" "$S/L2" "$L3" \
		> /dev/null || true
	for ((r = 1; r <= DIFF_ROUNDS; r++)); do
		run_ms diff "$r" "$HUNION" diff --format=overlay \
			"$S/L0" "$S/L1" "$S/L2" "$L3"
		cp "$W/run.out" "$W/diff.out"
		run_ms diffauto "$r" "$HUNION" diff \
			"$S/L0" "$S/L1" "$S/L2" "$L3"
	done
	echo "  hunion diff --format=overlay says:"
	sed 's/^/    /' "$W/diff.out"
	for ((r = 1; r <= RSYNC_ROUNDS; r++)); do
		run_ms rsync "$r" rsync_views
	done
	echo "  rsync -n --itemize-changes says:"
	sed 's/^/    /' "$W/run.out"
}

# rsync -n from the new view (L0..L3) to the old one (L0..L2): what changed
# shellcheck disable=SC2317  # reached through run_ms
rsync_views() {
	local S=$FS/stack rc=0
	mount -t overlay -o "ro,lowerdir=$S/L2:$S/L1:$S/L0" overlay "$MNT" ||
		return 1
	if mount -t overlay -o "ro,lowerdir=$L3:$S/L2:$S/L1:$S/L0" \
		overlay "$MNT2"; then
		rsync -rlpgoDn --delete --itemize-changes "$MNT2/" "$MNT/" || rc=$?
		umount "$MNT2" || rc=$?
	else
		rc=1
	fi
	umount "$MNT" || rc=$?
	return "$rc"
}

# ---- fsck: the top layer against a walk of every layer ------------------------------

# Put some of what fsck looks for into the top layer L2, as a crash or a
# careless copy leaves it, next to the whiteouts, opaque directories and
# copy-ups mkstack wrote: orphan whiteouts, a whiteout in a new directory,
# marker xattrs on the wrong entries or with wrong values, redundant
# opaque marks, leftovers of killed hunion runs, markers of other formats,
# copy-ups identical to the file beneath, an invalid redirect and a
# metacopy xattr of 2 bytes.  (About 100 entries among 16k: the cost is
# the walk's; the damage makes the checks report and look further.)  COUNT of each kind, spread over the
# directories L2 shares with L0 (the same ones every time: sorted picks).
bench_damage() {	# COUNT
	local n=$1 S=$FS/stack i d f
	local -a dirs files
	mapfile -t dirs < <(cd "$S/L2" && find . -mindepth 1 -type d -printf '%P\n' |
		LC_ALL=C sort | while read -r d; do
			[ -d "$S/L0/$d" ] && [ ! -e "$S/L1/$d" ] && echo "$d"
		done | awk -v n="$n" '{ a[NR] = $0 } END {
			for (i = 1; i <= n * 4 && NR; i++)
				print a[int(1 + (NR - 1) * i / (n * 4))] }')
	[ "${#dirs[@]}" -ge "$n" ] || { echo "  no directories to damage"; return 1; }
	# files of L0 in those directories that L1 and L2 leave alone
	mapfile -t files < <(for d in "${dirs[@]}"; do
		find "$S/L0/$d" -maxdepth 1 -type f -links 1 -printf '%f\n' |
			LC_ALL=C sort | while read -r f; do
				[ -e "$S/L1/$d/$f" ] || [ -L "$S/L1/$d/$f" ] ||
				[ -e "$S/L2/$d/$f" ] || [ -L "$S/L2/$d/$f" ] ||
				{ echo "$d/$f"; break; }
			done
		done)
	for ((i = 0; i < n; i++)); do
		d=$S/L2/${dirs[$((i % ${#dirs[@]}))]}
		mknod "$d/bench-orphan-$i" c 0 0
		mkdir "$d/bench-new-$i"
		mknod "$d/bench-new-$i/gone" c 0 0
		mkdir "$d/bench-redundant-$i"
		setfattr -n trusted.overlay.opaque -v y "$d/bench-redundant-$i"
		mkdir "$d/bench-badopaque-$i"
		setfattr -n trusted.overlay.opaque -v 1 "$d/bench-badopaque-$i"
		echo data > "$d/bench-opaquefile-$i"
		setfattr -n trusted.overlay.opaque -v y "$d/bench-opaquefile-$i"
		echo partial > "$d/.bench-out-$i.hunion-$(printf '%06x' "$i")"
		: > "$d/.bench-out-$i.hunion-lock"
		: > "$d/.wh.bench-oci-$i"
		# a lookalike, not a union whiteout: a layer with markers of
		# two formats is refused while the stack opens, before fsck
		# can report it (the view's problem sink does not see it yet)
		ln -s '(union-whiteout)' "$d/bench-union-$i"
		mkdir "$d/bench-redirect-$i"
		setfattr -n trusted.overlay.redirect -v "a/b" "$d/bench-redirect-$i"
	done
	for ((i = 0; i < n && i < ${#files[@]}; i++)); do
		f=${files[$i]}
		cp -a "$S/L0/$f" "$S/L2/$f"		# an identical copy-up
		[ $((i % 2)) = 0 ] && [ -s "$S/L0/$f" ] &&
			setfattr -n trusted.overlay.metacopy -v ab "$S/L2/$f"
	done
	sync -f "$FS"
	echo "  L2 damaged: $n each of 10 kinds in ${#dirs[@]} directories," \
		"$i identical copy-ups (half of them with a 2-byte metacopy xattr)"
}

fsck_bench() {
	local S=$FS/stack r i k order=(fsck walkx fsckall)
	echo "== fsck: the top layer checked against a walk of the three layers"
	bench_damage "${BENCH_FSCK_DAMAGE:-8}" || FAILED=1
	"$CC" -O2 -o "$W/walkx" "$HERE/walkx.c"
	# what fsck finds (untimed): which checks did work
	"$HUNION" fsck -n "$S/L0" "$S/L1" "$S/L2" > "$W/fsck.out" 2>&1 || true
	echo "  hunion fsck -n finds (problem ID: count):"
	awk '/^[a-z][A-Za-z]* (error|warning|info) / { n[$1]++ }
		END { for (i in n) printf "    %s: %d\n", i, n[i] }' "$W/fsck.out" |
		LC_ALL=C sort
	tail -n 1 "$W/fsck.out" | sed 's/^/  /'
	"$W/walkx" "$S/L0" "$S/L1" "$S/L2" | sed 's/^/  walkx: /'
	if [ "$CACHE" = warm ]; then
		"$W/walkx" "$S/L0" "$S/L1" "$S/L2" > /dev/null
	fi
	for ((r = 1; r <= FSCK_ROUNDS; r++)); do
		for ((i = 0; i < ${#order[@]}; i++)); do
			k=${order[$(((i + r - 1) % ${#order[@]}))]}
			run stack "$k" "$r"
		done
	done
}

# ---- an image: the stack as an OCI layout of gzip layers ----------------------------

# The stack's layers as OCI layer tarballs (L0 flattened, L1 and L2 as diff
# --oci writes them over the layers beneath), gzip, in a layout (untimed);
# then hunion merge -o of the image against umoci unpack of it.
image_bench() {
	local S=$FS/stack T=$FS/imgtmp r i k t0 t1
	local order=(img umoci imgflat imgpeer)
	echo "== image: the stack as an OCI image of 3 gzip layers"
	mkdir -p "$T" "$FS/tmp"
	t0=$(now)
	"$HUNION" flatten -q -o "$T/l0.tar.gz" --descriptor "$T/l0.tar.gz.json" \
		"$S/L0"
	# diff --oci -o exits 0 once the layer is written
	local lower=("$S/L0") rc
	for i in 1 2; do
		rc=0
		"$HUNION" diff --oci -q -o "$T/l$i.tar.gz" --descriptor \
			"$T/l$i.tar.gz.json" "${lower[@]}" "$S/L$i" || rc=$?
		[ "$rc" = 0 ] || die "diff --oci of L$i failed (exit $rc)"
		lower+=("$S/L$i")
	done
	python3 "$HERE/../tests/tools/oci_layout.py" "$FS/img" t \
		"$T/l0.tar.gz" "$T/l1.tar.gz" "$T/l2.tar.gz"
	IMG_BLOBS=()
	for i in 0 1 2; do
		IMG_BLOBS+=("$FS/img/blobs/sha256/$(sha256sum "$T/l$i.tar.gz" |
			cut -c1-64)")
	done
	rm -rf "$T"
	sync -f "$FS"
	t1=$(now)
	awk -v a="$t0" -v b="$t1" -v s="$(du -sm "$FS/img" | cut -f1)" \
		'BEGIN { printf "  %d MiB of blobs, made in %.1f s\n", s, b - a }'
	if [ "$CACHE" = warm ]; then
		tar -cf - -C "$FS" img | cat > /dev/null
	fi
	for ((r = 1; r <= IMAGE_ROUNDS; r++)); do
		for ((i = 0; i < ${#order[@]}; i++)); do
			k=${order[$(((i + r - 1) % ${#order[@]}))]}
			run stack "$k" "$r"
		done
	done
	rm -rf "$FS/out" "$FS/img" "$FS/tmp"
}

# ---- an image made without hunion: GNU tar, pigz or zstd, a python3 layout --------

# COPTS: the diff options for the index cache DIR (cold: a fresh one), as
# far as this hunion has them; else nothing, and XDG_CACHE_HOME says it
cache_opts() {	# DIR [cold]
	COPTS=()
	case $XCACHE in
	dir)	COPTS=(--cache-dir "$1") ;;
	nocache) [ "${2:-}" != cold ] || COPTS=(--no-cache) ;;
	esac
}

# The top layer blob of LAYOUT's image TAG (a one-layer flatten's layer).
top_layer() {	# LAYOUT TAG
	python3 - "$1" "$2" <<'EOF'
import json, os, sys
layout, tag = sys.argv[1:]
blob = lambda d: os.path.join(layout, "blobs", *d.split(":", 1))
m = [m for m in json.load(open(os.path.join(layout, "index.json")))["manifests"]
     if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
print(blob(json.load(open(blob(m[0]["digest"])))["layers"][-1]["digest"]))
EOF
}

# The stack as an image made as a user's other tools make one
# (bench/mkimage.sh: GNU tar --format=pax --xattrs, OCI whiteouts, pigz or
# zstd, the layout by python3), checked by umoci unpack (gzip: its tree
# against the pre-merged one) and skopeo inspect; then hunion beside its
# peer, pair by pair, alternating which goes first: flatten to a .tar.zst
# and to an image against the floor, merge -o against umoci unpack (gzip
# only: this umoci reads no zstd layers), and diff --oci of ten changes
# over the image, with an empty index cache against the blobs
# decompressed and their digests checked, and with a warm one against the
# same diff over the stack's directories.
tarimage_bench() {	# gzip|zstd
	local comp=$1 S=$FS/stack ph r i rc t0 t1
	local -a pairs=(xflat:xflatf xoci:xocif xmerge:xumoci xdiff1:xdiff1f
		xdiff2:xdiffd)
	ph=${comp:0:2}img
	XCOMP=$comp XIMG=$FS/ximg-$comp XUPPER=$FS/upper
	[ "$comp" = gzip ] || pairs=("${pairs[@]/xmerge:xumoci/xmerge}")
	echo "== $ph: the stack as an OCI image of 3 $comp layers made by GNU tar"
	mkdir -p "$FS/tmp"
	t0=$(now)
	if [ "$comp" = gzip ]; then
		"$HERE/mkimage.sh" "$XIMG" t "$S/L0" "$S/L1" "$S/L2"
	else
		"$HERE/mkimage.sh" -c zstd "$XIMG" t "$S/L0" "$S/L1" "$S/L2"
	fi
	mapfile -t XBLOBS < <(skopeo inspect "oci:$XIMG:t" | python3 -c '
import json, sys
for d in json.load(sys.stdin)["Layers"]:
    print(sys.argv[1] + "/blobs/sha256/" + d.split(":", 1)[1])' "$XIMG")
	[ "${#XBLOBS[@]}" = 3 ] || die "skopeo inspect oci:$XIMG:t: not 3 layers"
	sync -f "$FS"
	t1=$(now)
	awk -v a="$t0" -v b="$t1" -v s="$(du -sm "$XIMG" | cut -f1)" \
		'BEGIN { printf "  %d MiB of blobs, made in %.1f s;" \
		" skopeo inspect: 3 layers\n", s, b - a }'
	if [ "$comp" = gzip ]; then
		umoci unpack --image "$XIMG:t" "$FS/out" > /dev/null
		if verify "$FS/out/rootfs"; then
			echo "  umoci unpack: its tree equals the pre-merged one"
		else
			echo "bench: umoci's tree of the image differs" >&2
			FAILED=1
		fi
		rm -rf "$FS/out"
	fi
	ready_tar
	# the upper of the diff rows, and the index cache of the second run
	if [ ! -e "$XUPPER" ]; then L3=$XUPPER; ten_changes; fi
	# (the help read whole: grep -q would end the pipe early, and
	# pipefail then take hunion's SIGPIPE for a no)
	local help
	help=$("$HUNION" diff --help)
	case $help in
	*--cache-dir*) XCACHE=dir ;;
	*--no-cache*) XCACHE=nocache ;;
	*) XCACHE=xdg ;;
	esac
	echo "  index cache: $(case $XCACHE in
		dir) echo "--cache-dir (a fresh one for the first run)" ;;
		nocache) echo "--no-cache for the first run" ;;
		*) echo "no --cache-dir or --no-cache: XDG_CACHE_HOME" ;; esac)"
	rm -rf "$FS/dcache"
	cache_opts "$FS/dcache"
	rc=0
	XDG_CACHE_HOME=$FS/dcache TMPDIR=$FS/tmp "$HUNION" diff -q --oci \
		"${COPTS[@]}" -o "oci:$XIMG:d" "oci:$XIMG:t" "$XUPPER" ||
		rc=$?
	[ "$rc" = 0 ] || die "diff --oci over oci:$XIMG:t failed (exit $rc)"
	if [ "$CACHE" = warm ]; then
		cat "$XIMG"/blobs/sha256/* "$FS/ready.tar" > /dev/null
	fi
	for ((r = 1; r <= IMAGE_ROUNDS; r++)); do
		for i in "${pairs[@]}"; do
			if [ $((r % 2)) = 1 ]; then
				run "$ph" "${i%%:*}" "$r"
				[ "${i#*:}" = "$i" ] || run "$ph" "${i#*:}" "$r"
			else
				[ "${i#*:}" = "$i" ] || run "$ph" "${i#*:}" "$r"
				run "$ph" "${i%%:*}" "$r"
			fi
			# the image's change layer against the directories' one
			case $i:$r in xdiff2:*:1)
				cmp_layers "$(top_layer "$XIMG" d)" \
					"$FS/out/layer.tar.gz" ;;
			esac
		done
	done
	rm -rf "$FS/out" "$XIMG" "$FS/tmp" "$FS/dcache"
}

# The change layers of diff over the image and over the directories:
# their entries (tar -tv) should agree.
cmp_layers() {	# IMAGE-LAYER DIR-LAYER
	if [ -e "$2" ] && cmp -s <(tar -tvzf "$1" 2>&1) <(tar -tvzf "$2" 2>&1)
	then
		echo "  the change layers over the image and over the directories agree" \
			"($(tar -tzf "$1" | wc -l) entries)"
	else
		echo "bench: note: the change layer over the image differs from" \
			"the one over the directories:" >&2
		diff <(tar -tvzf "$1" 2>&1) <(tar -tvzf "$2" 2>&1) | head -n 8 >&2
	fi
}

# ---- start cost --------------------------------------------------------------------

# The start of short commands against tar --version (issue 25): a small
# stack of two directory layers (50 files, a change, an addition, a
# whiteout), START_RUNS runs of each command, alternating, timed by
# bench/startcost.c (fork to wait4, and the child's CPU time).
start_bench() {
	local S=$W/small i
	echo "== start cost: $START_RUNS runs of each, alternating"
	"$CC" -O2 -o "$W/startcost" "$HERE/startcost.c"
	mkdir -p "$S/L0/d" "$S/L1/d"
	for ((i = 1; i <= 50; i++)); do echo "$i" > "$S/L0/d/f$i"; done
	echo new > "$S/L1/d/f1"
	echo add > "$S/L1/added"
	: > "$S/L1/d/.wh.f2"
	"$W/startcost" "$START_RUNS" tarver "tar --version" \
		ver "$HUNION --version" \
		wls "$HUNION whiteout ls $S/L1" \
		sdiff "$HUNION diff $S/L0 $S/L1" >> "$W/results.tsv"
	rm -rf "$S"
}

# ---- main --------------------------------------------------------------------------

echo "bench: building mkstack"
"$CC" -O2 -o "$W/mkstack" "$HERE/mkstack.c" -lm
T_START=$(now)
: > "$W/results.tsv"
echo "bench: $HUNION; $CACHE cache before every timed run;" \
	"$ROUNDS rounds (1M stack: $BIG_ROUNDS); work dir $W"

if [ "$START_RUNS" -gt 0 ]; then start_bench; fi
if [ "$ONLY" != start ]; then
	phase stack "$ROUNDS" "${CONTENDERS[*]}" -n "$ENTRIES" -b "$BYTES"
fi
# before fsck_bench, which damages L2
if [ "$IMAGE_ROUNDS" -gt 0 ] &&
	{ [ "${#CONTENDERS[@]}" -gt 0 ] || [ "$ONLY" = image ]; }; then
	image_bench
	for k in "${TARIMAGES[@]}"; do tarimage_bench "$k"; done
	rm -rf "$FS/ready.tar" "$FS/upper"
fi
if [ "$FSCK_ROUNDS" -gt 0 ]; then fsck_bench; fi
if [ "$BIG_ENTRIES" -gt 0 ] && [ "$BIG_ROUNDS" -gt 0 ]; then
	phase 1M "$BIG_ROUNDS" "${BIG_CONTENDERS[*]}" -t -n "$BIG_ENTRIES"
	if [ "$DIFF_ROUNDS" -gt 0 ]; then diff_bench; fi
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
			# by round, for the ratios of pairs run side by side
			wall[key, $3] = $4
			if ($3 + 0 > nround) nround = $3 + 0
			walls[key] = walls[key] " " $4
			cmds[key] = cmds[key] " " $5
			if ($6 + 0 > rss[key] + 0) rss[key] = $6
			if (!(key in lo) || $4 + 0 < lo[key]) lo[key] = $4 + 0
			if (!(key in hi) || $4 + 0 > hi[key]) hi[key] = $4 + 0
		} else bad[key]++
		runs[key]++
		if ($8 != "") loads[++nload] = $8 + 0
	}
	END {
		label["merge"] = "hunion merge -o"
		label["link"] = "hunion merge --link -o"
		label["cp"] = "cp -a pre-merged"
		label["ovl"] = "overlay mount + cp -a"
		label["flat"] = "hunion flatten .tar.zst"
		label["tarz"] = "tar | zstd -T0 -3"
		label["zready"] = "zstd -T0 -3 of a ready tar"
		label["tarx"] = "hunion merge -o one tar.zst"
		label["untar"] = "tar --zstd -x"
		label["diff"] = "hunion diff --format=ovl"
		label["diffauto"] = "hunion diff (detect)"
		label["rsync"] = "rsync -n of 2 overlays"
		label["fsck"] = "hunion fsck -n"
		label["fsckall"] = "hunion fsck -n --all-layers"
		label["walkx"] = "walkx: lstat+listxattr all"
		label["img"] = "hunion merge -o oci:IMG"
		label["umoci"] = "umoci unpack"
		label["imgflat"] = "hunion flatten oci:IMG"
		label["imgpeer"] = "gzip -d blobs + tar|zstd"
		label["xflat"] = "flatten oci:IMG -o .tar.zst"
		label["xflatf"] = "floor: -d blobs + zstd tar"
		label["xoci"] = "flatten oci:IMG -o oci:"
		label["xocif"] = "floor: -d blobs + pigz tar"
		label["xmerge"] = "merge -o DIR oci:IMG"
		label["xumoci"] = "umoci unpack"
		label["xdiff1"] = "diff -o oci: 1st, no cache"
		label["xdiff1f"] = "floor: -d + sha256 of base"
		label["xdiff2"] = "diff -o oci: 2nd, cached"
		label["xdiffd"] = "diff --oci over dirs"
		label["prog"] = "flatten .tar, progress on pty"
		label["noprog"] = "flatten .tar, progress never"
		label["erofs"] = "hunion flatten -o erofs:"
		label["mkfs"] = "merge -o + mkfs.erofs"
		label["flattar"] = "hunion flatten .tar"
		label["tarver"] = "tar --version"
		label["ver"] = "hunion --version"
		label["wls"] = "hunion whiteout ls DIR"
		label["sdiff"] = "hunion diff (small stack)"
		# each row is compared with the baseline of its kind
		basekey["merge"] = basekey["link"] = basekey["cp"] = "cp"
		basekey["ovl"] = "cp"
		basekey["flat"] = basekey["tarz"] = basekey["zready"] = "tarz"
		basekey["tarx"] = basekey["untar"] = "untar"
		basekey["diff"] = basekey["diffauto"] = basekey["rsync"] = "rsync"
		basekey["fsck"] = basekey["fsckall"] = basekey["walkx"] = "walkx"
		basekey["img"] = basekey["umoci"] = "umoci"
		basekey["imgflat"] = basekey["imgpeer"] = "imgpeer"
		basekey["xflat"] = basekey["xflatf"] = "xflatf"
		basekey["xoci"] = basekey["xocif"] = "xocif"
		basekey["xmerge"] = basekey["xumoci"] = "xumoci"
		basekey["xdiff1"] = basekey["xdiff1f"] = "xdiff1f"
		basekey["xdiff2"] = basekey["xdiffd"] = "xdiffd"
		basekey["tarver"] = basekey["ver"] = basekey["wls"] = "tarver"
		basekey["sdiff"] = "tarver"
		basekey["prog"] = basekey["noprog"] = "noprog"
		basekey["erofs"] = basekey["mkfs"] = basekey["flattar"] = "mkfs"
		# and the diff and start rows are in milliseconds
		basems["diff"] = basems["diffauto"] = basems["rsync"] = 1
		basems["tarver"] = basems["ver"] = basems["wls"] = 1
		basems["sdiff"] = 1
		printf "\n%-6s %-27s %9s %15s %7s %9s %9s %s\n", "stack", \
			"contender", "median s", "(min - max)", "ratio", \
			"cmd s", "peak MiB", "runs"
		for (i = 1; i <= n; i++) {
			split(order[i], p, SUBSEP)
			m = median(order[i])
			base = median(p[1] SUBSEP basekey[p[2]])
			ms = p[2] in basems
			if (m < 0) {
				printf "%-6s %-27s %9s %15s %7s %9s %9s %d failed\n", \
					p[1], label[p[2]], "-", "", "-", "-", "-", \
					bad[order[i]]
				continue
			}
			ratio[order[i]] = base > 0 ? m / base : -1
			if (ms) {
				# the start rows: CPU time too, and its ratio
				c = p[1] == "start" ? \
					sprintf("%7.2fms", mmedian(order[i]) * 1000) : ""
				cbase = mmedian(p[1] SUBSEP basekey[p[2]])
				if (p[1] == "start" && cbase > 0)
					cratio[order[i]] = mmedian(order[i]) / cbase
				printf "%-6s %-27s %7.1fms %6.1f - %6.1fms %6.3fx %9s %9s %d%s\n", \
					p[1], label[p[2]], m * 1000, lo[order[i]] * 1000, \
					hi[order[i]] * 1000, ratio[order[i]], c, \
					p[1] == "start" ? sprintf("cpu %.2fx", \
					cratio[order[i]]) : "", runs[order[i]], \
					bad[order[i]] ? " (" bad[order[i]] " failed)" : ""
				continue
			}
			# no baseline in this run (merge of the zstd image): no ratio
			printf "%-6s %-27s %9.2f %6.2f - %6.2f %7s %9.2f %9.1f %d%s\n", \
				p[1], label[p[2]], m, lo[order[i]], hi[order[i]], \
				ratio[order[i]] < 0 ? "-" : \
				sprintf("%6.2fx", ratio[order[i]]), mmedian(order[i]), \
				rss[order[i]] / 1024, runs[order[i]], \
				bad[order[i]] ? " (" bad[order[i]] " failed)" : ""
		}
		printf "\ntargets\n"
		miss = 0
		miss += target("merge -o wall <= 0.90x cp -a pre-merged (stack)", \
			"stack" SUBSEP "merge", 0.90, "x")
		miss += target("merge --link wall <= 0.40x cp -a pre-merged (stack)", \
			"stack" SUBSEP "link", 0.40, "x")
		miss += target("merge -o one tar.zst wall <= 1.00x tar --zstd -x (stack)", \
			"stack" SUBSEP "tarx", 1.00, "x")
		miss += target("merge -o peak RSS <= 32 MiB (1M stack)", \
			"1M" SUBSEP "merge", 32, "MiB")
		miss += target("flatten .tar.zst wall <= 0.75x tar|zstd -T0 -3 (stack)", \
			"stack" SUBSEP "flat", 0.75, "x")
		miss += target("flatten .tar.zst <= 1.20x zstd of a ready tar (pairs)", \
			"stack" SUBSEP "flat", 1.20, "pair", "zready")
		miss += target("flatten .tar.zst wall <= 0.70x tar|zstd (1M tiny files)", \
			"1M" SUBSEP "flat", 0.70, "x")
		miss += target("flatten peak RSS <= 80 MiB (stack)", \
			"stack" SUBSEP "flat", 80, "MiB")
		miss += target("flatten peak RSS <= 80 MiB (1M stack)", \
			"1M" SUBSEP "flat", 80, "MiB")
		miss += target("flatten -o erofs: <= 0.50x merge -o + mkfs.erofs (pairs)", \
			"stack" SUBSEP "erofs", 0.50, "pair", "mkfs")
		miss += target("flatten -o erofs: <= 1.00x flatten .tar (pairs)", \
			"stack" SUBSEP "erofs", 1.00, "pair", "flattar")
		miss += target("flatten -o erofs: peak RSS <= 64 MiB (1M stack)", \
			"1M" SUBSEP "erofs", 64, "MiB")
		miss += target("diff of 10 changes over 1M entries <= 10 ms", \
			"1M" SUBSEP "diff", 10, "ms")
		miss += target("image -> tree wall <= 0.33x umoci unpack (gzip)", \
			"stack" SUBSEP "img", 0.33, "x")
		miss += target("flatten oci:IMG wall <= 1.20x gzip -d + tar|zstd", \
			"stack" SUBSEP "imgflat", 1.20, "x")
		# the image made without hunion: the median of the ratios of
		# the pair of each round (run side by side)
		for (ph = 1; ph <= 2; ph++) {
			x = ph == 1 ? "gzimg" : "zsimg"
			if (!((x SUBSEP "xflat") in seen)) continue
			miss += target("flatten " x " -o .tar.zst <= 1.20x floor (pairs)", \
				x SUBSEP "xflat", 1.20, "pair", "xflatf")
			miss += target("flatten " x " -o oci: <= 1.25x floor (pairs)", \
				x SUBSEP "xoci", 1.25, "pair", "xocif")
			if ((x SUBSEP "xumoci") in seen)
				miss += target("merge -o DIR " x " <= 0.35x umoci unpack (pairs)", \
					x SUBSEP "xmerge", 0.35, "pair", "xumoci")
			miss += target("diff --oci " x " 1st <= 1.30x -d+sha256 (pairs)", \
				x SUBSEP "xdiff1", 1.30, "pair", "xdiff1f")
			miss += target("diff --oci " x " 2nd <= 3.00x over dirs (pairs)", \
				x SUBSEP "xdiff2", 3.00, "pair", "xdiffd")
			miss += target("flatten " x " -o .tar.zst peak RSS <= 100 MiB", \
				x SUBSEP "xflat", 100, "MiB")
		}
		miss += target("fsck -n wall <= 0.30x walkx of all layers (stack)", \
			"stack" SUBSEP "fsck", 0.30, "x")
		miss += target("fsck -n peak RSS <= 32 MiB (stack)", \
			"stack" SUBSEP "fsck", 32, "MiB")
		miss += target("fsck -n --all-layers wall <= 1.00x walkx (stack)", \
			"stack" SUBSEP "fsckall", 1.00, "x")
		miss += target("progress line on a pty <= 1.01x none (flatten)", \
			"stack" SUBSEP "prog", 1.01, "x")
		miss += target("hunion --version wall <= 1.30x tar --version", \
			"start" SUBSEP "ver", 1.30, "x")
		miss += target("hunion --version CPU <= 1.30x tar --version", \
			"start" SUBSEP "ver", 1.30, "cpu")
		miss += target("whiteout ls DIR wall <= 1.30x tar --version", \
			"start" SUBSEP "wls", 1.30, "x")
		miss += target("whiteout ls DIR CPU <= 1.30x tar --version", \
			"start" SUBSEP "wls", 1.30, "cpu")
		miss += target("diff (small stack) wall <= 1.30x tar --version", \
			"start" SUBSEP "sdiff", 1.30, "x")
		miss += target("diff (small stack) CPU <= 1.30x tar --version", \
			"start" SUBSEP "sdiff", 1.30, "cpu")
		if (nload) {
			for (i = 2; i <= nload; i++)
				for (j = i; j > 1 && loads[j - 1] > loads[j]; j--) {
					t = loads[j]; loads[j] = loads[j - 1]; loads[j - 1] = t
				}
			printf "\nload (1-minute average at the start of each run," \
				" %d runs): min %.2f, median %.2f, max %.2f\n", nload, \
				loads[1], loads[int((nload + 1) / 2)], loads[nload]
		}
		exit strict && miss ? 3 : 0
	}
	# the median over the rounds of KEY / its PEER of the same round
	function pratio(key, peer,   p, r, n, i, j, t, a) {
		split(key, p, SUBSEP)
		n = 0
		for (r = 1; r <= nround; r++)
			if ((key, r) in wall && (p[1] SUBSEP peer, r) in wall &&
			    wall[p[1] SUBSEP peer, r] > 0)
				a[++n] = wall[key, r] / wall[p[1] SUBSEP peer, r]
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
				t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
			}
		if (n == 0) return -1
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function target(text, key, limit, unit, peer,   v, verdict) {
		if (unit == "x") v = (key in ratio) ? ratio[key] : -1
		else if (unit == "pair") v = pratio(key, peer)
		else if (unit == "cpu") v = (key in cratio) ? cratio[key] : -1
		else if (unit == "ms") v = (key in walls) ? median(key) * 1000 : -1
		else v = (key in rss && !bad[key]) ? rss[key] / 1024 : -1
		if (!(key in seen)) {
			printf "  %-56s %10s  not run\n", text, "-"; return 0
		}
		if (v < 0) { printf "  %-56s %10s  MISS\n", text, "n/a"; return 1 }
		verdict = v <= limit ? "PASS" : "MISS"
		if (unit == "x" || unit == "cpu" || unit == "pair")
			printf "  %-56s %9.2fx  %s\n", text, v, verdict
		else if (unit == "ms") printf "  %-56s %7.1f ms  %s\n", text, v, verdict
		else printf "  %-56s %6.1f MiB  %s\n", text, v, verdict
		return verdict == "MISS"
	}' "$W/results.tsv"
}

rc=0
summarize || rc=$?
if [ -n "$RESULTS" ]; then
	{
		printf 'stack\tcontender\tround\twall_s\tcmd_s\tpeak_rss_kib\tstatus\tload1\n'
		cat "$W/results.tsv"
	} > "$RESULTS"
	echo "raw results: $RESULTS"
fi
awk -v a="$T_START" -v b="$(now)" -v c="$CACHE" 'BEGIN {
	printf "\nwall = command + syncfs of the output, %s cache at the start of each run; ratio = median wall / median wall of the baseline of the same kind on the same stack (cp -a pre-merged; tar | zstd for flatten; umoci unpack for the image, gzip -d of its blobs + tar | zstd for its flatten; for the image made without hunion (gzimg, zsimg) the peer of each pair, and the targets take the median of the ratios of the pairs; rsync -n for diff, whose rows are in ms and have no syncfs; tar --version for the start rows, in ms, with the median CPU time and its ratio after the wall ones; --progress=never for the progress row); total bench time %.0f s\n", c, b - a }'
if [ "$FAILED" = 1 ]; then
	echo "bench: some runs failed or produced a wrong tree (see above)" >&2
	exit 1
fi
exit $rc
