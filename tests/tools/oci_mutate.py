#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""oci_mutate.py LAYOUT TAG HOW - damage an OCI image layout, for tests.

Takes the image TAG of LAYOUT (made by umoci) and breaks it one way,
writing every document it changes as a new blob under its own digest and
index.json to match, so that only the damage named is wrong:
  blob-digest   the first layer's blob stored again, recompressed, under
                its old name, its new size in the manifest: the size is
                right, the digest is not
  blob-size     the first layer's size in the manifest one byte larger
  diff-id       the config's first diff_id that of other bytes
  missing       the first layer's blob removed
  symlink-blobs blobs/ a symlink to a copy of itself elsewhere
  symlink-blob  the first layer's blob a symlink to a copy of it
  index-cycle   index.json names an index, stored under its own digest,
                that names itself
  index-deep    index.json names a chain of 9 indexes, the last the image
  huge-json     the manifest padded past 4 MiB with spaces
  two-tags      a second manifest (an annotation differs) tagged TAG too
  encrypted     the first layer's media type +encrypted
  urls-missing  the first layer given with urls, its blob removed
  gzip-as-zstd  the first layer's media type +zstd, its bytes gzip
  plain-as-gzip the first layer's bytes the uncompressed tar, stored
                under their digest, its media type still +gzip
Or rewrites it, to be read all the same:
  as-docker     every media type Docker's (manifest v2 schema 2, its
                config and gzip layers), index.json's entry too
  in-index      TAG an image index of two platforms: linux/amd64 the
                image, linux/arm64/v8 the image without its top layer
"""

import gzip
import hashlib
import json
import os
import shutil
import sys

REF = "org.opencontainers.image.ref.name"


def blob_path(layout, digest):
    return os.path.join(layout, "blobs", *digest.split(":", 1))


def put(layout, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    with open(blob_path(layout, digest), "wb") as f:
        f.write(data)
    return digest, len(data)


def load(layout, digest):
    with open(blob_path(layout, digest), "rb") as f:
        return json.loads(f.read())


def main():
    layout, tag, how = sys.argv[1:4]
    ipath = os.path.join(layout, "index.json")
    with open(ipath) as f:
        index = json.load(f)
    entry = next(m for m in index["manifests"]
                 if m.get("annotations", {}).get(REF) == tag)
    manifest = load(layout, entry["digest"])
    config = load(layout, manifest["config"]["digest"])
    layer = manifest["layers"][0]
    lpath = blob_path(layout, layer["digest"])
    extra = []
    pad = b""

    if how == "blob-digest":
        with open(lpath, "rb") as f:
            raw = gzip.decompress(f.read())
        data = gzip.compress(raw, compresslevel=1, mtime=1)
        with open(lpath, "wb") as f:
            f.write(data)
        layer["size"] = len(data)
    elif how == "blob-size":
        layer["size"] += 1
    elif how == "diff-id":
        config["rootfs"]["diff_ids"][0] = \
            "sha256:" + hashlib.sha256(b"other").hexdigest()
    elif how == "missing":
        os.unlink(lpath)
    elif how == "symlink-blobs":
        shutil.move(os.path.join(layout, "blobs"), layout + ".blobs")
        os.symlink(os.path.abspath(layout + ".blobs"),
                   os.path.join(layout, "blobs"))
    elif how == "symlink-blob":
        shutil.move(lpath, layout + ".blob")
        os.symlink(os.path.abspath(layout + ".blob"), lpath)
    elif how == "index-cycle":
        # an index cannot hold its own digest: stored under the digest of
        # what it would be with a placeholder, it names that digest
        first = json.dumps({"schemaVersion": 2, "manifests": []}).encode()
        digest = "sha256:" + hashlib.sha256(first).hexdigest()
        body = json.dumps({"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "digest": digest, "size": len(first)}]}).encode()
        with open(blob_path(layout, digest), "wb") as f:
            f.write(body)
        index["manifests"] = [{
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "digest": digest, "size": len(body),
            "annotations": {REF: tag}}]
        with open(ipath, "w") as f:
            json.dump(index, f)
        return
    elif how == "index-deep":
        d = {"mediaType": entry["mediaType"], "digest": entry["digest"],
             "size": entry["size"]}
        for _ in range(9):
            dg, n = put(layout, json.dumps(
                {"schemaVersion": 2, "manifests": [d]}).encode())
            d = {"mediaType": "application/vnd.oci.image.index.v1+json",
                 "digest": dg, "size": n}
        index["manifests"] = [dict(d, annotations={REF: tag})]
        with open(ipath, "w") as f:
            json.dump(index, f)
        return
    elif how == "huge-json":
        pad = b" " * (4 << 20)
    elif how == "two-tags":
        other = dict(manifest)
        other["annotations"] = {"twin": "yes"}
        d, n = put(layout, json.dumps(other).encode())
        extra.append({"mediaType": entry["mediaType"], "digest": d,
                      "size": n, "annotations": {REF: tag}})
    elif how == "encrypted":
        layer["mediaType"] += "+encrypted"
    elif how == "urls-missing":
        layer["urls"] = ["https://example.invalid/blob"]
        os.unlink(lpath)
    elif how == "gzip-as-zstd":
        layer["mediaType"] = layer["mediaType"].replace("+gzip", "+zstd")
    elif how == "plain-as-gzip":
        with open(lpath, "rb") as f:
            layer["digest"], layer["size"] = put(layout,
                                                 gzip.decompress(f.read()))
    elif how == "as-docker":
        docker = "application/vnd.docker."
        manifest["mediaType"] = entry["mediaType"] = \
            docker + "distribution.manifest.v2+json"
        manifest["config"]["mediaType"] = docker + "container.image.v1+json"
        for lay in manifest["layers"]:
            lay["mediaType"] = docker + "image.rootfs.diff.tar.gzip"
    elif how == "in-index":
        short = dict(manifest, layers=manifest["layers"][:-1])
        sconf = dict(config, rootfs=dict(
            config["rootfs"], diff_ids=config["rootfs"]["diff_ids"][:-1]))
        d, n = put(layout, json.dumps(sconf).encode())
        short["config"] = dict(manifest["config"], digest=d, size=n)
        sd, sn = put(layout, json.dumps(short).encode())
        ix = {"schemaVersion": 2, "manifests": [
            {"mediaType": entry["mediaType"], "digest": entry["digest"],
             "size": entry["size"],
             "platform": {"os": "linux", "architecture": "amd64"}},
            {"mediaType": entry["mediaType"], "digest": sd, "size": sn,
             "platform": {"os": "linux", "architecture": "arm64",
                          "variant": "v8"}}]}
        d, n = put(layout, json.dumps(ix).encode())
        index["manifests"] = [{
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "digest": d, "size": n, "annotations": {REF: tag}}]
        with open(ipath, "w") as f:
            json.dump(index, f)
        return
    else:
        sys.exit("unknown damage " + how)

    d, n = put(layout, json.dumps(config).encode())
    manifest["config"]["digest"], manifest["config"]["size"] = d, n
    d, n = put(layout, json.dumps(manifest).encode() + pad)
    entry["digest"], entry["size"] = d, n
    index["manifests"] += extra
    with open(ipath, "w") as f:
        json.dump(index, f)


if __name__ == "__main__":
    main()
