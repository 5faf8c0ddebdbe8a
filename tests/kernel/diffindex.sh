#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/kernel/diffindex.sh HUNION [SEEDS [OPS]]
#
# diff reads tarball and image lowers from their path index
# (lib/layer/ldir.c) instead of unpacking them; HUNION_INDEX=0 unpacks
# them as before.  The two must give the same answers.  For seeds
# 1..SEEDS (default 10):
#
#   1. tests/tools/mkrandtar.py --stack 3 writes three random tarball
#      layers (implicit parents, hard links, whiteouts, opaque and
#      .wh..wh.* markers, duplicates, types replaced; plain, gzip or zstd),
#      and tests/tools/oci_layout.py an image of them (IMG);
#   2. merge -o of them is BASE; overlayfs mounts BASE with an empty
#      upper U, and tests/kernel/diff_ops.py makes OPS (default 30)
#      random changes through the mount;
#   3. over the tarballs and over oci:IMG, with the index and with
#      HUNION_INDEX=0: "diff" (and -r, --json), "diff --oci -o" (the
#      tarball byte for byte), "diff -o oci:OUT:t" over the image (the
#      layouts byte for byte) must give the same output and exit status;
#   4. the kernel: diff over oci:IMG (read from the index) must list what
#      diff over BASE, the kernel's own lower, lists.
#
# Each is run with --no-cache, and twice with a cache of the seed's own
# (--cache-dir): the second reads the indexes from it.  Needs root (mkrandtar.py writes owners and
# trusted.* xattrs) and overlayfs; skipped otherwise.  Ends with
# "diffindex: N passed, N failed".

SUITE="diffindex"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
kt_args "HUNION [SEEDS [OPS]]" "$@"
SEEDS=${2:-10}
NOPS=${3:-30}

kt_setup "$SEEDS"
for t in /usr/bin/python3 zstd tar; do
	command -v $t >/dev/null || skip_all "$t is not installed"
done
export SOURCE_DATE_EPOCH=1000000000
export XDG_CACHE_HOME=$WORK/xdg-cache	# never the user's

# The descriptor LAYER.json oci_layout.py reads: media type, digest, size,
# diffID (the sha256 of the tar, decompressed).
descriptor() {	# LAYER
	/usr/bin/python3 - "$1" <<'EOF'
import gzip, hashlib, json, os, subprocess, sys
p = sys.argv[1]
raw = open(p, "rb").read()
if p.endswith(".gz"):
    tar, mt = gzip.decompress(raw), "+gzip"
elif p.endswith(".zst"):
    tar = subprocess.run(["zstd", "-dc", p], check=True,
                         capture_output=True).stdout
    mt = "+zstd"
else:
    tar, mt = raw, ""
json.dump({"mediaType": "application/vnd.oci.image.layer.v1.tar" + mt,
           "digest": "sha256:" + hashlib.sha256(raw).hexdigest(),
           "size": len(raw),
           "diffID": "sha256:" + hashlib.sha256(tar).hexdigest()},
          open(p + ".json", "w"))
EOF
}

# hunion CMD ARGS... with the index made afresh (--no-cache) and without
# it (HUNION_INDEX=0): the same output and exit status (into
# $S/NAME.idx and .dir: stdout, the exit status, stderr).  Then with the
# index read from the cache: the same stdout and exit status (a cached
# index does not repeat the tarball's warnings).
both() {	# NAME CMD ARGS...
	local name=$1 cmd=$2 ok=0
	shift 2
	"$HUNION" "$cmd" --no-cache "$@" >"$S/$name.idx" 2>"$S/$name.idx.err"
	echo "exit $?" >>"$S/$name.idx"
	HUNION_INDEX=0 "$HUNION" "$cmd" "$@" >"$S/$name.dir" \
		2>"$S/$name.dir.err"
	echo "exit $?" >>"$S/$name.dir"
	"$HUNION" "$cmd" --cache-dir "$S/cache" "$@" >/dev/null 2>&1
	"$HUNION" "$cmd" --cache-dir "$S/cache" "$@" >"$S/$name.cached" \
		2>/dev/null
	echo "exit $?" >>"$S/$name.cached"
	same "$name: cached index vs unpacked" "$S/$name.dir" \
		"$S/$name.cached" || ok=1
	cat "$S/$name.idx.err" >>"$S/$name.idx"
	cat "$S/$name.dir.err" >>"$S/$name.dir"
	same "$name: index vs unpacked" "$S/$name.dir" "$S/$name.idx" || ok=1
	return $ok
}

# The same for diff --oci -o FILE: the tarballs byte for byte too.
both_oci() {	# NAME ARGS...
	local name=$1
	shift
	both "$name" diff --oci -o "$S/$name.i.tar" "$@" || return 1
	HUNION_INDEX=0 "$HUNION" diff --oci -o "$S/$name.d.tar" "$@" \
		>/dev/null 2>&1
	[ -e "$S/$name.d.tar" ] || [ -e "$S/$name.i.tar" ] ||
		return 0	# refused alike
	cmp "$S/$name.d.tar" "$S/$name.i.tar" >/dev/null && return 0
	echo "  $name: the layer tarballs differ"
	return 1
}

# diff -o oci:OUT:t over the image: the layouts byte for byte.
both_image() {	# NAME ARGS...
	local name=$1
	shift
	"$HUNION" diff --no-cache -o "oci:$S/$name.i:t" "$@" >/dev/null \
		2>"$S/$name.i.err"
	echo "exit $?" >>"$S/$name.i.err"
	HUNION_INDEX=0 "$HUNION" diff -o "oci:$S/$name.d:t" "$@" >/dev/null \
		2>"$S/$name.d.err"
	echo "exit $?" >>"$S/$name.d.err"
	same "$name: messages" "$S/$name.d.err" "$S/$name.i.err" || return 1
	[ -d "$S/$name.d" ] || return 0	# refused alike
	diff -r "$S/$name.d" "$S/$name.i" >/dev/null && return 0
	echo "  $name: the image layouts differ"
	return 1
}

run_seed() {
	local seed=$1 ok=1 l
	local S=$FS/s$seed
	local -a layers
	mkdir -p "$S/upper" "$S/work"
	if ! mapfile -t layers < <(/usr/bin/python3 "$TOOLS/mkrandtar.py" \
		--seed "$seed" --out "$S/stack" --stack 3 2>"$S/gen.err") ||
	   [ "${#layers[@]}" != 3 ]; then
		echo "FAIL seed $seed: mkrandtar.py failed"
		tail -n 5 "$S/gen.err" | sed 's/^/  /'
		failed=$((failed + 1))
		return
	fi
	for l in "${layers[@]}"; do
		descriptor "$l" || ok=0
	done
	/usr/bin/python3 "$TOOLS/oci_layout.py" "$S/img" t "${layers[@]}" ||
		ok=0
	# a stack the view refuses (a path through a file...) is compared
	# over an empty upper, and the kernel has nothing to mount
	local kernel=1
	"$HUNION" merge -q -o "$S/base" "${layers[@]}" 2>/dev/null || kernel=0
	if [ $kernel = 1 ]; then
		/usr/bin/python3 "$HERE/diff_ops.py" root-meta "$S/base" \
			"$S/upper" || ok=0
		if ! mount -t overlay overlay -o "lowerdir=$S/base,upperdir=$S/upper,workdir=$S/work,redirect_dir=on" "$MNT" 2>"$S/mount.err"; then
			echo "  mount failed: $(cat "$S/mount.err")"
			ok=0
			kernel=0
		else
			/usr/bin/python3 "$HERE/diff_ops.py" ops --seed "$seed" \
				--ops "$NOPS" "$MNT" "$S/expect" 2>"$S/ops.err" ||
				{ ok=0; tail -n 4 "$S/ops.err" | sed 's/^/  /'; }
			umount "$MNT" || ok=0
		fi
	fi

	# shellcheck disable=SC2034	# read through the nameref below
	local tars=("${layers[@]}" "$S/upper") img=("oci:$S/img:t" "$S/upper")
	for form in tars img; do
		local -n ops=$form
		both "$form-diff" diff "${ops[@]}" || ok=0
		both "$form-diff-r" diff -r "${ops[@]}" || ok=0
		both "$form-json" diff --json "${ops[@]}" || ok=0
		both_oci "$form-oci" "${ops[@]}" || ok=0
	done
	both_image img-image "${img[@]}" || ok=0

	# the kernel's lower as a directory, and the image read from its index
	if [ $kernel = 1 ]; then
		"$HUNION" diff "$S/base" "$S/upper" >"$S/base.txt"
		echo "exit $?" >>"$S/base.txt"
		"$HUNION" diff --no-cache "${img[@]}" >"$S/img.txt" 2>/dev/null
		echo "exit $?" >>"$S/img.txt"
		same "diff over the kernel's lower vs over the image" \
			"$S/base.txt" "$S/img.txt" || ok=0
	fi

	if [ $ok = 1 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL seed $seed"
		keep "seed $seed" "$S"
	fi
	rm -rf "$S"
}

for seed in $(seq 1 "$SEEDS"); do
	run_seed "$seed"
done
finish
