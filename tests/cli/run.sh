#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/cli/run.sh HUNION [CASE...]
#
# The CLI case runner, e2fsprogs style.  Each case is a folder
# tests/cli/cases/NAME/ holding
#   script   bash, run with its cwd a fresh empty temp dir, tests/cli/lib.sh
#            sourced first, and HUNION, TOOLS, CASE, TMPD set (see lib.sh)
#   expect   what the script must print on stdout, exactly
# A script that exits 77 is skipped (it prints why); any other non-zero
# exit status is a failure of the case.
#
# HUNION_UPDATE=1 rewrites each case's expect from the actual output (for
# authoring: read every expect file it writes before committing it).
# HUNION_CLI_KEEP=1 keeps the temp dirs of failing cases.
#
# Prints "FAIL NAME" and a diff for each failure, "SKIP NAME: why" for
# skipped cases, and ends with "cli: N passed, N failed[, N skipped]".

set -u
# Run as a background job of a script, the suite starts with SIGINT
# ignored (under nohup, SIGHUP too), and a hunion started from it keeps
# it so: the cases that interrupt hunion (HUNION_FAULT=int:N, as Ctrl-C;
# interrupt-blocked-input's SIGHUP) need them caught.  Run again with
# them as they should be (env(1) resets them before exec).
if [ -z "${HUNION_CLI_SIGINT:-}" ]; then
	export HUNION_CLI_SIGINT=1
	exec env --default-signal=INT,HUP,TERM "$0" "$@"
fi
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
[ -x "$HUNION" ] || { echo "cli: $HUNION: not an executable" >&2; exit 2; }
TOOLS=$(cd "$HERE/../tools" && pwd)
export HUNION TOOLS

passed=0 failed=0 skipped=0

if [ $# -gt 0 ]; then
	cases=("$@")
else
	cases=()
	for d in "$HERE"/cases/*/; do
		[ -f "$d/script" ] && cases+=("$(basename "$d")")
	done
fi

for name in "${cases[@]}"; do
	CASE=$HERE/cases/$name
	if [ ! -f "$CASE/script" ]; then
		echo "FAIL $name: no such case ($CASE/script)"
		failed=$((failed + 1))
		continue
	fi
	TMPD=$(mktemp -d "/tmp/hunion-cli-$name.XXXXXX") || exit 1
	# a cache of path indexes of its own (diff over tarballs), outside
	# the case's dir: no run sees another's, none the user's
	cachehome=$(mktemp -d "/tmp/hunion-cli-cache.XXXXXX") || exit 1
	out=$(mktemp /tmp/hunion-cli-out.XXXXXX)
	err=$(mktemp /tmp/hunion-cli-err.XXXXXX)
	(
		cd "$TMPD" || exit 1
		export CASE TMPD XDG_CACHE_HOME=$cachehome
		# shellcheck source=tests/cli/lib.sh
		. "$HERE/lib.sh"
		# shellcheck disable=SC1091
		. "$CASE/script"
	) >"$out" 2>"$err" </dev/null
	rc=$?
	bad=1
	if [ $rc = 77 ]; then
		bad=0
		echo "SKIP $name: $(grep -m1 '^SKIP' "$out" | sed 's/^SKIP:* *//')"
		skipped=$((skipped + 1))
	elif [ "${HUNION_UPDATE:-0}" = 1 ] && [ $rc = 0 ]; then
		if ! cmp -s "$out" "$CASE/expect" 2>/dev/null; then
			cp "$out" "$CASE/expect"
			echo "UPDATED $name: read $CASE/expect before committing it"
		fi
		bad=0
		passed=$((passed + 1))
	elif [ $rc != 0 ]; then
		echo "FAIL $name: the script exited $rc"
		sed 's/^/  stderr: /' "$err" | head -n 20
		failed=$((failed + 1))
	elif [ ! -f "$CASE/expect" ]; then
		echo "FAIL $name: no expect file (HUNION_UPDATE=1 writes it)"
		failed=$((failed + 1))
	elif ! diff -u --label "$name/expect" --label "$name/actual" \
		"$CASE/expect" "$out" >"$out.diff"; then
		echo "FAIL $name"
		cat "$out.diff"
		[ -s "$err" ] && sed 's/^/  stderr: /' "$err" | head -n 20
		failed=$((failed + 1))
	else
		bad=0
		passed=$((passed + 1))
	fi
	if [ "${HUNION_CLI_KEEP:-0}" = 1 ] && [ $bad = 1 ]; then
		echo "  kept $TMPD"
	else
		chmod -R u+rwx "$TMPD" 2>/dev/null
		rm -rf "$TMPD"
	fi
	rm -rf "$cachehome"
	rm -f "$out" "$out.diff" "$err"
done

if [ $skipped -gt 0 ]; then
	echo "cli: $passed passed, $failed failed, $skipped skipped"
else
	echo "cli: $passed passed, $failed failed"
fi
[ $failed = 0 ]
