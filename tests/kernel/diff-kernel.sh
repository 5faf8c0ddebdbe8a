#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/kernel/diff-kernel.sh HUNION [SEEDS [OPS]]
#
# hunion diff against the kernel.  For seeds 1..SEEDS (default 10), each
# with metacopy=off and with metacopy=on, diff_ops.py gen writes a random
# plain tree L0, then two sessions run: U1 over L0, and U2 over L0 + U1
# (so that the second diff reads whiteouts, opaque directories, redirects
# and metacopy files in the layers beneath).  A session:
#   1. an empty UPPER gets the mode, owner, times and xattrs of the top
#      lower layer's root (the merged root shows the upper's), and overlayfs
#      mounts the lowers + UPPER (redirect_dir=on, metacopy=off|on);
#   2. diff_ops.py ops makes OPS (default 40) random changes THROUGH the
#      mount (create, unlink, rm -rf, rmdir, rename files and directories,
#      also over existing ones, chmod, chown, setfattr, hard links, writes,
#      a file replaced by a directory and back, a directory re-created,
#      symlinks, fifos, utime), applies each to its model of the tree, and
#      writes the changes the model predicts;
#   3. with the overlay still mounted: the kernel's merged view as a
#      manifest (tests/tools/manifest.py) and a plain copy (cp -a), and
#      "hunion diff --trees OLD MNT" (plain and -r; OLD is L0, or the copy
#      of the first session's view); then the overlay is unmounted;
#   4. "hunion diff --exact LOWERS... UPPER" must print exactly the model's
#      changes (text and --json) and what --trees printed; without
#      --exact the listing may only add M lines for copied-up files; -r
#      must equal --trees -r; the walk that lists the whole new view
#      (HUNION_DIFF_SLOW=1, see lib/diff/changes.c) must list and write the
#      same as the default one, which lists only the upper's entries;
#   5. "hunion diff --oci" applied to a copy of OLD (tests/tools/
#      oci_apply.py, OCI layer.md rules) must give the kernel's merged
#      view, manifest for manifest, and keep every hard link made through
#      the mount; so must --exact --opaque-markers with zstd (an unchanged
#      copy-up it leaves out is written as a link to a new name of its
#      inode).  Hard-link groups are not compared otherwise: a lower file
#      reached through a renamed directory is written in full, and its
#      other names, outside the change set, stay apart (layer.md: a link
#      whose partner is not in the change set is not recorded).
#      "hunion diff --trees --oci OLD MNT" applied to OLD must too.
#      umoci too: "umoci unpack" of an OCI image layout (tests/tools/
#      oci_layout.py) whose layers are OLD ("hunion flatten" of it) and
#      the layer must give the view, for the diff --oci layer (plain and
#      gzip), the --trees one and the --exact --opaque-markers one (gzip:
#      umoci 0.4.7 reads no zstd layers); the descriptors (--descriptor)
#      go into the image as they are, so umoci checks digests and DiffIDs;
#   6. "hunion flatten --base" (the same writer) must write the same bytes
#      as diff --oci; in the second session, "flatten --base 1 L0 U1 U2"
#      (two layers above the base) applied to L0 must give the view too,
#      with oci_apply.py and with umoci; and so must umoci's unpack of
#      L0 + U1's layer + U2's layer as a three-layer image.
# Needs root and overlayfs; skipped (exit 0, with the reason) otherwise.
# The umoci checks are skipped, with a line that says so, when umoci is
# not installed.
#
# HUNION_KEEP=DIR keeps the work dirs of failing runs there;
# HUNION_KERNEL_VERBOSE=1 prints whole diffs instead of their first lines.
# Ends with "diff: N passed, N failed".

SUITE="diff"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
kt_args "HUNION [SEEDS [OPS]]" "$@"
SEEDS=${2:-10}
NOPS=${3:-40}

kt_setup $((SEEDS * 2))
layers_tmpfs 2g ||
	skip_all "no tmpfs with user and trusted xattrs (Linux < 6.6)"
UMOCI=umoci
if ! command -v umoci >/dev/null; then
	UMOCI=
	echo "diff: umoci is not installed (make deps): its checks are skipped"
fi

# Run hunion and require exit status $1 (or 0|1 for "either").
hu() {
	local want=$1 rc
	shift
	"$HUNION" "$@"
	rc=$?
	case "$want:$rc" in
	0:0 | 1:1 | either:0 | either:1) return 0 ;;
	esac
	echo "  hunion $*: exit $rc, want $want" >&2
	return 1
}

# The tree $2 must show the kernel's view of the session ($S), hard-link
# groups aside (see 5. above).
view_is() {	# LABEL DIR
	manifest "$2" | sed 's/ link=.*//' >"$2.txt"
	same "$1" "$S/kernel-nolinks.txt" "$2.txt"
}

# tests/tools/oci_apply.py applies LAYER to a copy of the tree OLD, in
# $S/applied-LAYER's name: the kernel's view.
apply_view() {	# LABEL OLD LAYER
	local x
	x=$S/applied-$(basename "$3")
	cp -a "$2" "$x" && /usr/bin/python3 "$TOOLS/oci_apply.py" "$3" "$x" &&
		view_is "$1" "$x"
}

# umoci unpacks the image of LAYER... (bottom first, each with its
# descriptor LAYER.json; tests/tools/oci_layout.py writes the image
# layout): the kernel's view.
umoci_view() {	# LABEL LAYER...
	local label=$1 lay
	shift
	lay=$S/oci-$#-$(basename "${@: -1}")
	if ! /usr/bin/python3 "$TOOLS/oci_layout.py" "$lay" t "$@" ||
	   ! umoci unpack --image "$lay:t" "$lay.bundle" >"$lay.log" 2>&1; then
		echo "  $label: umoci unpack failed:"
		tail -n 4 "$lay.log" | sed 's/^/    /'
		return 1
	fi
	view_is "$label" "$lay.bundle/rootfs"
}

# Step 5 and 6 with umoci: the old view (flattened) as a base layer, and
# above it the layers session() wrote, in an image that umoci unpacks.
# umoci 0.4.7 refuses zstd layers ("blob is not correct mediatype:
# application/vnd.oci.image.layer.v1.tar+zstd"), so the --opaque-markers
# layer goes to it gzipped.  Runs inside session(), with its variables.
umoci_checks() {
	local ok=0 l
	hu 0 flatten -q -o "$S/base.tar" --descriptor "$S/base.tar.json" \
		"$base" || ok=1
	hu 0 diff --oci -o "$S/ch.tar.gz" --descriptor \
		"$S/ch.tar.gz.json" "${layers[@]}" || ok=1
	hu 0 diff --oci --exact --opaque-markers -o "$S/ch2.tar.gz" \
		--descriptor "$S/ch2.tar.gz.json" "${layers[@]}" || ok=1
	for l in ch.tar ch.tar.gz trees.tar ch2.tar.gz; do
		umoci_view "$up: kernel vs umoci unpack of old + $l" \
			"$S/base.tar" "$S/$l" || ok=1
	done
	if [ "${#LOWERS[@]}" -gt 1 ]; then
		# L0 + (U1 U2) squashed, and L0 + U1 + U2 as three layers
		umoci_view "$up: kernel vs umoci unpack of L0 + flatten --base 1" \
			"$W/U1/base.tar" "$S/fl1.tar" || ok=1
		umoci_view "$up: kernel vs umoci unpack of L0 + U1 + U2" \
			"$W/U1/base.tar" "$W/U1/ch.tar" "$S/ch.tar" || ok=1
	fi
	return $ok
}

# One session: mount LOWERS (bottom first) with the empty upper $1, make
# the changes, check every listing and the change set.  $2: a plain copy
# of the old view (the tree the change set is applied to); $3: the seed of
# the operations.  Leaves a plain copy of the new view in $W/view-$1.
session() {
	local up=$1 base=$2 seed=$3 want ok=0
	local S=$W/$up U=$W/$up/upper
	mkdir -p "$S" "$U" "$S/work"
	local top=${LOWERS[${#LOWERS[@]} - 1]}
	/usr/bin/python3 "$HERE/diff_ops.py" root-meta "$top" "$U" || return 1
	if ! mount -t overlay overlay -o "lowerdir=$(lowerdir "${LOWERS[@]}"),upperdir=$U,workdir=$S/work,redirect_dir=on,metacopy=$MC" "$MNT" 2>"$S/mount.err"; then
		echo "  $up: mount failed: $(cat "$S/mount.err")"
		return 1
	fi
	if ! /usr/bin/python3 "$HERE/diff_ops.py" ops --seed "$seed" \
		--ops "$NOPS" "$MNT" "$S/expect" 2>"$S/ops.err"; then
		echo "  $up: the operations failed (a test bug):"
		tail -n 4 "$S/ops.err" | sed 's/^/    /'
		umount "$MNT"
		return 1
	fi
	want=1
	[ -s "$S/expect.txt" ] || want=0
	if ! manifest "$MNT" >"$S/kernel.txt" ||
	   ! cp -a "$MNT" "$W/view-$up" ||
	   ! hu $want diff --trees "$base" "$MNT" >"$S/trees.txt" ||
	   ! hu $want diff --trees -r "$base" "$MNT" >"$S/trees-r.txt" ||
	   ! hu $want diff --trees --oci --exit-code -o "$S/trees.tar" \
		--descriptor "$S/trees.tar.json" "$base" "$MNT"; then
		umount "$MNT"
		return 1
	fi
	umount "$MNT" || return 1

	local layers=("${LOWERS[@]}" "$U")
	hu $want diff --exact "${layers[@]}" >"$S/exact.txt" || ok=1
	same "$up: model vs diff --exact" "$S/expect.txt" "$S/exact.txt" ||
		ok=1
	same "$up: diff --trees vs diff --exact" "$S/trees.txt" \
		"$S/exact.txt" || ok=1
	hu $want diff --exact --json "${layers[@]}" >"$S/exact.json" || ok=1
	/usr/bin/python3 "$HERE/diff_ops.py" json-eq "$S/expect.json" \
		"$S/exact.json" | sed "s/^/  $up: json: /"
	[ "${PIPESTATUS[0]}" = 0 ] || ok=1
	hu either diff --json "${layers[@]}" >"$S/plain.json" || ok=1
	/usr/bin/python3 "$HERE/diff_ops.py" json-sub "$S/exact.json" \
		"$S/plain.json" | sed "s/^/  $up: plain: /"
	[ "${PIPESTATUS[0]}" = 0 ] || ok=1
	hu $want diff -r --exact "${layers[@]}" >"$S/exact-r.txt" || ok=1
	same "$up: diff --trees -r vs diff -r --exact" "$S/trees-r.txt" \
		"$S/exact-r.txt" || ok=1
	# the walk that lists the new view whole must agree with the one that
	# lists only the upper layer's own entries
	HUNION_DIFF_SLOW=1 hu $want diff -r --exact --json "${layers[@]}" \
		>"$S/slow-r.json" || ok=1
	hu $want diff -r --exact --json "${layers[@]}" >"$S/exact-r.json" ||
		ok=1
	same "$up: the two walks" "$S/slow-r.json" "$S/exact-r.json" || ok=1

	# The change set as a layer, applied to the old view: the new one.
	sed 's/ link=.*//' "$S/kernel.txt" >"$S/kernel-nolinks.txt"
	hu 0 diff --oci -o "$S/ch.tar" --descriptor "$S/ch.tar.json" \
		"${layers[@]}" || ok=1
	HUNION_DIFF_SLOW=1 hu 0 diff --oci -o "$S/slow.tar" \
		"${layers[@]}" || ok=1
	cmp -s "$S/ch.tar" "$S/slow.tar" ||
		{ echo "  $up: the two walks write other tarballs"; ok=1; }
	apply_view "$up: kernel vs old + diff --oci" "$base" "$S/ch.tar" ||
		ok=1
	/usr/bin/python3 "$HERE/diff_ops.py" links "$S/expect.links" \
		"$S/applied-ch.tar" | sed "s/^/  $up: diff --oci: /"
	[ "${PIPESTATUS[0]}" = 0 ] || ok=1
	apply_view "$up: kernel vs old + diff --trees --oci" "$base" \
		"$S/trees.tar" || ok=1
	hu 0 diff --oci --exact --opaque-markers -o "$S/ch2.tar.zst" \
		"${layers[@]}" || ok=1
	apply_view "$up: kernel vs old + diff --oci --exact --opaque-markers" \
		"$base" "$S/ch2.tar.zst" || ok=1
	/usr/bin/python3 "$HERE/diff_ops.py" links "$S/expect.links" \
		"$S/applied-ch2.tar.zst" | sed "s/^/  $up: diff --oci --exact: /"
	[ "${PIPESTATUS[0]}" = 0 ] || ok=1
	# flatten --base shares the writer: the same bytes as diff --oci
	if ! hu 0 flatten --base "${#LOWERS[@]}" -o "$S/fl.tar" \
		"${layers[@]}" || ! cmp -s "$S/ch.tar" "$S/fl.tar"; then
		echo "  $up: flatten --base differs from diff --oci"
		ok=1
	fi
	if [ "${#LOWERS[@]}" -gt 1 ]; then
		# several layers above the base: L0 + (U1 U2) squashed
		hu 0 flatten --base 1 -o "$S/fl1.tar" --descriptor \
			"$S/fl1.tar.json" "${layers[@]}" || ok=1
		apply_view "$up: kernel vs L0 + flatten --base 1" \
			"${LOWERS[0]}" "$S/fl1.tar" || ok=1
	fi
	# the layers again, unpacked by umoci
	[ -z "$UMOCI" ] || umoci_checks || ok=1
	LOWERS+=("$U")
	return $ok
}

# Two sessions on a random lower: L0 + U1, then L0 U1 + U2 (so the second
# diff reads whiteouts, opaque dirs, redirects and metacopy files beneath).
one_run() {	# SEED METACOPY
	local seed=$1
	MC=$2
	W=$FS/s$seed-$MC
	LOWERS=("$W/L0")
	mkdir -p "$W"
	/usr/bin/python3 "$HERE/diff_ops.py" gen --seed "$seed" "$W/L0" ||
		return 1
	session U1 "$W/L0" "$seed" || return 1
	session U2 "$W/view-U1" "$((seed + 100000))" || return 1
}

for seed in $(seq 1 "$SEEDS"); do
	for mc in off on; do
		label="seed $seed metacopy=$mc"
		if one_run "$seed" "$mc"; then
			passed=$((passed + 1))
			rm -rf "$W"
		else
			failed=$((failed + 1))
			echo "FAIL $label; the operations were:"
			for f in "$W"/U*/expect.log; do
				echo "  ${f#"$W"/}:"
				head -n 40 "$f" | sed 's/^/    /'
			done
			keep "$(basename "$W")" "$W"
			rm -rf "$W"
		fi
	done
done

finish
