#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/kernel/flatten-roundtrip.sh HUNION [SEEDS]
#
# The round trip of hunion flatten, with the kernel as the reference.  For
# seeds 1..SEEDS (default 20) tests/tools/mkstack.py generates a random
# stack; the kernel mounts its overlay form read-only (as tests/kernel/
# run.sh does) and tests/tools/manifest.py records what it shows.  Then
# "hunion flatten" writes the overlay form as .tar, .tar.gz and .tar.zst
# (each with --descriptor), and every reader extracts every tarball; the
# manifest of each extraction must equal the kernel's.  The readers, and
# what each comparison leaves out because that reader cannot carry it:
#
#   bsdtar   bsdtar -xpf --xattrs (libarchive 3.6): everything but the
#            mtime of the root "./", which libarchive's disk writer never
#            restores on the directory it extracts into (an archive made
#            by GNU tar shows the same); and xattr names holding '%' or
#            '=' come back with GNU tar's escapes %25 and %3D, since
#            libarchive takes a SCHILY.xattr.* key as it stands.
#   libarch  tests/tools/laextract.c: libarchive's archive_write_disk as a
#            program linking it uses it (owners, perms, times, xattrs,
#            ACLs, flags, secure paths): the same exclusions.
#   python   tarfile.extractall (tests/tools/tarextract.py, no filter,
#            then the xattrs of tarfile's pax_headers set, GNU tar's
#            escapes undone): no symlink mtimes (tarfile does not set them),
#            no hard-link groups of symlinks (tarfile links with os.link,
#            which follows the symlink, and extracts a dangling one as a
#            separate copy), and mtimes within 1 us (tarfile holds times
#            as floats: about 0.5 us of precision at today's dates).
#   gnutar   GNU tar -xpf --xattrs --xattrs-include='*': everything.
#
# No comparison looks at hole maps: flatten writes sparse files expanded,
# by design, and the readers write zeros.
#
# A seed whose view holds an ordinary entry named .wh.* (mkstack.py's
# lookalikes of OCI markers) must first be refused by flatten, naming
# such a path, with no output left; the rest then runs on the stack with
# those entries removed from its layers.
#
# Then, per seed: the DiffID (sha256 of the uncompressed tar) is the same
# for the three tarballs, each descriptor's digest and size are those of
# its file, its mediaType fits its compression; and a second .tar.zst,
# written a second later with --threads=1, has the same bytes.
#
# Fixed checks: SOURCE_DATE_EPOCH clamps newer mtimes (an extraction
# equals the kernel's manifest with those mtimes clamped), and each error
# leaves nothing behind: an output on a read-only filesystem, an output
# that is an existing directory, an unknown --compress name, a full
# filesystem while writing.
#
# Needs root (overlayfs, tmpfs mounts); skipped with the reason otherwise.
# HUNION_KEEP=DIR keeps the work of failing seeds there;
# HUNION_FLATTEN_ONLY="3 17" runs those seeds only (no fixed checks).  Ends with
# "flatten: N passed, N failed[, N skipped]"; exits 1 if any failed.

SUITE="flatten"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
kt_args "HUNION [SEEDS]" "$@"
SEEDS=${2:-20}
NFIXED=5

kt_setup $((SEEDS + NFIXED))
for t in /usr/bin/python3 zstd gzip sha256sum setfattr; do
	command -v $t >/dev/null || skip_all "$t is not installed"
done
layers_tmpfs 4g || skip_all "no tmpfs with trusted/user xattrs (Linux < 6.6)"

# ---- the readers
READERS=()
if command -v bsdtar >/dev/null; then READERS+=(bsdtar); fi
if cc -O2 -o "$WORK/laextract" "$TOOLS/laextract.c" -larchive \
	2>"$WORK/cc.err"; then
	READERS+=(libarch)
else
	echo "flatten: no libarchive reader: $(head -n 1 "$WORK/cc.err")"
fi
READERS+=(python)
if tar --version 2>/dev/null | grep -q 'GNU tar'; then READERS+=(gnutar); fi
echo "flatten: $HUNION; readers: ${READERS[*]}"

# extract READER ARCHIVE DIR
extract() {
	case $1 in
	bsdtar) bsdtar -xpf "$2" --xattrs -C "$3" ;;
	libarch) "$WORK/laextract" "$2" "$3" ;;
	python) /usr/bin/python3 "$TOOLS/tarextract.py" "$2" "$3" ;;
	gnutar) tar -xpf "$2" --xattrs --xattrs-include='*' -C "$3" \
			--warning=no-unknown-keyword ;;
	esac
}

# What each reader's comparison leaves out (see the top of this file):
# mancmp.py options.
cmp_opts() {
	case $1 in
	bsdtar|libarch) echo --root-mtime-any --xattr-escapes-kept ;;
	python) echo --symlink-mtime-any --symlink-links-any \
			--mtime-slack=1000 ;;
	*) echo "" ;;
	esac
}

# Check a descriptor $1 against its tarball $2 and the DiffID $3.
check_descriptor() {
	/usr/bin/python3 - "$1" "$2" "$3" <<'EOF'
import hashlib, json, os, sys
d = json.load(open(sys.argv[1]))
path, diff_id = sys.argv[2], sys.argv[3]
h = hashlib.sha256(open(path, "rb").read()).hexdigest()
mt = "application/vnd.oci.image.layer.v1.tar"
mt += {".gz": "+gzip", ".zst": "+zstd"}.get(os.path.splitext(path)[1], "")
bad = []
if d.get("digest") != "sha256:" + h: bad.append("digest")
if d.get("size") != os.path.getsize(path): bad.append("size")
if d.get("mediaType") != mt: bad.append("mediaType %s" % d.get("mediaType"))
if d.get("diffID") != diff_id: bad.append("diffID")
if bad:
    print("  %s: descriptor: wrong %s" % (os.path.basename(path), ", ".join(bad)))
    sys.exit(1)
EOF
}

# Sleep until a second has passed since T, an $EPOCHREALTIME (reading the
# tarballs back has usually taken longer).
after_a_second() {	# T
	local us=$((${1/./} + 1000000 - ${EPOCHREALTIME/./}))
	[ "$us" -gt 0 ] &&
		sleep "$((us / 1000000)).$(printf %06d $((us % 1000000)))"
	return 0
}

# The sha256 of the uncompressed tar $1, as "sha256:HEX".
diff_id() {
	case $1 in
	*.gz) gzip -dc "$1" ;;
	*.zst) zstd -qdc "$1" ;;
	*) cat "$1" ;;
	esac | sha256sum | sed 's/^\([0-9a-f]*\).*/sha256:\1/'
}

# A view holding an ordinary entry named .wh.* (the lookalikes of OCI
# markers mkstack.py puts in some overlay stacks) cannot be a tarball
# layer: flatten must refuse it, naming such a path, and write nothing.
# Uses run_seed's $layers.
refused() {
	local seed=$1 dir=$FS/stack extra=()
	[ "$USERX" = 1 ] && extra=(--userxattr)
	if "$HUNION" flatten -q --format=overlay "${extra[@]}" \
		-o "$dir/out.tar" "${layers[@]}" >"$dir/flatten.log" 2>&1 ||
	   ! grep -q '/\.wh\.[^/]*: cannot be archived' "$dir/flatten.log" ||
	   [ -e "$dir/out.tar" ]; then
		echo "FAIL seed $seed: a .wh. name in the view was not refused"
		head -n 5 "$dir/flatten.log" | sed 's/^/  /'
		return 1
	fi
}

# Flatten, extract with every reader, compare: one seed.
run_seed() {
	local seed=$1 dir=$FS/stack ok=1 ext r out x ids=() layers extra=()
	local written
	new_stack "seed $seed" --seed "$seed" || return
	[ "$USERX" = 1 ] && extra=(--userxattr)
	mapfile -t layers < <(stack_layers "$dir" overlay)
	if ! kernel_manifest "$dir" "$dir/kernel.txt"; then
		echo "FAIL seed $seed: no kernel reference"
		stack_result 0 "seed $seed" --seed "$seed"
		return
	fi
	if grep -Eq '^([^ ]*/)?\.wh\.[^ /]* ' "$dir/kernel.txt"; then
		refused "$seed" || ok=0
		# then without them, for the rest
		if ! find "${layers[@]}" -name '.wh.*' -prune \
			-exec rm -rf {} + ||
		   ! kernel_manifest "$dir" "$dir/kernel.txt"; then
			echo "FAIL seed $seed: no kernel reference without" \
			     "the .wh. names"
			stack_result 0 "seed $seed" --seed "$seed"
			return
		fi
	fi
	for ext in tar tar.gz tar.zst; do
		out=$dir/out.$ext
		if ! "$HUNION" flatten -q --format=overlay "${extra[@]}" \
			--descriptor "$out.json" -o "$out" "${layers[@]}" \
			>"$dir/flatten.log" 2>&1; then
			echo "FAIL seed $seed .$ext: hunion flatten failed"
			head -n 5 "$dir/flatten.log" | sed 's/^/  /'
			ok=0
			continue
		fi
		written=$EPOCHREALTIME
		ids+=("$(diff_id "$out")")
		check_descriptor "$out.json" "$out" "${ids[-1]}" || ok=0
		for r in "${READERS[@]}"; do
			x=$dir/x-$r-$ext
			mkdir "$x"
			if ! extract "$r" "$out" "$x" >"$dir/extract.log" 2>&1
			then
				echo "FAIL seed $seed .$ext $r: extraction failed"
				head -n 5 "$dir/extract.log" | sed 's/^/  /'
				ok=0
				continue
			fi
			manifest "$x" >"$x.txt" 2>&1
			# shellcheck disable=SC2046
			if ! /usr/bin/python3 "$TOOLS/mancmp.py" $(cmp_opts "$r") \
				"$dir/kernel.txt" "$x.txt" >"$x.diff"; then
				echo "FAIL seed $seed .$ext $r: the trees differ"
				sed 's/^/  /' "$x.diff"
				ok=0
			else
				rm -rf "$x" "$x.txt" "$x.diff"
			fi
		done
	done
	if [ "${#ids[@]}" = 3 ] && { [ "${ids[0]}" != "${ids[1]}" ] ||
				     [ "${ids[0]}" != "${ids[2]}" ]; }; then
		echo "FAIL seed $seed: the DiffIDs of .tar, .tar.gz and" \
		     ".tar.zst differ: ${ids[*]}"
		ok=0
	fi
	# Same inputs, same bytes: a second later, and with one zstd worker.
	after_a_second "${written:-$EPOCHREALTIME}"
	if ! "$HUNION" flatten -q --format=overlay "${extra[@]}" --threads=1 \
		-o "$dir/again.tar.zst" "${layers[@]}" >/dev/null 2>&1 ||
	   ! cmp -s "$dir/out.tar.zst" "$dir/again.tar.zst"; then
		echo "FAIL seed $seed: a second flatten wrote other bytes"
		ok=0
	fi
	stack_result $ok "seed $seed" --seed "$seed"
}

# SOURCE_DATE_EPOCH: mtimes newer than T become T, the others stay.
check_clamp() {
	local dir=$FS/stack ok=1 T=1300000000 layers r
	new_stack clamp --seed 7 --features common || return
	mapfile -t layers < <(stack_layers "$dir" overlay)
	kernel_manifest "$dir" "$dir/kernel.txt" || ok=0
	/usr/bin/python3 - "$dir/kernel.txt" $T >"$dir/clamped.txt" <<'EOF'
import re, sys
t = int(sys.argv[2]) * 10**9
for line in open(sys.argv[1]):
    print(re.sub(r"mtime=(\d+)",
                 lambda m: "mtime=%d" % min(int(m.group(1)), t), line), end="")
EOF
	grep -q "mtime=${T}000000000" "$dir/clamped.txt" || ok=0
	SOURCE_DATE_EPOCH=$T "$HUNION" flatten -q --format=overlay \
		-o "$dir/c.tar" "${layers[@]}" || ok=0
	# --clamp-mtime wins over SOURCE_DATE_EPOCH
	SOURCE_DATE_EPOCH=1 "$HUNION" flatten -q --format=overlay \
		--clamp-mtime=$T -o "$dir/c2.tar" "${layers[@]}" || ok=0
	cmp -s "$dir/c.tar" "$dir/c2.tar" || ok=0
	r=${READERS[0]}
	mkdir "$dir/x"
	extract "$r" "$dir/c.tar" "$dir/x" >/dev/null 2>&1 || ok=0
	manifest "$dir/x" >"$dir/x.txt"
	# shellcheck disable=SC2046
	/usr/bin/python3 "$TOOLS/mancmp.py" $(cmp_opts "$r") "$dir/clamped.txt" \
		"$dir/x.txt" || ok=0
	result "SOURCE_DATE_EPOCH / --clamp-mtime ($r)" $ok
	rm -rf "$dir"
}

check_errors() {
	local L=$WORK/errlayer
	mkdir -p "$L/d" "$WORK/ro" "$WORK/small" "$WORK/outdir/x.tar"
	for i in 1 2 3 4 5 6; do
		head -c 400000 /dev/urandom >"$L/d/f$i"
	done
	mount -t tmpfs -o ro,size=1m tmpfs "$WORK/ro"
	check_error "read-only output directory" 1 "$WORK/ro" . \
		-o "$WORK/ro/x.tar" "$L"
	check_error "output is an existing directory" 1 - . \
		-o "$WORK/outdir/x.tar" "$L"
	if [ ! -d "$WORK/outdir/x.tar" ] ||
	   [ -n "$(ls -A "$WORK/outdir/x.tar")" ]; then
		result "error: the existing directory was changed" 0
	fi
	check_error "unknown --compress" 2 "$WORK/small" . \
		--compress=lz4 -o "$WORK/small/x.tar" "$L"
	mount -t tmpfs -o size=1m tmpfs "$WORK/small"
	check_error "full filesystem" 1 "$WORK/small" . \
		-o "$WORK/small/x.tar" "$L"
}

seeds=$(seq 1 "$SEEDS")
[ -n "${HUNION_FLATTEN_ONLY:-}" ] && seeds=$HUNION_FLATTEN_ONLY
for seed in $seeds; do
	run_seed "$seed"
done
if [ -z "${HUNION_FLATTEN_ONLY:-}" ]; then
	check_clamp
	check_errors
fi

finish
