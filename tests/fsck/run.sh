#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/fsck/run.sh HUNION [CASE...]
#
# The fsck case runner, in the style of e2fsprogs' tests: one folder per
# problem (and variant), tests/fsck/cases/NAME/, holding
#   mk        bash, run with its cwd a fresh empty temp dir (tests/cli/lib.sh
#             sourced first: HUNION, TOOLS, TMPD and its helpers); builds the
#             damaged layers there, under relative paths
#   layers    the fsck operands, bottom first, one per line
#   opts      optional: more fsck options, on one line (e.g. --workdir work)
#   nexit     optional: the exit status of `fsck -n` (default 4; 0 for a
#             case that finds info only)
#   expect.1  output and "[exit N]" of `hunion fsck -y OPTS LAYERS`
#   expect.2  the same for a second run, which must find nothing to repair
#   kernel    optional: the repaired stack must mount (overlay, read only,
#             every layer a lowerdir, this file's line as more options);
#             its whole view is read and must equal `hunion merge -o` of
#             the repaired stack.  Union layers are converted to overlay
#             (`whiteout convert --to=overlay -o`) first.
#   mount     optional, for a case with --workdir W in opts: the repaired
#             stack must mount read-write as the overlay it is (lowerdir
#             the layers beneath the top, upperdir the top, workdir W, this
#             file's line as more options), and a file can be made in it
#             (the kernel mounts read-only a workdir it cannot clean)
#   healthy   optional: paths of the merged view (`hunion merge -o`, one
#             per line) whose manifest lines must be the same before and
#             after the repair
# A mk may mount (a second filesystem under the temp dir): the runner
# unmounts everything under the temp dir at the end.
# Every case also checks that `fsck -n` changes no byte: a manifest of the
# whole temp dir (modes, owners, mtimes, xattrs, data) before and after;
# and that over its lower layers made tarballs (and its own tarballs),
# read from their path index, fsck finds what it finds over their unpack.
# A mk that exits 77 skips the case.
#
# HUNION_UPDATE=1 writes expect.1 and expect.2 from the actual output (read
# them before committing).  Ends with "fsck: N passed, N failed[, N skipped]".

set -u
# shellcheck source=tests/mntns.sh
. "$(dirname "${BASH_SOURCE[0]}")/../mntns.sh"
export LC_ALL=C

if [ $# -lt 1 ]; then
	echo "usage: $0 HUNION [CASE...]" >&2
	exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
HUNION=$(realpath -- "$1" 2>/dev/null || echo "$1")
shift
[ -x "$HUNION" ] || { echo "fsck: $HUNION: not an executable" >&2; exit 2; }
TOOLS=$(cd "$HERE/../tools" && pwd)
export HUNION TOOLS
PY=/usr/bin/python3

passed=0 failed=0 skipped=0

if [ $# -gt 0 ]; then
	cases=("$@")
else
	cases=()
	for d in "$HERE"/cases/*/; do
		[ -f "$d/mk" ] && cases+=("$(basename "$d")")
	done
fi

# The manifest of everything mk made (the runner's own files are in R),
# owners and every mtime included, and the markers' xattrs (which
# manifest.py leaves out).
snapshot() {
	local f
	for f in * .[!.]*; do
		[ -e "$f" ] || [ -L "$f" ] || continue
		[ "$f" = "$R" ] && continue
		echo "# $f"
		"$PY" "$TOOLS/manifest.py" "$f" 2>&1
		[ -d "$f" ] && (cd "$f" && getfattr -R -h -d -m - -e hex . \
			2>/dev/null)
	done
}

# Run fsck, print its output and "[exit N]" with the temp dir scrubbed.
fsck_run() {	# ARGS...
	local rc
	"$HUNION" fsck "$@" >$R/fsck-out 2>&1
	rc=$?
	sed "s|$TMPD|.|g" $R/fsck-out
	rm -f $R/fsck-out
	echo "[exit $rc]"
}

# What fsck ARGS finds, its repairs and their count left out.
findings() {	# -n|-y --dry-run, ARGS...
	"$HUNION" fsck "$@" 2>&1 |
		sed 's/ -- .*$//; s/): [0-9]* \(would be \)\{0,1\}repaired.*$/)/'
}

# fsck -n reads a checked bottom layer (--all-layers, or the layer alone)
# as having no markers while its own walk probes it, and walks it again
# where a probe settles it otherwise; a repair mode (-y --dry-run here)
# detects each layer first.  Both must find the same.  Where the dry run
# refuses (a tarball layer: read only), there is nothing to compare.
same_findings() {	# ARGS...
	"$HUNION" fsck -y --dry-run "$@" >/dev/null 2>&1
	[ $? -ge 8 ] && return 0
	findings -n "$@" >$R/find-n
	findings -y --dry-run "$@" >$R/find-y
	if ! diff -u $R/find-y $R/find-n >$R/find-diff; then
		echo "fsck -n $* finds what fsck -y --dry-run does not:"
		head -n 20 $R/find-diff
		return 1
	fi
	rm -f $R/find-n $R/find-y $R/find-diff
}

# Tarball layers are read from their path index (lib/tar/pindex.c, the
# cache or made afresh), never unpacked: fsck must find what it finds
# over their unpack (HUNION_INDEX=0), word for word, with the exit
# status; and through no TMPDIR (made a file here).  The stack: the
# case's layers, each lower directory made a tarball by GNU tar (pax,
# every xattr), and the case's own tarballs; -n, and --all-layers; the
# index made, then read from the cache.
index_same() {	# OPTS... -- LAYERS...
	local fopts=() t=() k n args l rc=0
	while [ "$1" != -- ]; do fopts+=("$1"); shift; done
	shift
	n=$#
	k=0
	for l in "$@"; do
		k=$((k + 1))
		if [ $k -lt $n ] && [ -d "$l" ] && [ ! -L "$l" ]; then
			tar --format=pax --xattrs --xattrs-include='*' \
				--numeric-owner -C "$l" -cf "$R/t$k.tar" . \
				2>/dev/null || return 0
			t+=("$R/t$k.tar")
		else
			t+=("$l")
		fi
	done
	case " ${t[*]}" in *.tar*) ;; *) return 0 ;; esac
	: >$R/notdir
	for args in -n "-n --all-layers"; do
		# shellcheck disable=SC2086
		HUNION_INDEX=0 "$HUNION" fsck $args "${fopts[@]}" "${t[@]}" \
			>$R/want 2>&1
		echo "[exit $?]" >>$R/want
		for k in made cached; do
			# shellcheck disable=SC2086
			TMPDIR=$R/notdir XDG_CACHE_HOME=$R/cache "$HUNION" \
				fsck $args "${fopts[@]}" "${t[@]}" >$R/got 2>&1
			echo "[exit $?]" >>$R/got
			if ! diff -u $R/want $R/got >$R/idiff; then
				echo "fsck $args over tarballs, the index $k," \
				     "finds what the unpack does not:"
				head -n 20 $R/idiff
				rc=1
			fi
		done
	done
	rm -rf $R/t[0-9]*.tar $R/notdir $R/cache $R/want $R/got $R/idiff
	return $rc
}

# The merged view of the stack, as a manifest, through hunion merge -o.
merged() {	# OUTDIR LAYERS...
	local out=$1
	shift
	rm -rf "$out"
	"$HUNION" merge -q -o "$out" "$@" >/dev/null 2>&1 || return 1
	"$PY" "$TOOLS/manifest.py" "$out"
	rm -rf "$out"
}

# Mount the stack read only (top layer first in lowerdir) and manifest it.
kernel_view() {	# OPTS LAYERS...
	local opts=$1 lower="" l rc
	shift
	for l in "$@"; do
		lower="$TMPD/$l${lower:+:$lower}"
	done
	mkdir -p $R/mnt
	if ! mount -t overlay overlay -o "ro,lowerdir=$lower${opts:+,$opts}" \
		"$R/mnt" 2>$R/mount-err; then
		echo "mount failed: $(cat $R/mount-err)"
		dmesg 2>/dev/null | tail -n 2
		return 1
	fi
	"$PY" "$TOOLS/manifest.py" $R/mnt
	rc=$?
	umount $R/mnt
	return $rc
}

# The kernel proof: the repaired stack mounts, reads whole, and shows what
# hunion merge -o shows.
kernel_proof() {	# LAYERS...
	local opts l conv=() fmt
	opts=$(head -n 1 "$CASE/kernel")
	[ "$(id -u)" = 0 ] || { echo "(kernel proof skipped: not root)"; return 0; }
	for l in "$@"; do
		fmt=$("$HUNION" whiteout ls --json "$l" 2>/dev/null |
			sed -n 's/.*"format":"\([a-z]*\)".*/\1/p' | head -n 1)
		if [ "$fmt" = union ]; then
			"$HUNION" whiteout convert -q --to=overlay -o "$R/k-$l" \
				"$l" >/dev/null || { echo "convert $l failed"; return 1; }
			conv+=("$R/k-$l")
		else
			conv+=("$l")
		fi
	done
	kernel_view "$opts" "${conv[@]}" >$R/kview || { cat $R/kview; return 1; }
	merged $R/kmerge "$@" >$R/hview || { echo "merge -o failed"; return 1; }
	if ! diff -u $R/hview $R/kview >$R/kdiff; then
		echo "kernel view differs from hunion merge -o:"
		head -n 20 $R/kdiff
		return 1
	fi
	for l in "${conv[@]}"; do
		[ "${l#"$R"/k-}" != "$l" ] && rm -rf "$l"
	done
	rm -f $R/kview $R/hview $R/kdiff
	return 0
}

# The workdir proof: the repaired stack mounts read-write with its workdir
# and takes a new file.
workdir_proof() {	# WORKDIR LAYERS...
	local opts work=$1 lower="" i rc=0
	shift
	opts=$(head -n 1 "$CASE/mount")
	[ "$(id -u)" = 0 ] || { echo "(workdir proof skipped: not root)"; return 0; }
	[ -n "$work" ] || { echo "mount: the case has no --workdir"; return 1; }
	for ((i = 0; i < $# - 1; i++)); do
		lower="$TMPD/${*:i + 1:1}${lower:+:$lower}"
	done
	mkdir -p $R/rw
	if ! mount -t overlay overlay -o "lowerdir=$lower,upperdir=$TMPD/${*:$#:1},workdir=$TMPD/$work${opts:+,$opts}" \
		"$R/rw" 2>$R/mount-err; then
		echo "read-write mount with the workdir failed: $(cat $R/mount-err)"
		dmesg 2>/dev/null | tail -n 2
		return 1
	fi
	if ! touch $R/rw/.fsck-rw-probe 2>$R/mount-err; then
		echo "the repaired stack mounts read only: $(cat $R/mount-err)"
		dmesg 2>/dev/null | tail -n 2
		rc=1
	fi
	rm -f $R/rw/.fsck-rw-probe
	umount $R/rw
	return $rc
}

# The lines of manifest $1 whose path is listed in $2.
healthy_lines() {	# MANIFEST HEALTHY
	awk 'NR == FNR { want[$0] = 1; next } ($1 in want)' "$2" "$1"
}

for name in "${cases[@]}"; do
	CASE=$HERE/cases/$name
	if [ ! -f "$CASE/mk" ] || [ ! -f "$CASE/layers" ]; then
		echo "FAIL $name: no such case (mk and layers)"
		failed=$((failed + 1))
		continue
	fi
	TMPD=$(mktemp -d "/tmp/hunion-fsck-$name.XXXXXX") || exit 1
	log=$(mktemp /tmp/hunion-fsck-log.XXXXXX)
	(
		cd "$TMPD" || exit 1
		export CASE TMPD
		# shellcheck source=tests/cli/lib.sh
		. "$HERE/../cli/lib.sh"
		# shellcheck disable=SC1091
		. "$CASE/mk" >.mk-out 2>&1 || { rc=$?; cat .mk-out; exit $rc; }
		rm -f .mk-out
		mapfile -t layers <"$CASE/layers"
		opts=()
		[ -f "$CASE/opts" ] && read -r -a opts <"$CASE/opts"
		nexit=4
		[ -f "$CASE/nexit" ] && nexit=$(cat "$CASE/nexit")
		bad=0
		R=.fsck-run
		mkdir "$R"

		if [ -f "$CASE/healthy" ]; then
			merged $R/hmerge "${layers[@]}" >$R/before ||
				{ echo "merge -o of the damaged stack failed"; bad=1; }
		fi
		snapshot >$R/snap-before
		"$HUNION" fsck -n "${opts[@]}" "${layers[@]}" >$R/n-out 2>&1
		rc=$?
		if [ "$rc" != "$nexit" ]; then
			echo "fsck -n exited $rc, not $nexit:"; cat $R/n-out; bad=1
		fi
		rm -f $R/n-out
		snapshot >$R/snap-after
		if ! diff -u $R/snap-before $R/snap-after >$R/snap-diff; then
			echo "fsck -n changed the layers:"; head -n 20 $R/snap-diff
			bad=1
		fi
		rm -f $R/snap-before $R/snap-after $R/snap-diff
		same_findings "${opts[@]}" --all-layers "${layers[@]}" || bad=1
		same_findings "${opts[@]}" "${layers[-1]}" || bad=1
		index_same "${opts[@]}" -- "${layers[@]}" || bad=1

		fsck_run -y "${opts[@]}" "${layers[@]}" >$R/out1
		fsck_run -y "${opts[@]}" "${layers[@]}" >$R/out2
		for k in 1 2; do
			if [ "${HUNION_UPDATE:-0}" = 1 ]; then
				cmp -s "$R/out$k" "$CASE/expect.$k" 2>/dev/null || {
					cp "$R/out$k" "$CASE/expect.$k"
					echo "UPDATED $name/expect.$k: read it" >&2
				}
			elif ! diff -u "$CASE/expect.$k" "$R/out$k"; then
				echo "(expect.$k differs)"; bad=1
			fi
		done
		if [ -f "$CASE/healthy" ] && [ -f $R/before ]; then
			merged $R/hmerge "${layers[@]}" >$R/after ||
				{ echo "merge -o of the repaired stack failed"; bad=1; }
			healthy_lines $R/before "$CASE/healthy" >$R/hb
			healthy_lines $R/after "$CASE/healthy" >$R/ha
			if [ ! -s $R/hb ] || ! diff -u $R/hb $R/ha; then
				echo "healthy entries changed (or none found)"; bad=1
			fi
		fi
		if [ -f "$CASE/kernel" ]; then
			kernel_proof "${layers[@]}" || bad=1
		fi
		if [ -f "$CASE/mount" ]; then
			workdir=
			for ((i = 0; i < ${#opts[@]}; i++)); do
				case ${opts[i]} in
				--workdir) workdir=${opts[i + 1]:-} ;;
				--workdir=*) workdir=${opts[i]#--workdir=} ;;
				esac
			done
			workdir_proof "$workdir" "${layers[@]}" || bad=1
		fi
		exit $bad
	) >"$log" 2>&1 </dev/null
	rc=$?
	if [ $rc = 77 ]; then
		echo "SKIP $name: $(grep -m1 '^SKIP' "$log" | sed 's/^SKIP:* *//')"
		skipped=$((skipped + 1))
	elif [ $rc != 0 ]; then
		echo "FAIL $name"
		sed 's/^/  /' "$log" | head -n 60
		failed=$((failed + 1))
	else
		[ -s "$log" ] && grep '^UPDATED' "$log"
		passed=$((passed + 1))
	fi
	if [ $rc = 0 ] || [ "${HUNION_FSCK_KEEP:-0}" != 1 ]; then
		umount "$TMPD/.fsck-run/mnt" 2>/dev/null
		# what mk or a proof mounted under the temp dir, innermost first
		awk -v d="$TMPD/" 'index($5, d) == 1 { print $5 }' \
			/proc/self/mountinfo | sort -r |
			while read -r m; do umount "$m"; done
		rm -rf "$TMPD"
	else
		echo "  (kept $TMPD)"
	fi
	rm -f "$log"
done

echo "fsck: $passed passed, $failed failed${skipped:+, $skipped skipped}"
[ $failed = 0 ]
