#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/kernel/flattenindex.sh HUNION [SEEDS]
#
# flatten reads tarball and image layers from their path index, each
# file's bytes forward from its tarball (lib/tar/pdata.c), where the
# tarball holds them in the view's order; a tarball that does not is
# unpacked as before, and HUNION_INDEX=0 unpacks them all.  The outputs
# must be the same bytes.  For seeds 1..SEEDS (default 10):
#
#   1. tests/tools/mkrandtar.py --stack 3 writes three random tarball
#      layers (implicit parents, hard links, whiteouts, opaque markers,
#      duplicates, types replaced; plain, gzip or zstd), with --sorted
#      for the odd seeds (the view's order, as docker and GNU tar
#      --sort=name write them: read forward) and in a random walk order
#      for the even ones (unpacked); tests/tools/oci_layout.py an image
#      of them;
#   2. flatten -o F.tar, -o F.tar.zst over the tarballs and over
#      oci:IMG, and -o oci:OUT:t over the image, with the index (made
#      afresh, and twice with a cache: the second reads it) and with
#      HUNION_INDEX=0: the same bytes (a layout: the same files), the
#      same exit status and messages;
#   3. a sorted seed whose three layers were all read forward did it
#      with TMPDIR unusable (a file): nothing went through it.
#
# Ends with "flattenindex: N passed, N failed", and fails when no seed
# read a layer forward.  Needs root (owners, trusted.* xattrs).

SUITE="flattenindex"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
kt_args "HUNION [SEEDS]" "$@"
SEEDS=${2:-10}

kt_setup "$SEEDS"
for t in /usr/bin/python3 zstd tar; do
	command -v $t >/dev/null || skip_all "$t is not installed"
done
export SOURCE_DATE_EPOCH=1000000000
forward=0

# The descriptor LAYER.json oci_layout.py reads.
descriptor() {	# LAYER
	/usr/bin/python3 - "$1" <<'EOF'
import gzip, hashlib, json, subprocess, sys
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

# flatten -o OUT LAYERS... three ways: the index made afresh, the index
# read from a cache (its second run), unpacked; outputs S/NAME.{idx,
# cached,dir}[.EXT], with the exit status and messages beside.
three() {	# NAME EXT LAYERS...
	local name=$1 ext=$2 ok=0 how out
	shift 2
	for how in idx cached dir; do
		out="$S/$name.$how$ext"
		case $how in
		idx)	"$HUNION" flatten --no-cache -o "$out" "$@" \
				>"$S/$name.$how.log" 2>&1 ;;
		cached)	"$HUNION" flatten --cache-dir "$S/cache" \
				-o "$out.warm$ext" "$@" >/dev/null 2>&1
			"$HUNION" flatten --cache-dir "$S/cache" -o "$out" \
				"$@" >/dev/null 2>"$S/$name.$how.log" ;;
		dir)	HUNION_INDEX=0 "$HUNION" flatten -o "$out" "$@" \
				>"$S/$name.$how.log" 2>&1 ;;
		esac
		echo "exit $?" >>"$S/$name.$how.log"
	done
	# (a cached index does not repeat the tarball's warnings; an
	# unpacked layer does)
	grep -v ': warning: ' "$S/$name.dir.log" >"$S/$name.dir.nowarn"
	grep -v ': warning: ' "$S/$name.cached.log" >"$S/$name.cached.nowarn"
	same "$name: messages, index vs unpacked" "$S/$name.dir.log" \
		"$S/$name.idx.log" || ok=1
	same "$name: messages, cached index vs unpacked" \
		"$S/$name.dir.nowarn" "$S/$name.cached.nowarn" || ok=1
	for how in idx cached; do
		if [ -e "$S/$name.dir$ext" ] || [ -e "$S/$name.$how$ext" ]; then
			diff -r "$S/$name.dir$ext" "$S/$name.$how$ext" \
				>/dev/null 2>&1 && continue
			echo "  $name: the $how output differs from the unpack's"
			ok=1
		fi
	done
	return $ok
}

run_seed() {
	local seed=$1 ok=1 l sorted='' n
	local S=$FS/s$seed
	local -a layers
	[ $((seed % 2)) = 1 ] && sorted=--sorted
	mkdir -p "$S"
	if ! mapfile -t layers < <(/usr/bin/python3 "$TOOLS/mkrandtar.py" \
		--seed "$seed" --out "$S/stack" --stack 3 $sorted \
		2>"$S/gen.err") || [ "${#layers[@]}" != 3 ]; then
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

	three tars .tar "${layers[@]}" || ok=0
	three tars-zst .tar.zst "${layers[@]}" || ok=0
	three img .tar "oci:$S/img:t" || ok=0
	three img-oci "" "oci:$S/out:t" "oci:$S/img:t" || ok=0

	n=$("$HUNION" flatten -v --no-cache -o "$S/v.tar" "${layers[@]}" 2>&1 |
		grep -c 'data read from the tarball')
	[ -n "$sorted" ] && [ "$n" = 0 ] && {
		echo "  a stack in the view's order: no layer read forward"
		ok=0
	}
	forward=$((forward + n))
	if [ "$n" = 3 ]; then
		: >"$S/notadir"
		if ! TMPDIR="$S/notadir" "$HUNION" flatten --no-cache \
			-o "$S/tmp.tar" "${layers[@]}" 2>"$S/tmp.err"; then
			echo "  read forward, yet TMPDIR was needed:"
			sed 's/^/    /' "$S/tmp.err" | head -n 3
			ok=0
		elif ! cmp -s "$S/tmp.tar" "$S/tars.dir.tar"; then
			echo "  TMPDIR unusable: another tarball"
			ok=0
		fi
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
if [ "$forward" = 0 ] && [ "$SEEDS" -gt 0 ]; then
	echo "FAIL no layer of any seed was read forward"
	failed=$((failed + 1))
fi
finish
