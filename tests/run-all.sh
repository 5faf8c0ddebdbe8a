#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/run-all.sh BUILD_DIR
#
# Every test suite for the build in BUILD_DIR (BUILD_DIR/hunion and
# BUILD_DIR/unit-tests):
#   unit    the criterion unit tests
#   cli     tests/cli/run.sh, the CLI cases
#   doc-sync tests/cli/doc-sync.sh: man pages and completions against the
#           command table
#   fuzz    tests/fuzz/replay.sh, every fuzz target over its seed corpus,
#           without libFuzzer (against BUILD_DIR/libhunion.a)
#   kernel  tests/kernel/run.sh, the differential test against overlayfs
#           (60 seeds; 20 when HUNION_SANITIZED=1, that build being slow;
#           HUNION_KERNEL_SEEDS=N overrides)
#   flatten tests/kernel/flatten-roundtrip.sh, flatten's tarballs read back
#           by bsdtar, libarchive, Python's tarfile and GNU tar against the
#           kernel's view (20 seeds; 8 when HUNION_SANITIZED=1;
#           HUNION_FLATTEN_SEEDS=N overrides)
#   diff    tests/kernel/diff-kernel.sh, changes made through a real overlay
#           mount must come out of hunion diff exactly (10 seeds; 3 when
#           HUNION_SANITIZED=1; HUNION_DIFF_SEEDS=N overrides)
#   fsck-damage tests/kernel/fsck-damage.sh, random damage in a healthy
#           stack: fsck -n finds it, fsck -y repairs it without touching
#           a healthy entry, the kernel mounts the result (20 seeds; 5 when
#           HUNION_SANITIZED=1; HUNION_FSCK_DAMAGE_SEEDS=N overrides)
#   tarstream tests/kernel/tarstream.sh, merge -o of one random tarball
#           layer streamed against the general path (unpack, then the
#           view) and against GNU tar's extraction (20 seeds; 5 when
#           HUNION_SANITIZED=1; HUNION_TARSTREAM_SEEDS=N overrides)
#   pindex  tests/kernel/pindex.sh, the path index of random tarball
#           layers (and of their blobs in an image, and of hostile ones)
#           against their unpack, and of the tarballs the CLI cases give
#           hunion (10 seeds; 3 and no CLI cases when HUNION_SANITIZED=1;
#           HUNION_PINDEX_SEEDS=N, HUNION_PINDEX_CLI=0|1 override)
#   mergedown tests/kernel/mergedown.sh, merge --into of random stacks: the
#           stack without its top layer shows the kernel's view of the
#           whole stack, or the merge is refused (20 seeds; 5 when
#           HUNION_SANITIZED=1; HUNION_MERGEDOWN_SEEDS=N overrides); seeds
#           16 and 17 (redirects into new directories of the target) are
#           also killed at every step and re-run, unless sanitized
#   mergedown-keep the same with --keep-upper (HUNION_MERGEDOWN_KEEP=1):
#           the upper must stay as it was (10 seeds; 3 when sanitized;
#           HUNION_MERGEDOWN_KEEP_SEEDS=N overrides); seed 2 (a redirected
#           directory, merged through a clone) killed at every step
#   diffindex tests/kernel/diffindex.sh, diff over random tarball stacks
#           and their image read from the path index against the unpack
#           (HUNION_INDEX=0) and against the kernel's lower (10 seeds; 3
#           when HUNION_SANITIZED=1; HUNION_DIFFINDEX_SEEDS=N overrides)
#   flattenindex tests/kernel/flattenindex.sh, flatten of random tarball
#           stacks and their image read from the path index (the bytes
#           forward where the tarballs are sorted) against the unpack
#           (HUNION_INDEX=0): the same bytes (10 seeds; 3 when
#           HUNION_SANITIZED=1; HUNION_FLATTENINDEX_SEEDS=N overrides)
#   erofs   tests/kernel/erofs.sh, flatten -o erofs: of random stacks: the
#           kernel's mount of the image against its overlay mount of the
#           stack and against merge -o, fsck.erofs and dump.erofs, the
#           same bytes with no thread and from layers listed in another
#           order, the format's extremes (20 seeds; 5 when
#           HUNION_SANITIZED=1; HUNION_EROFS_SEEDS=N overrides)
# A sanitizer's report makes the process exit 86 (ASAN_OPTIONS and
# UBSAN_OPTIONS exitcode=86), a status no test accepts.
# Every suite runs even when an earlier one failed.  Prints one summary
# line per suite, "NAME: N passed, N failed[...] (T s)" with T the suite's
# wall time in seconds (the header above them has the total), and exits
# non-zero if any suite failed.

set -u
# shellcheck source=tests/mntns.sh
. "$(dirname "${BASH_SOURCE[0]}")/mntns.sh"
export LC_ALL=C
# A sanitizer's report ends the process with status 86, which no test
# accepts.  With the default, 1, it would pass wherever hunion may exit 1
# (diff with changes, an error that is expected with any message).
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=86
export UBSAN_OPTIONS=${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}exitcode=86

if [ $# != 1 ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
B=$(cd "$1" 2>/dev/null && pwd) || { echo "run-all: $1: no such dir" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
bad=0
summary=()
t_all=$SECONDS

# The summary line LINE of a suite that started at second T0 of $SECONDS,
# with its wall time: "(T s)" appended, or "; T s" added inside the
# parenthesis LINE ends with.
timed() {	# LINE T0
	local t=$((SECONDS - $2))
	case $1 in
	*")") echo "${1%)}; $t s)" ;;
	*) echo "$1 ($t s)" ;;
	esac
}

# ---- unit tests
unit_log=$(mktemp /tmp/hunion-unit.XXXXXX)
t0=$SECONDS
if [ ! -x "$B/unit-tests" ]; then
	line="unit: 0 passed, 1 failed ($B/unit-tests is not built)"
	bad=1
else
	echo "== unit: $B/unit-tests"
	"$B/unit-tests" --jobs=2 >"$unit_log" 2>&1
	rc=$?
	# [====] Synthesis: Tested: N | Passing: N | Failing: N | Crashing: N
	syn=$(sed -n 's/.*Synthesis: Tested: *\([0-9]*\) *| *Passing: *\([0-9]*\) *| *Failing: *\([0-9]*\) *| *Crashing: *\([0-9]*\).*/\1 \2 \3 \4/p' "$unit_log" | tail -n 1)
	if [ -z "$syn" ]; then
		tail -n 20 "$unit_log"
		line="unit: 0 passed, 1 failed (no criterion summary; exit $rc)"
		bad=1
	else
		read -r tested passing failing crashing <<<"$syn"
		nfail=$((failing + crashing))
		line="unit: $passing passed, $nfail failed"
		if [ "$nfail" != 0 ] || [ $rc != 0 ] ||
		   [ "$tested" != "$passing" ]; then
			grep -v '^\[----\]\|^\[RUN \]\|^\[PASS\]' "$unit_log" |
				tail -n 40
			[ "$nfail" = 0 ] && line="$line (exit $rc)"
			bad=1
		fi
	fi
fi
rm -f "$unit_log"
line=$(timed "$line" $t0)
echo "$line"
summary+=("$line")

# ---- a suite that ends with "NAME: N passed, N failed..."
suite() {
	local name=$1 log rc line t0=$SECONDS
	shift
	echo "== $name: $*"
	log=$(mktemp /tmp/hunion-suite.XXXXXX)
	"$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	line=$(grep "^$name: [0-9]* passed, [0-9]* failed" "$log" | tail -n 1)
	rm -f "$log"
	if [ -z "$line" ]; then
		line="$name: 0 passed, 1 failed (no summary; exit $rc)"
		rc=1
	fi
	[ "$rc" != 0 ] && bad=1
	summary+=("$(timed "$line" $t0)")
}

suite cli "$HERE/cli/run.sh" "$B/hunion"
suite doc-sync "$HERE/cli/doc-sync.sh" "$B/hunion"
suite fsck "$HERE/fsck/run.sh" "$B/hunion"
suite fuzz "$HERE/fuzz/replay.sh" "$B"

seeds=60
[ "${HUNION_SANITIZED:-0}" = 1 ] && seeds=20
seeds=${HUNION_KERNEL_SEEDS:-$seeds}
suite kernel "$HERE/kernel/run.sh" "$B/hunion" "$seeds"

seeds=20
[ "${HUNION_SANITIZED:-0}" = 1 ] && seeds=8
seeds=${HUNION_FLATTEN_SEEDS:-$seeds}
suite flatten "$HERE/kernel/flatten-roundtrip.sh" "$B/hunion" "$seeds"

seeds=10
[ "${HUNION_SANITIZED:-0}" = 1 ] && seeds=3
suite diff "$HERE/kernel/diff-kernel.sh" "$B/hunion" "${HUNION_DIFF_SEEDS:-$seeds}"

seeds=20
[ "${HUNION_SANITIZED:-0}" = 1 ] && seeds=5
suite fsck-damage "$HERE/kernel/fsck-damage.sh" "$B/hunion" \
	"${HUNION_FSCK_DAMAGE_SEEDS:-$seeds}"

seeds=20
[ "${HUNION_SANITIZED:-0}" = 1 ] && seeds=5
suite tarstream "$HERE/kernel/tarstream.sh" "$B/hunion" \
	"${HUNION_TARSTREAM_SEEDS:-$seeds}"

seeds=10 cli=1
[ "${HUNION_SANITIZED:-0}" = 1 ] && seeds=3 cli=0
suite pindex env HUNION_PINDEX_CLI="${HUNION_PINDEX_CLI:-$cli}" \
	"$HERE/kernel/pindex.sh" "$B/hunion" "${HUNION_PINDEX_SEEDS:-$seeds}"

seeds=20
[ "${HUNION_SANITIZED:-0}" = 1 ] && seeds=5
kill="16 17"
[ "${HUNION_SANITIZED:-0}" = 1 ] && kill=
export HUNION_MERGEDOWN_KILL=${HUNION_MERGEDOWN_KILL-$kill}
suite mergedown "$HERE/kernel/mergedown.sh" "$B/hunion" \
	"${HUNION_MERGEDOWN_SEEDS:-$seeds}"

seeds=10
[ "${HUNION_SANITIZED:-0}" = 1 ] && seeds=3
kill=2
[ "${HUNION_SANITIZED:-0}" = 1 ] && kill=
suite mergedown-keep env HUNION_MERGEDOWN_KEEP=1 \
	HUNION_MERGEDOWN_KILL="$kill" "$HERE/kernel/mergedown.sh" "$B/hunion" \
	"${HUNION_MERGEDOWN_KEEP_SEEDS:-$seeds}"

seeds=10
[ "${HUNION_SANITIZED:-0}" = 1 ] && seeds=3
suite diffindex "$HERE/kernel/diffindex.sh" "$B/hunion" \
	"${HUNION_DIFFINDEX_SEEDS:-$seeds}"

seeds=10
[ "${HUNION_SANITIZED:-0}" = 1 ] && seeds=3
suite flattenindex "$HERE/kernel/flattenindex.sh" "$B/hunion" \
	"${HUNION_FLATTENINDEX_SEEDS:-$seeds}"

seeds=20
[ "${HUNION_SANITIZED:-0}" = 1 ] && seeds=5
suite erofs "$HERE/kernel/erofs.sh" "$B/hunion" "${HUNION_EROFS_SEEDS:-$seeds}"

echo "== summary ($B, $((SECONDS - t_all)) s)"
printf '%s\n' "${summary[@]}"
if [ $bad != 0 ]; then
	echo "run-all: FAILED"
	exit 1
fi
echo "run-all: all suites passed"
