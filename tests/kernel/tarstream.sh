#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/kernel/tarstream.sh HUNION [SEEDS]
#
# merge -o of a stack of tarballs streams them straight into OUT, one
# over the other (lib/output/mergetar.c); HUNION_TAR_STREAM=0 takes the general
# path instead (unpacked under TMPDIR, then read through the view).  The
# two must write the same tree.  For seeds 1..SEEDS (default 20)
# tests/tools/mkrandtar.py writes a random tree and two tarballs of it
# (see there: sparse files, hard links, symlinks, fifos, xattrs, owners,
# modes, nanosecond mtimes, directories after their children):
#
#   layer    with directories left unnamed and the entries only the layer
#            rules read (duplicates, whiteouts, opaque and .wh..wh.*
#            markers, a hard link to a whiteout, type changes), plain,
#            gzip or zstd: the streamed tree and the general path's must
#            be the same (tests/tools/manifest.py --nlink: names, types,
#            modes, owners, mtimes, sizes and sha256, symlink targets,
#            devices, xattrs, hard-link groups and link counts); so must
#            the exit status and the messages; and nothing but OUT may be
#            left beside it.
#   stack    the layer with HUNION_TARSTREAM_STACK - 1 (default 2) layers
#            over it (mkrandtar.py --stack: each over the names of those
#            beneath: their directories again or implied, their entries
#            replaced by other types, whiteouts and opaque markers over
#            them), streamed one over the other into OUT: the same as the
#            general path's, as for the layer.
#   full     GNU tar's archive of the tree, every path named: the streamed
#            tree must also be what GNU tar extracts from it
#            (tar -xpf --xattrs --xattrs-include='*'), and the tree itself.
#
# Needs root (owners, trusted.* xattrs); skipped otherwise.  HUNION_KEEP=DIR
# keeps the work of failing seeds.  Ends with "tarstream: N passed, N
# failed"; exits 1 if any failed.

SUITE="tarstream"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
kt_args "HUNION [SEEDS]" "$@"
SEEDS=${2:-20}
STACK=${HUNION_TARSTREAM_STACK:-3}

kt_setup "$SEEDS"
for t in /usr/bin/python3 zstd tar; do
	command -v $t >/dev/null || skip_all "$t is not installed"
done
tar --version 2>/dev/null | grep -q 'GNU tar' || skip_all "tar is not GNU tar"

# merge -o OUT TARBALL, streamed or not ($1: the HUNION_TAR_STREAM value);
# the messages, with OUT's name taken out, into OUT.err; the exit status.
merge_o() {	# STREAM DIR OUT TARBALL...
	local rc stream=$1 dir=$2 out=$3
	shift 3
	(cd "$dir" && HUNION_TAR_STREAM=$stream "$HUNION" merge -o "$out" \
		"$@" 2>"$out.err")
	rc=$?
	sed -i "s|$out|OUT|g" "$dir/$out.err"
	return $rc
}

# The layers in DIR, streamed and through the general path: the same exit
# status, messages and tree.
same_both_ways() {	# DIR LABEL LAYER...
	local dir=$1 label=$2 rs ro ok=1
	shift 2
	merge_o 1 "$dir" stream "$@"
	rs=$?
	merge_o 0 "$dir" unpacked "$@"
	ro=$?
	if [ $rs != $ro ]; then
		echo "  $label: exit $rs streamed, $ro unpacked"
		ok=0
	fi
	same "$label: messages" "$dir/unpacked.err" "$dir/stream.err" || ok=0
	no_leftover "$dir" "$label" || ok=0
	if [ $rs = 0 ] && [ $ro = 0 ]; then
		manifest --nlink "$dir/unpacked" >"$dir/unpacked.txt" &&
			manifest --nlink "$dir/stream" >"$dir/stream.txt" ||
			ok=0
		same "$label: trees" "$dir/unpacked.txt" "$dir/stream.txt" ||
			ok=0
	fi
	rm -rf "$dir/stream" "$dir/unpacked"
	[ $ok = 1 ]
}

# Nothing beside OUT but OUT (and what the test put there).
no_leftover() {	# DIR LABEL
	local left
	left=$(cd "$1" && find . -maxdepth 1 -name '.*hunion*' | head -n 3)
	[ -z "$left" ] && return 0
	echo "  $2: left beside OUT: $left"
	return 1
}

run_seed() {
	local seed=$1 dir ok=1 layer stack
	dir=$FS/s$seed
	mkdir -p "$dir"
	if ! layer=$(/usr/bin/python3 "$TOOLS/mkrandtar.py" --seed "$seed" \
		--out "$dir" 2>"$dir/gen.err"); then
		echo "FAIL seed $seed: mkrandtar.py failed"
		tail -n 5 "$dir/gen.err" | sed 's/^/  /'
		failed=$((failed + 1))
		return
	fi
	layer=${layer#"$dir"/}

	# the layer: streamed against the general path
	same_both_ways "$dir" "$layer" "$layer" || ok=0

	# a stack: the layer and STACK - 1 layers over it, each over the
	# names of those beneath (whiteouts, opaque directories, types
	# replaced, directories merged or implied)
	if ! stack=$(/usr/bin/python3 "$TOOLS/mkrandtar.py" --seed "$seed" \
		--out "$dir/stack" --stack "$STACK" 2>"$dir/gen.err"); then
		echo "  mkrandtar.py --stack failed"
		tail -n 5 "$dir/gen.err" | sed 's/^/  /'
		ok=0
	else
		local layers
		mapfile -t layers <<< "${stack//"$dir/stack/"/}"
		same_both_ways "$dir/stack" "stack of $STACK" "${layers[@]}" ||
			ok=0
	fi

	# every path named: GNU tar's extraction, and the tree
	merge_o 1 "$dir" full full.tar || { ok=0; sed 's/^/  /' "$dir/full.err"; }
	mkdir "$dir/gnutar"
	tar -xpf "$dir/full.tar" --xattrs --xattrs-include='*' \
		-C "$dir/gnutar" 2>"$dir/gnutar.err" ||
		{ ok=0; sed 's/^/  /' "$dir/gnutar.err"; }
	manifest --nlink "$dir/gnutar" >"$dir/gnutar.txt" &&
		manifest --nlink "$dir/full" >"$dir/full.txt" &&
		manifest --nlink "$dir/tree" >"$dir/tree.txt" || ok=0
	same "full.tar: GNU tar and merge -o" "$dir/gnutar.txt" \
		"$dir/full.txt" || ok=0
	same "full.tar: the tree and merge -o" "$dir/tree.txt" \
		"$dir/full.txt" || ok=0
	no_leftover "$dir" full.tar || ok=0

	if [ $ok = 1 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL seed $seed ($layer)"
		echo "  reproduce: /usr/bin/python3 $TOOLS/mkrandtar.py" \
		     "--seed $seed --out DIR"
		keep "seed $seed" "$dir"
	fi
	rm -rf "$dir"
}

for seed in $(seq 1 "$SEEDS"); do
	run_seed "$seed"
done
finish
