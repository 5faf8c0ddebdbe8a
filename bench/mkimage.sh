#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/mkimage.sh [-c gzip|zstd] LAYOUT TAG LAYER... - an OCI image of
# overlayfs layers (bottom first), made as a user's other tools would make
# it, without hunion: for the image rows of bench/run.sh.
#
# Each layer is converted in a scratch copy beside LAYOUT (hard links for
# the files, so that the layer itself is never changed): a whiteout (a
# character device 0/0) becomes an empty file .wh.NAME, an opaque
# directory (trusted.overlay.opaque=y) loses the xattr and gets an empty
# .wh..wh..opq file, and the directories touched get their mtimes back.
# Then GNU tar writes it as a reproducible image build does:
#   tar --create --format=pax --xattrs --xattrs-include='*' --numeric-owner
#       --sort=name --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime
#       -C LAYER .
# compressed by pigz (gzip, its default level 6) or zstd -T0 -3, each blob
# stored under its sha256.  The config (rootfs.diff_ids: the sha256 of
# each uncompressed tar, history), the manifest and index.json (the
# manifest tagged TAG) are written by the python3 below.
set -euo pipefail

usage() {
	echo "usage: bench/mkimage.sh [-c gzip|zstd] LAYOUT TAG LAYER..." >&2
	exit 2
}
COMP=gzip
if [ "${1:-}" = -c ]; then
	[ $# -ge 2 ] || usage
	COMP=$2
	shift 2
fi
case $COMP in gzip|zstd) ;; *) usage ;; esac
[ $# -ge 3 ] || usage
LAYOUT=$1 TAG=$2
shift 2
for t in tar pigz zstd python3 sha256sum; do
	command -v "$t" >/dev/null ||
		{ echo "mkimage: $t missing (make deps)" >&2; exit 1; }
done
[ ! -e "$LAYOUT" ] || { echo "mkimage: $LAYOUT exists" >&2; exit 1; }
mkdir -p "$LAYOUT/blobs/sha256"
STAGE=$(mktemp -d "$(dirname "$LAYOUT")/.mkimage.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT

# LAYER converted to OCI whiteouts in a scratch copy (prints its path), or
# LAYER itself when it holds no whiteout and no opaque directory
oci_whiteouts() {
	python3 - "$1" "$STAGE/$(basename "$1")" <<'EOF'
import os, stat, subprocess, sys

src, dst = sys.argv[1:]
OPQ = "trusted.overlay.opaque"
whiteouts, opaque = [], []
for d, dirs, files in os.walk(src):
    rel = os.path.relpath(d, src)
    try:
        if os.getxattr(d, OPQ, follow_symlinks=False) == b"y":
            opaque.append(rel)
    except OSError:
        pass
    for n in files:
        st = os.lstat(os.path.join(d, n))
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            whiteouts.append(os.path.join(rel, n))
if not whiteouts and not opaque:
    print(src)
    sys.exit(0)
# the files hard-linked, not copied: the layer itself is not changed
subprocess.run(["cp", "-al", src, dst], check=True)
touched = set()
for w in whiteouts:
    os.unlink(os.path.join(dst, w))
    d, n = os.path.split(w)
    open(os.path.join(dst, d, ".wh." + n), "x").close()
    touched.add(d)
for d in opaque:
    os.removexattr(os.path.join(dst, d), OPQ, follow_symlinks=False)
    open(os.path.join(dst, d, ".wh..wh..opq"), "x").close()
    touched.add(d)
for d in touched:
    st = os.lstat(os.path.join(src, d))
    os.utime(os.path.join(dst, d), ns=(st.st_atime_ns, st.st_mtime_ns),
             follow_symlinks=False)
print(dst)
EOF
}

i=0
: > "$STAGE/layers.tsv"
for layer in "$@"; do
	dir=$(oci_whiteouts "$layer")
	tmp=$LAYOUT/blobs/sha256/.layer$i
	tar --create --file=- --format=pax --xattrs --xattrs-include='*' \
		--numeric-owner --sort=name \
		--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
		-C "$dir" . |
		if [ "$COMP" = gzip ]; then pigz -c; else zstd -T0 -3 -q -c; fi \
		> "$tmp"
	digest=$(sha256sum "$tmp" | cut -c1-64)
	if [ "$COMP" = gzip ]; then
		diffid=$(pigz -dc "$tmp" | sha256sum | cut -c1-64)
	else
		diffid=$(zstd -dcq "$tmp" | sha256sum | cut -c1-64)
	fi
	mv "$tmp" "$LAYOUT/blobs/sha256/$digest"
	printf '%s\t%s\t%s\n' "$digest" "$(stat -c %s \
		"$LAYOUT/blobs/sha256/$digest")" "$diffid" >> "$STAGE/layers.tsv"
	[ "$dir" = "$layer" ] || rm -rf "$dir"
	i=$((i + 1))
done

python3 - "$LAYOUT" "$TAG" "$COMP" "$STAGE/layers.tsv" <<'EOF'
import hashlib, json, os, platform, sys

layout, tag, comp, tsv = sys.argv[1:]
arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(),
                                                   platform.machine())
layers = [line.rstrip("\n").split("\t") for line in open(tsv)]


def put(media_type, obj):
    data = json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(layout, "blobs", "sha256", digest), "wb") as f:
        f.write(data)
    return {"mediaType": media_type, "digest": "sha256:" + digest,
            "size": len(data)}


config = put("application/vnd.oci.image.config.v1+json", {
    "created": "2026-01-01T00:00:00Z", "architecture": arch, "os": "linux",
    "config": {"Env": ["PATH=/usr/bin:/bin"], "Cmd": ["/bin/sh"]},
    "rootfs": {"type": "layers",
               "diff_ids": ["sha256:" + l[2] for l in layers]},
    "history": [{"created": "2026-01-01T00:00:00Z",
                 "created_by": "bench/mkimage.sh: layer %d" % i}
                for i in range(len(layers))]})
manifest = put("application/vnd.oci.image.manifest.v1+json", {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": config,
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+" + comp,
                "digest": "sha256:" + l[0], "size": int(l[1])}
               for l in layers]})
manifest["annotations"] = {"org.opencontainers.image.ref.name": tag}
with open(os.path.join(layout, "oci-layout"), "w") as f:
    json.dump({"imageLayoutVersion": "1.0.0"}, f)
with open(os.path.join(layout, "index.json"), "w") as f:
    json.dump({"schemaVersion": 2,
               "mediaType": "application/vnd.oci.image.index.v1+json",
               "manifests": [manifest]}, f)
EOF
