#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""oci_layout.py LAYOUT TAG LAYER... - an OCI image layout for tests.

Writes the directory LAYOUT (oci-layout, index.json, blobs/sha256/) with
one image tagged TAG whose layers are LAYER... (bottom first): each LAYER
is a layer tarball and LAYER.json its descriptor as "hunion flatten/diff
--descriptor" writes it ({mediaType, digest, size, diffID}).  The blob is
stored under the descriptor's digest as it is, unchecked, so that the
reader (umoci) is the one to judge the descriptor.  The image config
lists the diffIDs as rootfs.diff_ids.
"""

import hashlib
import json
import os
import shutil
import sys


def put_blob(layout, digest, src=None, data=None):
    path = os.path.join(layout, "blobs", *digest.split(":", 1))
    if src is not None:
        shutil.copyfile(src, path)
    else:
        with open(path, "wb") as f:
            f.write(data)


def put_json(layout, media_type, obj):
    data = json.dumps(obj, indent=1, sort_keys=True).encode()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    put_blob(layout, digest, data=data)
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    layout, tag, layers = argv[1], argv[2], argv[3:]
    os.makedirs(os.path.join(layout, "blobs", "sha256"))
    with open(os.path.join(layout, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    descs = []
    for layer in layers:
        with open(layer + ".json") as f:
            descs.append(json.load(f))
        put_blob(layout, descs[-1]["digest"], src=layer)
    config = put_json(layout, "application/vnd.oci.image.config.v1+json", {
        "architecture": "amd64", "os": "linux", "config": {},
        "rootfs": {"type": "layers",
                   "diff_ids": [d["diffID"] for d in descs]}})
    manifest = put_json(layout, "application/vnd.oci.image.manifest.v1+json", {
        "schemaVersion": 2, "config": config,
        "layers": [{k: d[k] for k in ("mediaType", "digest", "size")}
                   for d in descs]})
    manifest["annotations"] = {"org.opencontainers.image.ref.name": tag}
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [manifest]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
