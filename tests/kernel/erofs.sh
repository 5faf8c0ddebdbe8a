#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/kernel/erofs.sh HUNION [SEEDS]
#
# flatten -o erofs:IMG against the kernel.  For seeds 1..SEEDS (default
# 20) tests/tools/mkstack.py generates a random stack; the kernel mounts
# its overlay form read-only and tests/tools/manifest.py records what it
# shows.  Then "hunion flatten -o erofs:" writes the overlay form as one
# image, and:
#
#   - the kernel mounts the image (file-backed, read-only) and shows the
#     kernel's view of the stack exactly: types, modes, owners, nanosecond
#     mtimes, xattrs, symlink targets, devices, hard-link groups, contents;
#   - it shows what "hunion merge -o" writes for the stack, link counts
#     and hole maps included (manifest.py --nlink --holes; the stacks'
#     sparse files are small enough for chunks of one block);
#   - fsck.erofs (Debian's erofs-utils) finds it clean, and its
#     --extract gives the same tree again (less what 1.5 does not
#     restore: see extract_view);
#   - dump.erofs reads its superblock;
#   - the same stack flattened again on one CPU (taskset), and a copy of
#     its layers that lists its directories in another order, give the
#     same bytes.
#
# Fixed checks: SOURCE_DATE_EPOCH and --clamp-mtime; the extremes of the
# format (255-byte names and a 256-byte one refused, names of every byte,
# a deep tree, a 5 GiB sparse file, 10,000 hard links, xattr values of
# 65,535 bytes and one of 65,536 refused, a wide directory); and errors
# that must leave nothing behind.
#
# Needs root and erofs in the kernel; skipped with the reason otherwise.
# HUNION_KEEP=DIR keeps the work of failing seeds there;
# HUNION_EROFS_ONLY="3 17" runs those seeds only (no fixed checks).  Ends
# with "erofs: N passed, N failed[, N skipped]"; exits 1 if any failed.

SUITE="erofs"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
kt_args "HUNION [SEEDS]" "$@"
SEEDS=${2:-20}
NFIXED=13

kt_setup $((SEEDS + NFIXED))
for t in /usr/bin/python3 fsck.erofs dump.erofs setfattr; do
	command -v $t >/dev/null || skip_all "$t is not installed"
done
grep -qw erofs /proc/filesystems || modprobe erofs 2>/dev/null
grep -qw erofs /proc/filesystems ||
	skip_all "erofs is not available in this kernel"
layers_tmpfs 8g || skip_all "no tmpfs with trusted/user xattrs (Linux < 6.6)"
EMNT=$WORK/emnt
mkdir -p "$EMNT"

# Mount image $1 read-only and write its manifest (manifest.py options
# $3...) into $2.
image_manifest() {
	local img=$1 out=$2 rc
	shift 2
	if ! mount -t erofs -o ro "$img" "$EMNT" 2>"$img.mount.err"; then
		echo "  mount -t erofs failed: $(cat "$img.mount.err")"
		dmesg 2>/dev/null | tail -n 3 | sed 's/^/  /'
		return 1
	fi
	manifest "$@" "$EMNT" >"$out" 2>"$out.err"
	rc=$?
	umount "$EMNT"
	[ $rc = 0 ] || { echo "  reading the mounted image failed:"; \
			 grep ' ! ' "$out" | head -n 5 | sed 's/^/  /'; }
	return $rc
}

# fsck.erofs finds image $1 clean, and dump.erofs reads its superblock.
erofs_tools_ok() {
	local img=$1
	if ! fsck.erofs "$img" >"$img.fsck" 2>&1; then
		echo "  fsck.erofs: $(grep -v '^fsck.erofs' "$img.fsck" |
				      head -n 3)"
		return 1
	fi
	if ! dump.erofs -s "$img" >"$img.dump" 2>&1 ||
	   ! grep -q 'Filesystem magic number' "$img.dump"; then
		echo "  dump.erofs: $(head -n 3 "$img.dump")"
		return 1
	fi
}

# Copy layer $1 to $2 (everything: cp -a keeps xattrs, devices, hard
# links) in the order the source lists it; on tmpfs, which lists a
# directory newest first, the copy then lists it in the opposite order.
copy_other_order() {
	mkdir -p "${2%/*}" && cp -a "$1" "$2"
}

# What fsck.erofs 1.5's --extract gives back of a manifest on stdin
# (written --no-owner --no-mtime --no-xattrs), by the merged tree's full
# manifest $1: no hard-link groups, no setuid and setgid bits (it sets
# the mode before the owner, which clears them), and no file with a hole
# (it stops extracting a chunk-based file at its first hole, which the
# kernel reads as zeros and its own check takes as valid).
extract_view() {
	/usr/bin/python3 -c '
import re, sys
sparse = set()
for line in open(sys.argv[1]):
    t = line.split()
    m = re.search(r" size=(\d+) .* data=(\S+)", line)
    if m and m.group(2) != "0-" + m.group(1):
        sparse.add(t[0])
for line in sys.stdin:
    t = line.split()
    if t[0] in sparse:
        continue
    t = [x for x in t if not x.startswith("link=")]
    if len(t) > 2 and t[1] != "l":
        t[2] = "%04o" % (int(t[2], 8) & 0o1777)
    print(" ".join(t))' "$1"
}

run_seed() {
	local seed=$1 dir=$FS/stack ok=1 layers extra=() img
	new_stack "seed $seed" --seed "$seed" || return
	[ "$USERX" = 1 ] && extra=(--userxattr)
	mapfile -t layers < <(stack_layers "$dir" overlay)
	if ! kernel_manifest "$dir" "$dir/kernel.txt"; then
		echo "FAIL seed $seed: no kernel reference"
		stack_result 0 "seed $seed" --seed "$seed"
		return
	fi
	img=$dir/out.erofs
	if ! "$HUNION" flatten -q --format=overlay "${extra[@]}" \
		-o "erofs:$img" "${layers[@]}" >"$dir/flatten.log" 2>&1; then
		echo "FAIL seed $seed: hunion flatten -o erofs: failed"
		head -n 5 "$dir/flatten.log" | sed 's/^/  /'
		stack_result 0 "seed $seed" --seed "$seed"
		return
	fi
	if image_manifest "$img" "$dir/erofs.txt"; then
		same "seed $seed: the kernel's overlay and the image" \
			"$dir/kernel.txt" "$dir/erofs.txt" || ok=0
	else
		ok=0
	fi
	# merge -o's tree: link counts and holes too
	if "$HUNION" merge -q --format=overlay "${extra[@]}" -o "$dir/merged" \
		"${layers[@]}" >"$dir/merge.log" 2>&1 &&
	   manifest --nlink --holes "$dir/merged" >"$dir/merged.txt" &&
	   image_manifest "$img" "$dir/erofs-nlink.txt" --nlink --holes; then
		same "seed $seed: merge -o and the image" \
			"$dir/merged.txt" "$dir/erofs-nlink.txt" || ok=0
	else
		echo "  seed $seed: merge -o or the image's manifest failed"
		ok=0
	fi
	erofs_tools_ok "$img" || ok=0
	# fsck.erofs --extract: a second reader of the same bytes
	if fsck.erofs --extract="$dir/x" "$img" >"$dir/x.log" 2>&1; then
		manifest --no-owner --no-mtime --no-xattrs "$dir/x" 2>&1 |
			extract_view "$dir/merged.txt" >"$dir/x.txt"
		manifest --no-owner --no-mtime --no-xattrs "$dir/merged" 2>&1 |
			extract_view "$dir/merged.txt" >"$dir/xm.txt"
		same "seed $seed: fsck.erofs --extract" "$dir/xm.txt" \
			"$dir/x.txt" || ok=0
	else
		echo "  fsck.erofs --extract: $(head -n 3 "$dir/x.log")"
		ok=0
	fi
	# the same bytes with the walk's lister thread and the main one on
	# one CPU, and from layers listed in another order
	if ! taskset -c 0 "$HUNION" flatten -q \
		--format=overlay "${extra[@]}" -o "erofs:$dir/again.erofs" \
		"${layers[@]}" >/dev/null 2>&1 ||
	   ! cmp -s "$img" "$dir/again.erofs"; then
		echo "  seed $seed: a flatten on one CPU wrote other bytes"
		ok=0
	fi
	local copies=() l
	for l in "${layers[@]}"; do
		copy_other_order "$l" "$dir/copy/${l##*/}" || ok=0
		copies+=("$dir/copy/${l##*/}")
	done
	if ! "$HUNION" flatten -q --format=overlay "${extra[@]}" \
		-o "erofs:$dir/copy.erofs" "${copies[@]}" >/dev/null 2>&1 ||
	   ! cmp -s "$img" "$dir/copy.erofs"; then
		echo "  seed $seed: a copy of the layers in another order" \
		     "gave other bytes"
		ok=0
	fi
	[ $ok = 1 ] || echo "FAIL seed $seed"
	stack_result $ok "seed $seed" --seed "$seed"
}

# Flatten the tree $2 to an image and compare the mount with the tree
# (manifest.py options $3...): check LABEL $1.
tree_check() {
	local label=$1 tree=$2 ok=1
	shift 2
	rm -f "$WORK/t.erofs"
	if ! "$HUNION" flatten -q -o "erofs:$WORK/t.erofs" "$tree" \
		>"$WORK/t.log" 2>&1; then
		echo "  flatten failed: $(head -n 3 "$WORK/t.log")"
		ok=0
	elif ! manifest "$@" "$tree" >"$WORK/t-want.txt" ||
	     ! image_manifest "$WORK/t.erofs" "$WORK/t-got.txt" "$@"; then
		ok=0
	else
		same "$label" "$WORK/t-want.txt" "$WORK/t-got.txt" || ok=0
		erofs_tools_ok "$WORK/t.erofs" || ok=0
	fi
	result "$label" $ok
}

check_clamp() {
	local T=1300000000 L=$WORK/clamp ok=1
	mkdir -p "$L/d"
	echo old >"$L/d/old"
	echo new >"$L/d/new"
	touch -d @1200000000.5 "$L/d/old"
	touch -d @1400000000.25 "$L/d/new" "$L/d" "$L"
	SOURCE_DATE_EPOCH=$T "$HUNION" flatten -q -o "erofs:$WORK/c1.erofs" \
		"$L" || ok=0
	SOURCE_DATE_EPOCH=1 "$HUNION" flatten -q --clamp-mtime=$T \
		-o "erofs:$WORK/c2.erofs" "$L" || ok=0
	# --clamp-mtime clamps; the build time stays SOURCE_DATE_EPOCH's
	image_manifest "$WORK/c1.erofs" "$WORK/c1.txt" || ok=0
	image_manifest "$WORK/c2.erofs" "$WORK/c2.txt" || ok=0
	grep -q "^d/old .*mtime=1200000000500000000" "$WORK/c1.txt" || ok=0
	grep -q "^d/new .*mtime=${T}000000000" "$WORK/c1.txt" || ok=0
	grep -q "^\. .*mtime=${T}000000000" "$WORK/c1.txt" || ok=0
	same "clamp" "$WORK/c1.txt" "$WORK/c2.txt" || ok=0
	[ $ok = 1 ] || sed 's/^/  /' "$WORK/c1.txt"
	result "SOURCE_DATE_EPOCH / --clamp-mtime" $ok
}

check_extremes() {
	local T=$FS/ext i n255
	mkdir -p "$T/names" "$T/deep" "$T/links" "$T/xattr" "$T/sparse"
	# names: 255 bytes; every byte but '/' and NUL, in names of 8
	n255=$(printf 'n%.0s' $(seq 255))
	echo x >"$T/names/$n255"
	/usr/bin/python3 - "$T/names" <<'EOF'
import os, sys
d = sys.argv[1].encode()
bs = [b for b in range(1, 256) if b != 0x2f]
for i in range(0, len(bs), 8):
    name = bytes(bs[i:i + 8])
    if name in (b".", b".."):
        continue
    with open(os.path.join(d, name), "wb") as f:
        f.write(name)
EOF
	tree_check "255-byte names, names of every byte" "$T/names"
	# a deep tree
	( cd "$T/deep" && for i in $(seq 200); do mkdir d && cd d; done &&
	  echo bottom >f )
	tree_check "a tree 200 deep" "$T/deep"
	# 10,000 hard links
	echo shared >"$T/links/f"
	for i in $(seq 10000); do ln "$T/links/f" "$T/links/l$i"; done
	tree_check "10,000 hard links" "$T/links" --nlink
	# xattr values of 65,535 bytes (EROFS's limit), and shared ones
	head -c 65535 /dev/urandom >"$T/v"
	for i in $(seq 50); do
		echo "$i" >"$T/xattr/f$i"
		setfattr -n user.same -v repeated "$T/xattr/f$i"
		setfattr -n trusted.t -v "0x0102" "$T/xattr/f$i"
	done
	setfattr -n user.big --value="$(cat /proc/self/fd/0)" \
		"$T/xattr/f1" <"$T/v" 2>/dev/null ||
		/usr/bin/python3 -c 'import os, sys
os.setxattr(sys.argv[1], "user.big", open(sys.argv[2], "rb").read())' \
		"$T/xattr/f1" "$T/v"
	tree_check "xattrs: 65,535-byte values, shared values" "$T/xattr"
	# a 5 GiB sparse file with data at both ends and in the middle
	truncate -s 5G "$T/sparse/big"
	echo start | dd of="$T/sparse/big" conv=notrunc status=none
	echo middle | dd of="$T/sparse/big" bs=1M seek=2500 conv=notrunc \
		status=none
	echo end | dd of="$T/sparse/big" bs=1 seek=$((5 * 1024 ** 3 - 4)) \
		conv=notrunc status=none
	# the holes of a big file are chunks of 2^k blocks (the block map
	# kept small), not the source's blocks: compared by content and by
	# the image's size
	tree_check "a 5 GiB sparse file" "$T/sparse"
	local size
	size=$(stat -c %s "$WORK/t.erofs" 2>/dev/null || echo 0)
	[ "$size" -lt $((16 * 1024 * 1024)) ]
	result "a 5 GiB sparse file stays sparse ($size bytes)" \
		$(( $? == 0 ))
	# a wide directory
	mkdir "$T/wide"
	/usr/bin/python3 -c 'import os, sys
for i in range(50000):
    open(os.path.join(sys.argv[1], "file-%06d" % i), "w").close()' "$T/wide"
	tree_check "50,000 entries in one directory" "$T/wide"
	rm -rf "$T"
}

# The same view from directories, from their tarballs (read from the
# path index, each file's bytes pushed from the stream) and from an image
# of it: the same bytes.
check_sources() {
	local S=$FS/src ok=1 l
	mkdir -p "$S/L0/d/e" "$S/L1/d"
	echo a >"$S/L0/d/a"
	echo b >"$S/L0/d/e/b"
	ln "$S/L0/d/a" "$S/L0/d/a2"
	ln "$S/L0/d/a" "$S/L0/d/a3"
	ln -s a "$S/L0/d/s"
	mknod "$S/L0/d/c" c 1 3
	mkfifo "$S/L0/d/p"
	setfattr -n user.x -v 1 "$S/L0/d/a"
	setfattr -n trusted.t -v 2 "$S/L0/d/e"
	head -c 100000 /dev/urandom >"$S/L1/d/big"
	: >"$S/L1/d/.wh.a2"
	find "$S/L0" "$S/L1" -exec touch -h -d @1600000000.123456789 {} +
	for l in L0 L1; do
		tar -C "$S/$l" --sort=name --format=pax --xattrs \
			--xattrs-include='*' --numeric-owner -cf "$S/$l.tar" . ||
			ok=0
	done
	"$HUNION" flatten -q --format=oci -o "erofs:$S/dirs.erofs" \
		"$S/L0" "$S/L1" || ok=0
	"$HUNION" flatten -q -o "erofs:$S/tars.erofs" "$S/L0.tar" \
		"$S/L1.tar" || ok=0
	cmp "$S/dirs.erofs" "$S/tars.erofs" || ok=0
	"$HUNION" flatten -q --format=oci -o "oci:$S/img:t" "$S/L0" "$S/L1" ||
		ok=0
	"$HUNION" flatten -q -o "erofs:$S/img.erofs" "oci:$S/img:t" || ok=0
	cmp "$S/dirs.erofs" "$S/img.erofs" || ok=0
	erofs_tools_ok "$S/dirs.erofs" || ok=0
	result "directories, tarballs and an image: the same image" $ok
	rm -rf "$S"
}

check_errors() {
	local L=$FS/errlayer B=$FS/biglayer
	mkdir -p "$L/d" "$B" "$WORK/ro" "$WORK/out1" "$WORK/out2" "$WORK/out3"
	for i in 1 2 3 4 5 6; do
		head -c 400000 /dev/urandom >"$L/d/f$i"
	done
	head -c 65536 /dev/zero >"$WORK/v64k"
	echo x >"$B/f"
	/usr/bin/python3 -c 'import os, sys
os.setxattr(sys.argv[1], "user.big", open(sys.argv[2], "rb").read())' \
		"$B/f" "$WORK/v64k"
	check_error "an xattr value of 65,536 bytes" 1 "$WORK/out1" \
		'f: .*EROFS' -o "erofs:$WORK/out1/x.erofs" "$B"
	mount -t tmpfs -o ro,size=1m tmpfs "$WORK/ro"
	check_error "read-only output directory" 1 "$WORK/ro" . \
		-o "erofs:$WORK/ro/x.erofs" "$L"
	mount -t tmpfs -o size=1m tmpfs "$WORK/out2"
	check_error "full filesystem" 1 "$WORK/out2" . \
		-o "erofs:$WORK/out2/x.erofs" "$L"
	check_error "--compress refused" 2 "$WORK/out3" 'compress' \
		--compress=zstd -o "erofs:$WORK/out3/x.erofs" "$L"
}

seeds=$(seq 1 "$SEEDS")
[ -n "${HUNION_EROFS_ONLY:-}" ] && seeds=$HUNION_EROFS_ONLY
for seed in $seeds; do
	run_seed "$seed"
done
if [ -z "${HUNION_EROFS_ONLY:-}" ]; then
	check_clamp
	check_sources
	check_extremes
	check_errors
fi

finish
