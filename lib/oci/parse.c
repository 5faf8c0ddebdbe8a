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

int oci_error_in(struct hu_error *e, const char *layout)
{
	if (!e->path)
		e->path = strdup(layout);
	return -1;
}

json_t *oci_json_load(const char *buf, size_t len, const char *what,
		      struct hu_error *e)
{
	const char *sep = what ? ": " : "";
	json_error_t jerr;
	json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);

	if (!what)
		what = "";
	if (!j) {
		hu_error_set(e, 0, NULL, "%s%snot valid JSON (line %d: %.80s)",
			     what, sep, jerr.line, jerr.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		hu_error_set(e, 0, NULL, "%s%snot a JSON object", what, sep);
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
	if (oci_digest_sha512(dg))
		return hu_error_set(e, 0, NULL, "%s: digest %.19s...: sha512, "
				    "valid, but hunion reads sha256 only",
				    what, dg);
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
	for (size_t i = 0; i < x->n; i++) {
		free(x->v[i].tag);
		free(x->v[i].why);
	}
	free(x->v);
	x->v = NULL;
	x->n = 0;
}

/* A platform object: os, architecture, variant; true when it has an os
 * and an architecture. */
static bool platform_get(json_t *pl, struct oci_platform *p)
{
	const char *os = get_string(pl, "os");
	const char *arch = get_string(pl, "architecture");
	const char *var = get_string(pl, "variant");

	oci_copy_field(p->os, sizeof(p->os), os ? os : "");
	oci_copy_field(p->arch, sizeof(p->arch), arch ? arch : "");
	oci_copy_field(p->variant, sizeof(p->variant), var ? var : "");
	return os && arch;
}

/* An entry: its tag and platform first (an entry kept as unreadable
 * keeps them: the one a REF or a platform chooses is told why it cannot
 * be read), then its descriptor. */
static int entry_parse(json_t *o, const char *what, struct oci_entry *en,
		       struct hu_error *e)
{
	json_t *pl = json_object_get(o, "platform");
	const char *tag;

	tag = get_string(json_object_get(o, "annotations"), REF_NAME);
	if (tag && !(en->tag = strdup(tag)))
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (json_is_object(pl))
		en->has_platform = platform_get(pl, &en->platform);
	return desc_parse(o, what, &en->desc, NULL, e);
}

int oci_index_entries(json_t *j, const char *what, unsigned flags,
		      struct oci_index *out, struct hu_error *e)
{
	json_t *m = json_object_get(j, "manifests");

	memset(out, 0, sizeof(*out));
	if (!json_is_array(m))
		return hu_error_set(e, 0, NULL, "%s: no \"manifests\" list",
				    what);
	out->v = calloc(json_array_size(m) + 1, sizeof(*out->v));
	if (!out->v)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < json_array_size(m); i++) {
		struct oci_entry *en = &out->v[i];
		struct hu_error skip = { 0 };
		bool keep = flags & OCI_INDEX_KEEP_UNREADABLE;

		out->n = i + 1;
		if (entry_parse(json_array_get(m, i), what, en,
				keep ? &skip : e) == 0)
			continue;
		if (!keep || skip.err == ENOMEM) {
			if (keep)
				*e = skip;
			else
				hu_error_clear(&skip);
			oci_index_free(out);
			return -1;
		}
		memset(&en->desc, 0, sizeof(en->desc));
		en->unreadable = true;
		en->why = strdup(skip.msg);
		hu_error_clear(&skip);
		if (!en->why) {
			oci_index_free(out);
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		}
	}
	return 0;
}

/* @buf loaded (oci_json_load) and read by @fn into @out. */
static int parse_doc(const char *buf, size_t len, const char *what,
		     int (*fn)(json_t *j, const char *what, void *out,
			       struct hu_error *e),
		     void *out, struct hu_error *e)
{
	json_t *j = oci_json_load(buf, len, what, e);
	int rc = j ? fn(j, what, out, e) : -1;

	json_decref(j);
	return rc;
}

int oci_index_parse(const char *buf, size_t len, const char *what,
		    unsigned flags, struct oci_index *out, struct hu_error *e)
{
	json_t *j = oci_json_load(buf, len, what, e);
	int rc = j ? oci_index_entries(j, what, flags, out, e) : -1;

	if (!j)
		memset(out, 0, sizeof(*out));
	json_decref(j);
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

void oci_manifest_free(struct oci_manifest *m)
{
	free(m->layers);
	free(m->layer_urls);
	memset(m, 0, sizeof(*m));
}

/* A manifest's descriptors: its config and its layers. */
static int manifest_descs(json_t *j, const char *what, void *out,
			  struct hu_error *e)
{
	struct oci_manifest *m = out;
	json_t *layers;

	memset(m, 0, sizeof(*m));
	if (desc_parse(json_object_get(j, "config"), what, &m->config, NULL,
		       e) < 0)
		return -1;
	layers = json_object_get(j, "layers");
	if (!json_is_array(layers))
		return hu_error_set(e, 0, NULL, "%s: no \"layers\" list",
				    what);
	m->layers = calloc(json_array_size(layers) + 1, sizeof(*m->layers));
	m->layer_urls = calloc(json_array_size(layers) + 1,
			       sizeof(*m->layer_urls));
	if (!m->layers || !m->layer_urls) {
		oci_manifest_free(m);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	for (size_t i = 0; i < json_array_size(layers); i++) {
		if (desc_parse(json_array_get(layers, i), what, &m->layers[i],
			       &m->layer_urls[i], e) < 0) {
			oci_manifest_free(m);
			return -1;
		}
		m->nlayers = i + 1;
	}
	return 0;
}

int oci_manifest_descs(const char *buf, size_t len, const char *what,
		       struct oci_manifest *m, struct hu_error *e)
{
	memset(m, 0, sizeof(*m));
	return parse_doc(buf, len, what, manifest_descs, m, e);
}

/* An image hunion reads: a manifest's own type and its config's, each
 * layer's (layer_check). */
static int manifest_check(json_t *j, const struct oci_manifest *m,
			  const char *what, struct hu_error *e)
{
	const char *own = get_string(j, "mediaType");
	const struct oci_media_type *mt;

	if (own && (!(mt = oci_media_type(own)) ||
		    mt->kind != OCI_KIND_MANIFEST))
		return hu_error_set(e, 0, NULL, "%s: media type '%.100s', "
				    "not an image manifest", what, own);
	mt = oci_media_type(m->config.media_type);
	if (!mt || mt->kind != OCI_KIND_CONFIG)
		return hu_error_set(e, 0, NULL, "%s: config %s has media "
				    "type '%.100s', not an image config",
				    what, m->config.digest,
				    m->config.media_type);
	for (size_t i = 0; i < m->nlayers; i++)
		if (layer_check(&m->layers[i], what, e) < 0)
			return -1;
	return 0;
}

int oci_manifest_parse(const char *buf, size_t len, const char *what,
		       struct hu_oci_image *img, struct hu_error *e)
{
	json_t *j = oci_json_load(buf, len, what, e);
	struct oci_manifest m;
	int rc = -1;

	if (!j)
		return -1;
	if (manifest_descs(j, what, &m, e) == 0 &&
	    manifest_check(j, &m, what, e) == 0) {
		free(img->layers);
		free(img->layer_urls);
		img->config = m.config;
		img->nlayers = m.nlayers;
		img->layers = m.layers;
		img->layer_urls = m.layer_urls;
		m.layers = NULL;
		m.layer_urls = NULL;
		rc = 0;
	}
	oci_manifest_free(&m);
	json_decref(j);
	return rc;
}

int oci_config_parse(const char *buf, size_t len, const char *what,
		     struct hu_oci_image *img, struct hu_error *e)
{
	json_t *j = oci_json_load(buf, len, what, e), *rootfs, *ids;
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
	json_t *j = oci_json_load(buf, len, "oci-layout", e);
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

int oci_config_platform(const char *buf, size_t len, const char *what,
			struct oci_platform *p, bool *has, struct hu_error *e)
{
	json_t *j = oci_json_load(buf, len, what, e);

	if (!j)
		return -1;
	*has = platform_get(j, p);
	json_decref(j);
	return 0;
}

char *oci_config_created_by(const char *buf, size_t len, size_t k)
{
	struct hu_error e = { 0 };
	json_t *j = oci_json_load(buf, len, "config", &e), *h;
	const char *by = NULL;
	char *out;
	size_t i;

	hu_error_clear(&e);
	/* the entries that are no empty_layer, one a layer, in order */
	json_array_foreach(json_object_get(j, "history"), i, h) {
		if (json_is_true(json_object_get(h, "empty_layer")))
			continue;
		if (k-- == 0) {
			by = get_string(h, "created_by");
			break;
		}
	}
	out = by ? strdup(by) : NULL;
	json_decref(j);
	return out;
}
