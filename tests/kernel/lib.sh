# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# tests/kernel/lib.sh - what the kernel tests (run.sh, flatten-roundtrip.sh,
# diff-kernel.sh) share.  A script sets SUITE, the word its output lines
# start with ("kernel", "flatten", "diff"), sources this file, then calls
#   kt_args USAGE "$@"    usage message (exit 2) unless there is an
#                         argument; HUNION: the binary it names
#   kt_setup NSKIP        skip (exit 0, "N skipped") unless root with
#                         overlayfs; WORK, a work dir removed on exit with
#                         every mount below it; MNT and FS, dirs in it
#   layers_tmpfs SIZE     a tmpfs with trusted and user xattrs on FS
# and ends with finish, the "SUITE: N passed, N failed" line and the exit
# status.  Between those: manifest, lowerdir, same and keep, and for the
# random stacks of tests/tools/mkstack.py (in $FS/stack) new_stack (which
# sets STACK_LAYERS, STACK_FORMS, STACK_AMBIGUOUS and USERX), info,
# stack_layers, kernel_manifest and stack_result.  HUNION_KEEP=DIR keeps
# what failed; HUNION_KERNEL_VERBOSE=1 prints whole diffs.
#
# Python is always the system's /usr/bin/python3 (make deps installs it),
# never the first python3 on PATH: a version manager's shim there costs
# about a second per start, and these suites start thousands.

set -u
# shellcheck source=tests/mntns.sh
. "$(dirname "${BASH_SOURCE[0]}")/../mntns.sh"
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)	# tests/kernel
TOOLS=$(cd "$HERE/../tools" && pwd)
passed=0 failed=0
USERX=0		# 1: the stack's markers are under user.overlay.*
STACK_LAYERS=0 STACK_FORMS='' STACK_AMBIGUOUS=''	# see new_stack
LOOPIMG=	# a loop image to remove on exit
NSKIP=0

kt_args() {	# USAGE ARGS...
	local usage=$1
	shift
	if [ $# -lt 1 ]; then
		echo "usage: $0 $usage" >&2
		exit 2
	fi
	HUNION=$(realpath -- "$1" 2>/dev/null || echo "$1")
	[ -x "$HUNION" ] ||
		{ echo "$SUITE: $1: not an executable" >&2; exit 2; }
}

skip_all() {	# REASON
	echo "$SUITE: skipped: $1"
	echo "$SUITE: 0 passed, 0 failed, $NSKIP skipped"
	exit 0
}

kt_setup() {	# NSKIP
	NSKIP=$1
	[ "$(id -u)" = 0 ] ||
		skip_all "not root (mounting overlayfs needs root)"
	grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null
	grep -qw overlay /proc/filesystems ||
		skip_all "overlayfs is not available in this kernel"
	WORK=$(mktemp -d "/tmp/hunion-$SUITE.XXXXXX") || exit 1
	MNT=$WORK/mnt
	FS=$WORK/fs
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	mkdir -p "$MNT" "$FS"
}

# Unmount whatever is mounted below WORK, the last mount first (an overlay
# before the filesystem its layers are on), and remove it.
cleanup() {
	local m
	awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts |
		tac | while read -r m; do umount "$m"; done
	[ -n "$LOOPIMG" ] && rm -f "$LOOPIMG"
	rm -rf "$WORK"
}

xattrs_ok() {	# DIR: can files in DIR have trusted.* and user.* xattrs?
	touch "$1/.probe" &&
		setfattr -n trusted.probe -v y "$1/.probe" 2>/dev/null &&
		setfattr -n user.probe -v y "$1/.probe" 2>/dev/null
	local rc=$?
	rm -f "$1/.probe"
	return $rc
}

# A fresh tmpfs of SIZE on FS for the layers, with trusted and user xattrs
# (tmpfs has them since Linux 6.6); fails, with nothing mounted, otherwise.
layers_tmpfs() {	# SIZE
	mount -t tmpfs -o "size=$1,mode=0755" "hunion-$SUITE" "$FS" &&
		xattrs_ok "$FS" && return 0
	mountpoint -q "$FS" && umount "$FS"
	return 1
}

manifest() {
	/usr/bin/python3 "$TOOLS/manifest.py" "$@"
}

# The lowerdir= value for LAYER... given bottom first.
lowerdir() {
	local s='' l
	for l in "$@"; do s=$l${s:+:}$s; done
	echo "$s"
}

# A value from a mkstack.py stack's info.json: $1 stack dir, $2 expression
# of i.  (new_stack has read what the suites need of $FS/stack already.)
info() {
	/usr/bin/python3 -c 'import json, sys
i = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))' "$1/info.json" "$2"
}

# Write the random stack $FS/stack with tests/tools/mkstack.py ARGS... for
# the check LABEL, and read its info.json once: STACK_LAYERS (how many
# layers), STACK_FORMS (its forms, space-separated), STACK_AMBIGUOUS (those
# of them that auto-detection cannot be expected to pick) and USERX.  When
# mkstack.py fails: say so, count a failure, and fail.
new_stack() {	# LABEL ARGS...
	local label=$1 v
	shift
	rm -rf "$FS/stack"
	if ! /usr/bin/python3 "$TOOLS/mkstack.py" --out "$FS/stack" "$@" \
		>/dev/null 2>"$FS/mkstack.err" ||
	   ! mapfile -t v < <(/usr/bin/python3 -c 'import json, sys
i = json.load(open(sys.argv[1]))
print(i["layers"], int(i["userxattr"]))
print(" ".join(i["forms"]))
print(" ".join(f for f in i["forms"] if i["ambiguous"][f]))
print("end")' "$FS/stack/info.json" 2>>"$FS/mkstack.err") ||
	   [ "${v[3]:-}" != end ]; then
		echo "FAIL $label: mkstack.py failed"
		tail -n 5 "$FS/mkstack.err" | sed 's/^/  /'
		failed=$((failed + 1))
		return 1
	fi
	read -r STACK_LAYERS USERX <<<"${v[0]}"
	# shellcheck disable=SC2034	# for the suites
	STACK_FORMS=${v[1]} STACK_AMBIGUOUS=${v[2]}
}

# Count the fixed check LABEL as passed when OK is 1, else as failed.
result() {	# LABEL OK
	if [ "$2" = 1 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL $1"
	fi
}

# "hunion flatten HUNION_ARGS..." must fail with exit status WANT_RC and
# a message matching RE (grep -E; "." for any), leaving DIR empty (- for
# none to check): the fixed check "error: LABEL".
check_error() {	# LABEL WANT_RC DIR RE HUNION_ARGS...
	local label=$1 want=$2 dir=$3 re=$4 rc ok=1
	shift 4
	"$HUNION" flatten "$@" >"$WORK/err.log" 2>&1
	rc=$?
	[ $rc = "$want" ] || { ok=0; echo "  exit $rc, want $want"; }
	grep -Eq "$re" "$WORK/err.log" ||
		{ ok=0; echo "  no message matching $re"; }
	if [ "$dir" != - ] && [ -n "$(ls -A "$dir")" ]; then
		ok=0
		echo "  left behind: $(find "$dir" -mindepth 1 | head -n 3)"
	fi
	[ $ok = 1 ] || sed 's/^/  /' "$WORK/err.log"
	result "error: $label" $ok
}

# Count the check LABEL of $FS/stack (from mkstack.py ARGS...) as passed
# when OK is 1; else as failed, with the command that writes the stack
# again, and keep the stack (HUNION_KEEP).  Then remove it.
stack_result() {	# OK LABEL ARGS...
	local ok=$1 label=$2
	shift 2
	if [ "$ok" = 1 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "  reproduce: /usr/bin/python3 $TOOLS/mkstack.py" \
		     "--out DIR $*"
		keep "$label" "$FS/stack"
	fi
	rm -rf "$FS/stack"
}

# The layer dirs of form $2 of the mkstack.py stack $1, bottom first.
stack_layers() {
	local i n=$STACK_LAYERS
	[ "$1" -ef "$FS/stack" ] || n=$(info "$1" 'i["layers"]')
	for ((i = 0; i < n; i++)); do echo "$1/$2/L$i"; done
}

# Mount the overlay form of the mkstack.py stack $1 read-only (markers under
# user.* when USERX=1) and write the manifest of what the kernel shows
# (manifest.py options $3...) into $2.  Fails when the kernel refuses the
# stack or the walk meets errors (a generator bug: the stack must be valid).
kernel_manifest() {
	local dir=$1 out=$2 opts=redirect_dir=follow,metacopy=on rc layers
	shift 2
	[ "$USERX" = 1 ] && opts=userxattr
	mapfile -t layers < <(stack_layers "$dir" overlay)
	if ! mount -t overlay overlay \
		-o "ro,lowerdir=$(lowerdir "${layers[@]}"),$opts" "$MNT" \
		2>"$dir/mount.err"; then
		echo "  mount failed: $(cat "$dir/mount.err")"
		dmesg 2>/dev/null | tail -n 3 | sed 's/^/  /'
		return 1
	fi
	manifest "$@" "$MNT" >"$out" 2>"$dir/kmanifest.err"
	rc=$?
	umount "$MNT"
	if [ $rc != 0 ]; then
		echo "  the kernel's view has errors (a generator bug):"
		grep ' ! ' "$out" | head -n 5 | sed 's/^/  /'
		cat "$dir/kmanifest.err"
		return 1
	fi
}

# The files WANT and GOT must be equal.  Otherwise print "  LABEL differ:"
# and their first differing lines (the whole diff with
# HUNION_KERNEL_VERBOSE=1), keep the diff in GOT.diff, and fail.
same() {	# LABEL WANT GOT
	if diff -u --label "$2" --label "$3" "$2" "$3" >"$3.diff"; then
		rm -f "$3.diff"
		return 0
	fi
	echo "  $1 differ:"
	if [ "${HUNION_KERNEL_VERBOSE:-0}" = 1 ]; then
		sed 's/^/    /' "$3.diff"
	else
		sed -n '3,$p' "$3.diff" | grep '^[-+]' | head -n 12 |
			cut -c1-300 | sed 's/^/    /'
	fi
	return 1
}

# HUNION_KEEP=DIR: copy the work DIR of a failing check there as NAME.
keep() {	# NAME DIR
	[ -n "${HUNION_KEEP:-}" ] || return 0
	mkdir -p "$HUNION_KEEP" &&
		cp -a "$2" "$HUNION_KEEP/${1// /-}" 2>/dev/null &&
		echo "  kept in $HUNION_KEEP/${1// /-}"
}

finish() {
	echo "$SUITE: $passed passed, $failed failed"
	[ "$failed" = 0 ]
}
