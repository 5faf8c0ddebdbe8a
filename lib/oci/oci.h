/* SPDX-License-Identifier: MIT */
/*
 * OCI image layouts, what the modules of lib/oci/ share: the media types
 * hunion knows (mediatype.c), blobs opened and JSON documents read and
 * verified under DIR/blobs/sha256/ (blob.c), the parsers of the index,
 * manifest and config documents (parse.c), and the choice of an image by
 * REF and platform (layout.c).  The parsers take bytes, so the fuzz target
 * (tests/fuzz/ocilayout_fuzz.c) and the unit tests call them directly.
 * The writer (ociwrite.h: ociindex.c, ocigc.c, ociimage.c, ocireuse.c)
 * reads the same documents through these parsers: one reader of each.
 */
#ifndef HUNION_OCI_H
#define HUNION_OCI_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "hunion.h"

/* No JSON document of a layout (index.json, an index, a manifest, a
 * config) is read when larger: untrusted input, read whole into memory. */
#define OCI_JSON_MAX ((size_t)4 << 20)
/* Indexes nest at most this deep: a deeper chain is refused as a cycle
 * would be (an index naming itself, directly or not). */
#define OCI_INDEX_DEPTH_MAX 8

/* ---- media types (mediatype.c) ---- */

enum oci_kind {
	OCI_KIND_UNKNOWN = 0,
	OCI_KIND_INDEX,		/* an OCI index or a Docker manifest list */
	OCI_KIND_MANIFEST,	/* an OCI or Docker v2s2 image manifest */
	OCI_KIND_CONFIG,	/* an OCI or Docker image config */
	OCI_KIND_LAYER,		/* a layer tarball */
};

enum oci_comp { OCI_COMP_NONE = 0, OCI_COMP_GZIP, OCI_COMP_ZSTD };

struct oci_media_type {
	const char *name;
	enum oci_kind kind;
	enum oci_comp comp;	/* layers: how the blob is compressed */
};

/* The media type @name (NULL when hunion does not know it). */
const struct oci_media_type *oci_media_type(const char *name);
/* Is @name an encrypted layer type (ocicrypt's "+encrypted" suffix)? */
bool oci_media_type_encrypted(const char *name);

/* ---- blobs and documents (blob.c) ---- */

/* Is @d "sha256:" and 64 lowercase hex digits? */
bool oci_digest_valid(const char *d);
/* Is @d "sha512:" and 128 lowercase hex digits?  Valid per the spec:
 * such a document (another tool's) is read by gc only, for what it
 * references. */
bool oci_digest_sha512(const char *d);
/* The longest digest read: "sha512:", 128 hex digits, NUL. */
#define OCI_DIGEST_MAX 136
/* Open the blob of @digest under @layout_fd/blobs/sha256/, no symlink
 * followed on the way, a regular file: its fd, or -1 with @e naming the
 * blob and @layout. */
int oci_blob_open(int layout_fd, const char *layout, const char *digest,
		  struct hu_error *e);
/* Read the JSON document @d describes, at most OCI_JSON_MAX bytes, its
 * size and sha256 checked against @d: malloc'd, NUL-terminated. */
int oci_doc_read(int layout_fd, const char *layout,
		 const struct hu_oci_desc *d, char **buf, size_t *len,
		 struct hu_error *e);
/* The same of the document of @digest (sha256 or sha512) and @size. */
int oci_doc_read_digest(int layout_fd, const char *layout,
			const char *digest, uint64_t size, char **buf,
			size_t *len, struct hu_error *e);
/* Read @layout_fd/@name (index.json, oci-layout), at most OCI_JSON_MAX
 * bytes, not a symlink. */
int oci_file_read(int layout_fd, const char *layout, const char *name,
		  char **buf, size_t *len, struct hu_error *e);
/* The sha256 of @len bytes at @buf as "sha256:HEX" into @out. */
int oci_sha256(const void *buf, size_t len, char out[72],
	       struct hu_error *e);

/* @src into @dst of @size bytes, cut short when longer (parse.c). */
void oci_copy_field(char *dst, size_t size, const char *src);
/* @e's path, when it has none, the layout @layout (the parsers name only
 * the document): -1. */
int oci_error_in(struct hu_error *e, const char *layout);

/* ---- documents (parse.c; the choice of an image: layout.c) ---- */

struct oci_platform {
	char os[32];
	char arch[32];
	char variant[16];	/* "" when none */
};

/* @len bytes of JSON at @buf: an object (duplicate keys refused), or
 * NULL with @e set (@what, when not NULL, names the document). */
json_t *oci_json_load(const char *buf, size_t len, const char *what,
		      struct hu_error *e);

/* One descriptor of an index, in the index's order. */
struct oci_entry {
	struct hu_oci_desc desc;
	char *tag;		/* its org.opencontainers.image.ref.name */
	bool has_platform;	/* a platform with os and architecture */
	struct oci_platform platform;
	/* OCI_INDEX_KEEP_UNREADABLE: an entry that is no descriptor hunion
	 * reads (desc zeroed, tag and platform still read; a sha512 digest,
	 * valid as it is, is one), and why */
	bool unreadable;
	char *why;
};

struct oci_index {
	struct oci_entry *v;
	size_t n;
};

/* Parse an index (index.json, a nested index, a Docker manifest list):
 * every descriptor checked (digest, size).  @what names it in errors.
 * With OCI_INDEX_KEEP_UNREADABLE an entry that is no descriptor hunion
 * reads (another tool's, a sha512 digest) is kept, marked, instead of
 * refusing the index: only the entry chosen must be read. */
#define OCI_INDEX_KEEP_UNREADABLE 1u
int oci_index_parse(const char *buf, size_t len, const char *what,
		    unsigned flags, struct oci_index *out, struct hu_error *e);
/* The same of an index loaded (oci_json_load), for the writer, which
 * keeps the object to rewrite it. */
int oci_index_entries(json_t *j, const char *what, unsigned flags,
		      struct oci_index *out, struct hu_error *e);
void oci_index_free(struct oci_index *x);

/* A manifest's descriptors: what it references. */
struct oci_manifest {
	struct hu_oci_desc config;
	size_t nlayers;
	struct hu_oci_desc *layers;
	bool *layer_urls;	/* per layer: given with urls */
};
/* Parse a manifest's descriptors (config, layers; each digest and size
 * checked), whatever their media types: what gc and `oci ls` read. */
int oci_manifest_descs(const char *buf, size_t len, const char *what,
		       struct oci_manifest *m, struct hu_error *e);
void oci_manifest_free(struct oci_manifest *m);
/* Parse a manifest of an image hunion reads into @img (config, layers):
 * its descriptors (oci_manifest_descs), its own media type a manifest's,
 * its config's a config's, each layer's known and not encrypted. */
int oci_manifest_parse(const char *buf, size_t len, const char *what,
		       struct hu_oci_image *img, struct hu_error *e);
/* Parse a config: rootfs.diff_ids into @img (as many as its layers). */
int oci_config_parse(const char *buf, size_t len, const char *what,
		     struct hu_oci_image *img, struct hu_error *e);
/* A config's platform (os, architecture, variant) into @p; @has: it has
 * an os and an architecture. */
int oci_config_platform(const char *buf, size_t len, const char *what,
			struct oci_platform *p, bool *has,
			struct hu_error *e);
/* The created_by of layer @k in a config's history (its entries that are
 * no empty_layer, in order), malloc'd; NULL when none (or no JSON). */
char *oci_config_created_by(const char *buf, size_t len, size_t k);

/* oci-layout's imageLayoutVersion: 1.x, or -1. */
int oci_layout_version_check(const char *buf, size_t len,
			     struct hu_error *e);

/* "os/arch[/variant]" into @p; -1 when malformed (layout.c). */
int oci_platform_parse(const char *s, struct oci_platform *p);
/* The host's platform: uname's machine in Go's names (GOARCH). */
void oci_platform_host(struct oci_platform *p);
/* Does an entry of platform @have run where @want is asked?  A variant
 * asked must be the entry's; none asked takes any (arm64's "v8" and
 * none are one). */
bool oci_platform_match(const struct oci_platform *want,
			const struct oci_platform *have);
/* Is @s a tag as an operand may name one ([A-Za-z0-9_][A-Za-z0-9._-]*,
 * at most 128 bytes)? */
bool oci_tag_valid(const char *s);

#endif /* HUNION_OCI_H */
