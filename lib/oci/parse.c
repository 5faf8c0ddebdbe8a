/* SPDX-License-Identifier: MIT */
/*
 * The JSON documents of an image layout, parsed with jansson (duplicate
 * keys refused): oci-layout, an index (index.json, a nested index, a
 * Docker manifest list), a manifest and a config.  Untrusted bytes, read
 * and verified by blob.c first; every descriptor's digest and size
 * checked here, every layer's media type (mediatype.c).  The parsers take
 * bytes, so the fuzz target and the unit tests call them directly.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "oci/oci.h"

#define REF_NAME "org.opencontainers.image.ref.name"

void oci_copy_field(char *dst, size_t size, const char *src)
{
	size_t n = strnlen(src, size - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

static json_t *load(const char *buf, size_t len, const char *what,
		    struct hu_error *e)
{
	json_error_t jerr;
	json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);

	if (!j) {
		hu_error_set(e, 0, NULL, "%s: not valid JSON (line %d: %.80s)",
			     what, jerr.line, jerr.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		hu_error_set(e, 0, NULL, "%s: not a JSON object", what);
		return NULL;
	}
	return j;
}

static const char *get_string(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* A descriptor: mediaType, digest (sha256), size; @urls: it has any. */
static int desc_parse(json_t *o, const char *what, struct hu_oci_desc *d,
		      bool *urls, struct hu_error *e)
{
	const char *mt = get_string(o, "mediaType");
	const char *dg = get_string(o, "digest");
	json_t *size = json_object_get(o, "size"), *u;

	memset(d, 0, sizeof(*d));
	if (!json_is_object(o) || !dg || !mt || !json_is_integer(size))
		return hu_error_set(e, 0, NULL, "%s: a descriptor without "
				    "mediaType, digest or size", what);
	if (!oci_digest_valid(dg))
		return hu_error_set(e, 0, NULL, "%s: digest '%.80s' is not "
				    "sha256 and 64 lowercase hex digits (the "
				    "only kind hunion reads)", what, dg);
	if (strlen(mt) >= sizeof(d->media_type))
		return hu_error_set(e, 0, NULL, "%s: blob %s: media type "
				    "too long", what, dg);
	if (json_integer_value(size) < 0)
		return hu_error_set(e, 0, NULL, "%s: blob %s: negative size",
				    what, dg);
	oci_copy_field(d->media_type, sizeof(d->media_type), mt);
	oci_copy_field(d->digest, sizeof(d->digest), dg);
	d->size = (uint64_t)json_integer_value(size);
	u = json_object_get(o, "urls");
	if (urls)
		*urls = json_is_array(u) && json_array_size(u) > 0;
	return 0;
}

void oci_index_free(struct oci_index *x)
{
	for (size_t i = 0; i < x->n; i++)
		free(x->v[i].tag);
	free(x->v);
	x->v = NULL;
	x->n = 0;
}

static int entry_parse(json_t *o, const char *what, struct oci_entry *en,
		       struct hu_error *e)
{
	json_t *pl = json_object_get(o, "platform");
	const char *tag;

	if (desc_parse(o, what, &en->desc, NULL, e) < 0)
		return -1;
	tag = get_string(json_object_get(o, "annotations"), REF_NAME);
	if (tag && !(en->tag = strdup(tag)))
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (json_is_object(pl)) {
		const char *os = get_string(pl, "os");
		const char *arch = get_string(pl, "architecture");
		const char *var = get_string(pl, "variant");

		en->has_platform = os && arch;
		oci_copy_field(en->platform.os, sizeof(en->platform.os),
			   os ? os : "");
		oci_copy_field(en->platform.arch, sizeof(en->platform.arch),
			   arch ? arch : "");
		oci_copy_field(en->platform.variant, sizeof(en->platform.variant),
			   var ? var : "");
	}
	return 0;
}

int oci_index_parse(const char *buf, size_t len, const char *what,
		    struct oci_index *out, struct hu_error *e)
{
	json_t *j = load(buf, len, what, e), *m;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (!j)
		return -1;
	m = json_object_get(j, "manifests");
	if (!json_is_array(m)) {
		hu_error_set(e, 0, NULL, "%s: no \"manifests\" list", what);
		goto out;
	}
	out->v = calloc(json_array_size(m) + 1, sizeof(*out->v));
	if (!out->v) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < json_array_size(m); i++) {
		out->n = i + 1;
		if (entry_parse(json_array_get(m, i), what, &out->v[i], e) < 0)
			goto out;
	}
	rc = 0;
out:
	json_decref(j);
	if (rc < 0)
		oci_index_free(out);
	return rc;
}

/* A layer descriptor hunion can read: a known layer type, unencrypted. */
static int layer_check(const struct hu_oci_desc *d, const char *what,
		       struct hu_error *e)
{
	const struct oci_media_type *mt = oci_media_type(d->media_type);

	if (oci_media_type_encrypted(d->media_type))
		return hu_error_set(e, 0, NULL, "%s: layer %s is encrypted "
				    "(%s): hunion cannot read it", what,
				    d->digest, d->media_type);
	if (!mt || mt->kind != OCI_KIND_LAYER)
		return hu_error_set(e, 0, NULL, "%s: layer %s has media type "
				    "'%.100s', not a layer tarball hunion "
				    "knows", what, d->digest, d->media_type);
	return 0;
}

int oci_manifest_parse(const char *buf, size_t len, const char *what,
		       struct hu_oci_image *img, struct hu_error *e)
{
	json_t *j = load(buf, len, what, e), *layers;
	const struct oci_media_type *mt;
	const char *own;
	int rc = -1;

	if (!j)
		return -1;
	own = get_string(j, "mediaType");
	if (own && (!(mt = oci_media_type(own)) ||
		    mt->kind != OCI_KIND_MANIFEST)) {
		hu_error_set(e, 0, NULL, "%s: media type '%.100s', not an "
			     "image manifest", what, own);
		goto out;
	}
	if (desc_parse(json_object_get(j, "config"), what, &img->config, NULL,
		       e) < 0)
		goto out;
	mt = oci_media_type(img->config.media_type);
	if (!mt || mt->kind != OCI_KIND_CONFIG) {
		hu_error_set(e, 0, NULL, "%s: config %s has media type "
			     "'%.100s', not an image config", what,
			     img->config.digest, img->config.media_type);
		goto out;
	}
	layers = json_object_get(j, "layers");
	if (!json_is_array(layers)) {
		hu_error_set(e, 0, NULL, "%s: no \"layers\" list", what);
		goto out;
	}
	free(img->layers);
	img->nlayers = 0;
	img->layers = calloc(json_array_size(layers) + 1,
			     sizeof(*img->layers));
	img->layer_urls = calloc(json_array_size(layers) + 1,
				 sizeof(*img->layer_urls));
	if (!img->layers || !img->layer_urls) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < json_array_size(layers); i++) {
		struct hu_oci_desc *d = &img->layers[i];

		if (desc_parse(json_array_get(layers, i), what, d,
			       &img->layer_urls[i], e) < 0 ||
		    layer_check(d, what, e) < 0)
			goto out;
		img->nlayers = i + 1;
	}
	rc = 0;
out:
	json_decref(j);
	return rc;
}

int oci_config_parse(const char *buf, size_t len, const char *what,
		     struct hu_oci_image *img, struct hu_error *e)
{
	json_t *j = load(buf, len, what, e), *rootfs, *ids;
	const char *type;
	int rc = -1;

	if (!j)
		return -1;
	rootfs = json_object_get(j, "rootfs");
	type = get_string(rootfs, "type");
	ids = json_object_get(rootfs, "diff_ids");
	if (!type || strcmp(type, "layers") != 0 || !json_is_array(ids)) {
		hu_error_set(e, 0, NULL, "%s: no rootfs of type \"layers\" "
			     "with a diff_ids list", what);
		goto out;
	}
	if (json_array_size(ids) != img->nlayers) {
		hu_error_set(e, 0, NULL, "%s: %zu diff_ids for %zu layers",
			     what, json_array_size(ids), img->nlayers);
		goto out;
	}
	free(img->diff_ids);
	img->diff_ids = calloc(img->nlayers + 1, sizeof(*img->diff_ids));
	if (!img->diff_ids) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < img->nlayers; i++) {
		const char *id = json_string_value(json_array_get(ids, i));

		if (!id || !oci_digest_valid(id)) {
			hu_error_set(e, 0, NULL, "%s: diff_ids[%zu] is not "
				     "sha256 and 64 lowercase hex digits",
				     what, i);
			goto out;
		}
		oci_copy_field(img->diff_ids[i], sizeof(img->diff_ids[i]), id);
	}
	rc = 0;
out:
	json_decref(j);
	return rc;
}

int oci_layout_version_check(const char *buf, size_t len,
			     struct hu_error *e)
{
	json_t *j = load(buf, len, "oci-layout", e);
	const char *v;
	int rc = 0;

	if (!j)
		return -1;
	v = get_string(j, "imageLayoutVersion");
	if (!v || strncmp(v, "1.", 2) != 0)
		rc = hu_error_set(e, 0, NULL, "oci-layout: "
				  "imageLayoutVersion %.40s, not 1.x",
				  v ? v : "missing");
	json_decref(j);
	return rc;
}
