#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/fuzz/replay.sh BUILD_DIR
#
# Run every fuzz target over its corpus without libFuzzer: build
# BUILD_DIR/NAME-replay from tests/fuzz/NAME_fuzz.c, tests/fuzz/replay_main.c
# and BUILD_DIR/libhunion.a (with the sanitizers when that library was
# built with them), then feed it each file of tests/fuzz/corpus/NAME/ in
# its own process.  A crash, a sanitizer report or a non-zero exit fails
# that file.  Ends with "fuzz: N passed, N failed".
set -u
export LC_ALL=C

if [ $# != 1 ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
B=$(cd "$1" 2>/dev/null && pwd) || { echo "fuzz: $1: no such dir" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
passed=0 failed=0

if [ ! -f "$B/libhunion.a" ]; then
	echo "fuzz: $B/libhunion.a is not built (make B=$1 $1/libhunion.a)"
	echo "fuzz: 0 passed, 1 failed"
	exit 1
fi
cc=${CC:-cc}
san=()
if nm "$B/libhunion.a" 2>/dev/null | grep -q __asan_; then
	cc=${CC:-clang}
	san=("-fsanitize=address,undefined" -fno-sanitize-recover=all
	     -fno-omit-frame-pointer)
fi
# The Makefile's own list, so that a library the project adds is here too.
# shellcheck disable=SC2207
libs=($(make -s --no-print-directory -C "$ROOT" print-libs))

for src in "$HERE"/*_fuzz.c; do
	name=$(basename "$src" _fuzz.c)
	bin=$B/$name-replay
	corpus=$HERE/corpus/$name
	if ! "$cc" -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -I"$ROOT/lib" -g -O1 \
		"${san[@]}" -o "$bin" "$src" "$HERE/replay_main.c" \
		"$B/libhunion.a" "${libs[@]}" 2>"$B/$name-replay.log"; then
		echo "FAIL $name: the replay binary does not build"
		sed 's/^/  /' "$B/$name-replay.log" | head -n 20
		failed=$((failed + 1))
		continue
	fi
	for f in "$corpus"/*; do
		[ -f "$f" ] || continue
		if out=$("$bin" "$f" 2>&1); then
			passed=$((passed + 1))
		else
			echo "FAIL $name: ${f#"$ROOT"/}"
			printf '%s\n' "$out" | head -n 30 | sed 's/^/  /'
			failed=$((failed + 1))
		fi
	done
done

echo "fuzz: $passed passed, $failed failed"
[ $failed = 0 ]
