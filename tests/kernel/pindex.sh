#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/kernel/pindex.sh HUNION [SEEDS] - the path index of a layer tarball
# (lib/tar/pindex.c) against the unpack it stands for.
#
# For each tarball, BUILD/pindex-tool (beside HUNION) builds the index and
# describes it as tests/tools/manifest.py --nlink describes a tree, each
# regular file's sha256 taken from the bytes at the offsets the index
# gives in the uncompressed stream (gzip -dc, zstd -dc: not hunion's); the
# same tarball unpacked as a layer alone (hu_tarlayer_unpack, nothing
# beneath) is described by manifest.py itself.  Both must be the same,
# with the same warnings, errors and exit status.  The tarballs:
#   - tests/tools/mkrandtar.py's, per seed: the layer (GNU tar's, then
#     Python tarfile's entries of the layer rules: duplicates, whiteouts,
#     opaque markers, implied parents, hard links, sparse files, xattrs),
#     GNU tar's full.tar, a stack's upper layers, and the same layers as
#     an OCI image (the index of each blob, checked against its digests;
#     one through the cache, built, read back, damaged and built again;
#     a damaged blob refused), and, as another user, the layer again
#     (owners, devices and trusted.* xattrs as a user's unpack has them);
#   - hostile tarballs (tests/tools/mktar.py): what the unpack refuses,
#     refused alike;
#   - the tarballs the CLI cases give hunion (a wrapper in its place
#     collects them).
# SEEDS defaults to 10; HUNION_PINDEX_CLI=0 leaves the CLI cases out.  Needs root (mkrandtar.py's owners and xattrs).

SUITE="pindex"
. "$(dirname "$0")/lib.sh"
kt_args "HUNION [SEEDS]" "$@"
SEEDS=${2:-10}
TOOL=$(dirname "$HUNION")/pindex-tool
[ -x "$TOOL" ] || { echo "$SUITE: $TOOL: missing (make unit-bin)" >&2; exit 2; }

[ "$(id -u)" = 0 ] || skip_all "not root (mkrandtar.py sets owners)"
for t in /usr/bin/python3 zstd gzip setpriv; do
	command -v $t >/dev/null || skip_all "$t is not installed"
done
WORK=$(mktemp -d "/tmp/hunion-$SUITE.XXXXXX") || exit 1
FS=$WORK/fs
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$FS"
layers_tmpfs 512m || true
# the unpacks go there (trusted.* and user.* xattrs kept)
export TMPDIR=$FS/tmp
mkdir -p "$TMPDIR" "$FS/nobody"
chmod 1777 "$FS/nobody"

# Damage FILE at OFFSET: its byte there inverted.  Writing a fixed byte
# changes nothing once in 256 random files, and the test then fails.
damage() {	# FILE OFFSET
	local b
	b=$(od -An -tu1 -j "$2" -N 1 "$1" | tr -d ' ')
	# shellcheck disable=SC2059  # the octal escape is the format
	printf "\\$(printf %03o $((b ^ 255)))" |
		dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

uncompressed() {	# TARBALL
	case $(head -c 4 "$1" | od -An -tx1 | tr -d ' ') in
	1f8b*) gzip -dc "$1" ;;
	28b52ffd) zstd -dcq "$1" ;;
	*) cat "$1" ;;
	esac
}

# The index of TARBALL (or of the image's layer: TARBALL is oci:DIR:REF,
# then K) against the unpack of FILE, the same bytes as a file, in DIR;
# as user AS (root when empty).  Messages compared when MSGS is 1.
compare() {	# DIR LABEL FILE MSGS AS TARBALL [K]
	local dir=$1 label=$2 file=$3 msgs=$4 as=$5 ri ru ok=1
	shift 5
	local run=()
	[ -n "$as" ] && run=(setpriv --reuid="$as" --regid="$as" --clear-groups
			     env TMPDIR="$FS/nobody")
	uncompressed "$file" >"$dir/stream" 2>/dev/null
	"${run[@]}" "$TOOL" manifest "$@" "$dir/stream" >"$dir/index.txt" \
		2>"$dir/index.err"
	ri=$?
	"${run[@]}" "$TOOL" unpack "$file" /usr/bin/python3 "$TOOLS/manifest.py" \
		--nlink {} >"$dir/unpack.txt" 2>"$dir/unpack.err"
	ru=$?
	if [ $ri != $ru ]; then
		echo "  $label: exit $ri from the index, $ru from the unpack"
		ok=0
	fi
	if [ "$msgs" = 1 ]; then
		same "$label: messages" "$dir/unpack.err" "$dir/index.err" ||
			ok=0
	fi
	if [ $ri = 0 ] && [ $ru = 0 ]; then
		same "$label: trees" "$dir/unpack.txt" "$dir/index.txt" || ok=0
	fi
	rm -f "$dir/stream"
	[ $ok = 1 ]
}

compare_file() {	# DIR LABEL TARBALL [AS]
	compare "$1" "$2" "$3" 1 "${4:-}" "$3"
}

run_seed() {
	local seed=$1 dir ok=1 layer stack layers t k
	dir=$FS/s$seed
	mkdir -p "$dir"
	if ! layer=$(/usr/bin/python3 "$TOOLS/mkrandtar.py" --seed "$seed" \
		--out "$dir" 2>"$dir/gen.err") ||
	   ! stack=$(/usr/bin/python3 "$TOOLS/mkrandtar.py" --seed "$seed" \
		--out "$dir/stack" --stack 3 2>>"$dir/gen.err"); then
		echo "FAIL seed $seed: mkrandtar.py failed"
		tail -n 5 "$dir/gen.err" | sed 's/^/  /'
		failed=$((failed + 1))
		return
	fi
	mapfile -t layers <<< "$stack"
	for t in "$layer" "$dir/full.tar" "${layers[@]:1}"; do
		compare_file "$dir" "${t#"$dir"/}" "$t" || ok=0
	done
	chmod -R a+rX "$dir"
	compare_file "$dir" "${layer#"$dir"/} as nobody" "$layer" 65534 || ok=0

	# the stack as an image: each layer's index from its blob
	for t in "${layers[@]}"; do
		/usr/bin/python3 - "$t" <<-'PY' || ok=0
		import gzip, hashlib, json, subprocess, sys
		t = sys.argv[1]
		raw = open(t, "rb").read()
		if raw[:2] == b"\x1f\x8b":
		    tar, mt = gzip.decompress(raw), "+gzip"
		elif raw[:4] == b"\x28\xb5\x2f\xfd":
		    tar = subprocess.run(["zstd", "-dcq"], input=raw,
		                         capture_output=True, check=True).stdout
		    mt = "+zstd"
		else:
		    tar, mt = raw, ""
		json.dump({"mediaType": "application/vnd.oci.image.layer.v1.tar" + mt,
		           "digest": "sha256:" + hashlib.sha256(raw).hexdigest(),
		           "size": len(raw),
		           "diffID": "sha256:" + hashlib.sha256(tar).hexdigest()},
		          open(t + ".json", "w"))
		PY
	done
	/usr/bin/python3 "$TOOLS/oci_layout.py" "$dir/img" t "${layers[@]}" ||
		ok=0
	for k in "${!layers[@]}"; do
		compare "$dir" "image layer $k" "${layers[$k]}" 0 "" \
			"oci:$dir/img:t" "$k" || ok=0
	done
	# through the cache: built, then read back the same; a cached index
	# damaged is built again, never read.  The first layer that has an
	# index at all (a random layer may be refused, as its unpack is).
	for k in "${!layers[@]}"; do
		uncompressed "${layers[$k]}" >"$dir/stream" 2>/dev/null
		"$TOOL" manifest "oci:$dir/img:t" "$k" "$dir/stream" \
			>"$dir/want.txt" 2>/dev/null && break
	done
	for want in built cached damaged built cached; do
		if [ $want = damaged ]; then
			for t in "$dir"/cache/index/v1/sha256/*; do
				damage "$t" 400
			done
			continue
		fi
		"$TOOL" cache "$dir/cache" "oci:$dir/img:t" "$k" "$dir/stream" \
			>"$dir/got.txt" 2>/dev/null
		if [ "$(head -n 1 "$dir/got.txt")" != $want ]; then
			echo "  cache: $(head -n 1 "$dir/got.txt"), not $want"
			ok=0
		fi
		sed -i 1d "$dir/got.txt"
		same "cache: $want" "$dir/want.txt" "$dir/got.txt" || ok=0
	done
	rm -f "$dir/stream"

	# a blob damaged: refused (its digest), no index
	t=$(/usr/bin/python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["digest"].split(":")[1])' \
		"${layers[0]}.json")
	chmod u+w "$dir/img/blobs/sha256/$t"
	damage "$dir/img/blobs/sha256/$t" 100
	if "$TOOL" data "oci:$dir/img:t" 0 >/dev/null 2>"$dir/bad.err"; then
		echo "  a damaged blob indexed"
		ok=0
	elif ! grep -q 'digest\|corrupt\|invalid' "$dir/bad.err"; then
		echo "  a damaged blob: $(cat "$dir/bad.err")"
		ok=0
	fi

	if [ $ok = 1 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL seed $seed"
		echo "  reproduce: /usr/bin/python3 $TOOLS/mkrandtar.py" \
		     "--seed $seed --out DIR"
		keep "seed $seed" "$dir"
	fi
	rm -rf "$dir"
}

# What the unpack refuses or warns about, the index does alike.
hostile() {
	local dir=$FS/hostile ok=1 n=0 spec
	mkdir -p "$dir"
	while IFS= read -r -d '' spec; do
		n=$((n + 1))
		printf '%s' "$spec" | /usr/bin/python3 "$TOOLS/mktar.py" \
			"$dir/t$n.tar" || { ok=0; continue; }
		compare_file "$dir" "hostile $n: $(echo "$spec" | tr '\n' ';')" \
			"$dir/t$n.tar" || ok=0
	done < <(printf '%s\0' \
		$'f fine\nf ../escape' \
		$'f a/../../escape' \
		$'f d/.wh.' \
		$'f .wh..' \
		$'h link target\nf target' \
		$'d d\nh link d' \
		$'h link ../../etc/passwd' \
		$'l etc /etc\nf etc/passwd' \
		$'f f\nf f/x' \
		$'f .wh.d/x' \
		$'f /abs\nf ./dot//slash/\nd ./' \
		$'f ./\n' \
		$'f a\nh a a' \
		$'d a\nf a/b\nf a\nh c a/b' \
		$'d a\nf a/b\nh c a/b\nf a\nf c2' \
		$'f a/b/c\nf a/b\nf a/b/d' \
		$'f a\nd a\nf a/b' \
		$'l a b\nd a\nf a/x' \
		$'f x/.wh..wh..opq\nf x/.wh.y\nh z x/.wh.y' \
		$'d .wh..wh.meta\nf .wh..wh.meta/f' \
		$'x f user.a=1\nx f user.b=2\nd d\nx d/g trusted.t=v' \
		$'p fifo\nx fifo2 user.q=1' \
		"f $(printf 'n%.0s' {1..300})" \
		"f $(printf 'd%.0s' {1..300})/x" \
		"l sym $(printf 't%.0s' {1..5000})")
	if [ $ok = 1 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL hostile tarballs"
		keep "hostile" "$dir"
	fi
}

# The tarballs the CLI cases give hunion (those whose scripts make or name
# tarballs): collected by a wrapper in hunion's place, each compared after.
cli_tarballs() {
	local dir=$FS/cli ok=1 cases t
	mkdir -p "$dir/bin" "$dir/got"
	cat >"$dir/bin/hunion" <<-EOF
	#!/bin/bash
	for a; do
		[ -f "\$a" ] && [ -r "\$a" ] || continue
		m=\$(od -An -tx1 -N4 "\$a" 2>/dev/null | tr -d ' ')
		u=\$(dd if="\$a" bs=1 skip=257 count=5 2>/dev/null)
		case \$m in 1f8b*|28b52ffd) ;; *) [ "\$u" = ustar ] || continue ;; esac
		cp "\$a" "$dir/got/\$(cksum <"\$a" | tr ' ' -).tar" 2>/dev/null
	done
	exec -a "\$0" "$HUNION" "\$@"
	EOF
	chmod +x "$dir/bin/hunion"
	mapfile -t cases < <(grep -l 'mktar\|mkrandtar\|\.tar' \
			     "$HERE"/../cli/cases/*/script |
			     xargs -n1 dirname | xargs -n1 basename)
	(unset TMPDIR; "$HERE/../cli/run.sh" "$dir/bin/hunion" "${cases[@]}") \
		>"$dir/cli.log" 2>&1
	for t in "$dir"/got/*.tar; do
		[ -e "$t" ] || continue
		compare_file "$dir" "cli tarball $(basename "$t")" "$t" || ok=0
	done
	if [ $ok = 1 ] && ls "$dir"/got/*.tar >/dev/null 2>&1; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL the CLI cases' tarballs ($(find "$dir/got" -type f | wc -l))"
		keep "cli" "$dir"
	fi
	rm -rf "$dir"
}

hostile
[ "${HUNION_PINDEX_CLI:-1}" = 1 ] && cli_tarballs
for seed in $(seq 1 "$SEEDS"); do
	run_seed "$seed"
done
finish
