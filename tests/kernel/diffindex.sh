#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/kernel/diffindex.sh HUNION [SEEDS [OPS]]
#
# diff and fsck read tarball and image lowers from their path index
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
#      layouts byte for byte), "fsck -n" and "fsck -n --all-layers" must
#      give the same output and exit status;
#   4. the kernel: diff over oci:IMG (read from the index) must list what
#      diff over BASE, the kernel's own lower, lists.
#
# Each run has a cache of its own (--cache-dir), used by the second
# diff of each kind on.  Needs root (mkrandtar.py writes owners and
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

# hunion CMD ARGS... with the index and without (HUNION_INDEX=0), the
# output of each into $S/NAME.idx and .dir (stdout, the exit status,
# stderr): the same.
both() {	# NAME CMD ARGS...
	local name=$1 cmd=$2
	shift 2
	"$HUNION" "$cmd" --cache-dir "$S/cache" "$@" >"$S/$name.idx" \
		2>"$S/$name.idx.err"
	echo "exit $?" >>"$S/$name.idx"
	cat "$S/$name.idx.err" >>"$S/$name.idx"
	HUNION_INDEX=0 "$HUNION" "$cmd" --cache-dir "$S/cache" "$@" \
		>"$S/$name.dir" 2>"$S/$name.dir.err"
	echo "exit $?" >>"$S/$name.dir"
	cat "$S/$name.dir.err" >>"$S/$name.dir"
	same "$name: index vs unpacked" "$S/$name.dir" "$S/$name.idx"
}

# The same for diff --oci -o FILE: the tarballs byte for byte too.
both_oci() {	# NAME ARGS...
	local name=$1
	shift
	both "$name" diff --oci -o "$S/$name.i.tar" "$@" || return 1
	HUNION_INDEX=0 "$HUNION" diff --cache-dir "$S/cache" --oci \
		-o "$S/$name.d.tar" "$@" >/dev/null 2>&1
	cmp "$S/$name.d.tar" "$S/$name.i.tar" >/dev/null && return 0
	echo "  $name: the layer tarballs differ"
	return 1
}

# diff -o oci:OUT:t over the image: the layouts byte for byte.
both_image() {	# NAME ARGS...
	local name=$1
	shift
	"$HUNION" diff -q --cache-dir "$S/cache" -o "oci:$S/$name.i:t" "$@" \
		>/dev/null 2>"$S/$name.i.err"
	echo "exit $?" >>"$S/$name.i.err"
	HUNION_INDEX=0 "$HUNION" diff -q --cache-dir "$S/cache" \
		-o "oci:$S/$name.d:t" "$@" >/dev/null 2>"$S/$name.d.err"
	echo "exit $?" >>"$S/$name.d.err"
	same "$name: messages" "$S/$name.d.err" "$S/$name.i.err" || return 1
	diff -r "$S/$name.d" "$S/$name.i" >/dev/null && return 0
	echo "  $name: the image layouts differ"
	return 1
}

run_seed() {
	local seed=$1 ok=1 S=$FS/s$seed l
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
	"$HUNION" merge -q -o "$S/base" "${layers[@]}" || ok=0
	/usr/bin/python3 "$HERE/diff_ops.py" root-meta "$S/base" "$S/upper" ||
		ok=0
	if ! mount -t overlay overlay -o "lowerdir=$S/base,upperdir=$S/upper,workdir=$S/work" "$MNT" 2>"$S/mount.err"; then
		echo "FAIL seed $seed: mount failed: $(cat "$S/mount.err")"
		failed=$((failed + 1))
		return
	fi
	/usr/bin/python3 "$HERE/diff_ops.py" ops --seed "$seed" --ops "$NOPS" \
		"$MNT" "$S/expect" 2>"$S/ops.err" ||
		{ ok=0; tail -n 4 "$S/ops.err" | sed 's/^/  /'; }
	umount "$MNT" || ok=0

	local tars=("${layers[@]}" "$S/upper") img=("oci:$S/img:t" "$S/upper")
	for form in tars img; do
		local -n ops=$form
		both "$form-diff" diff "${ops[@]}" || ok=0
		both "$form-diff-r" diff -r "${ops[@]}" || ok=0
		both "$form-json" diff --json "${ops[@]}" || ok=0
		both_oci "$form-oci" "${ops[@]}" || ok=0
		both "$form-fsck" fsck -n "${ops[@]}" || ok=0
		both "$form-fsck-all" fsck -n --all-layers "${ops[@]}" || ok=0
	done
	both_image img-image "${img[@]}" || ok=0

	# the kernel's lower as a directory, and the image read from its index
	"$HUNION" diff "$S/base" "$S/upper" >"$S/base.txt" 2>&1
	echo "exit $?" >>"$S/base.txt"
	"$HUNION" diff --no-cache "${img[@]}" >"$S/img.txt" 2>&1
	echo "exit $?" >>"$S/img.txt"
	same "diff over the kernel's lower vs over the image" \
		"$S/base.txt" "$S/img.txt" || ok=0

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
