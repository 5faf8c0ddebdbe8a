/* SPDX-License-Identifier: MIT */
/*
 * An image written into a layout (-o oci:DIR:TAG): its layer blobs as
 * they are made (or taken as they are from the image a layer comes from),
 * then the config and the manifest, written with jansson, keys sorted, so
 * that the same layers and timestamps give the same bytes and the same
 * manifest digest; last the tag, in index.json (ociindex.c).  Until that
 * one rename, nothing a reader follows has changed: a run stopped before
 * it leaves the layout as it was, plus blobs nothing references yet.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "oci/ociwrite.h"


/* ---- operands ------------------------------------------------------------ */

static bool tag_valid(const char *t)
{
	size_t n = strlen(t);

	if (n == 0 || n > 128 || *t == '.' || *t == '-')
		return false;
	for (; *t; t++)
		if (!((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') ||
		      (*t >= '0' && *t <= '9') || *t == '_' || *t == '.' ||
		      *t == '-'))
			return false;
	return true;
}

int hu_ociout_parse(const char *spec, char **dir, char **tag,
		    struct hu_error *e)
{
	const char *rest, *colon;

	if (strncmp(spec, "oci:", 4) != 0)
		return 0;
	rest = spec + 4;
	colon = strrchr(rest, ':');
	if (!colon || colon == rest || !colon[1])
		return hu_error_set(e, 0, spec, "an image output is "
				    "oci:DIR:TAG: the %s is missing",
				    colon == rest ? "directory" : "tag");
	if (!tag_valid(colon + 1))
		return hu_error_set(e, 0, spec, "invalid tag '%s' (letters, "
				    "digits, '_', '.', '-', at most 128, not "
				    "starting with '.' or '-')", colon + 1);
	*dir = strndup(rest, (size_t)(colon - rest));
	*tag = strdup(colon + 1);
	if (!*dir || !*tag) {
		free(*dir);
		free(*tag);
		return hu_error_set(e, ENOMEM, spec, "out of memory");
	}
	return 1;
}

/* ---- the documents -------------------------------------------------------- */

void hu_ociw_host_platform(const char **os, const char **arch,
			   const char **variant)
{
	static const struct { const char *uname, *goarch, *variant; } map[] = {
		{ "x86_64", "amd64", NULL }, { "aarch64", "arm64", "v8" },
		{ "arm64", "arm64", "v8" }, { "armv7l", "arm", "v7" },
		{ "armv6l", "arm", "v6" }, { "i386", "386", NULL },
		{ "i486", "386", NULL }, { "i586", "386", NULL },
		{ "i686", "386", NULL }, { "ppc64le", "ppc64le", NULL },
		{ "ppc64", "ppc64", NULL }, { "s390x", "s390x", NULL },
		{ "riscv64", "riscv64", NULL }, { "mips64", "mips64le", NULL },
		{ "loongarch64", "loong64", NULL },
	};
	static struct utsname u;

	*os = "linux";
	*variant = NULL;
	if (uname(&u) < 0) {
		*arch = "amd64";
		return;
	}
	*arch = u.machine;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(u.machine, map[i].uname)) {
			*arch = map[i].goarch;
			*variant = map[i].variant;
		}
}

static void rfc3339(int64_t t, char buf[32])
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!gmtime_r(&tt, &tm) ||
	    !strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, 32, "1970-01-01T00:00:00Z");
}

static json_t *minimal_config(void)
{
	const char *os, *arch, *variant;
	json_t *c;

	hu_ociw_host_platform(&os, &arch, &variant);
	c = json_pack("{s:s, s:s, s:{}}", "architecture", arch, "os", os,
		      "config");
	if (c && variant)
		json_object_set_new(c, "variant", json_string(variant));
	return c;
}

/* The base config's history without the entries of its layers: its
 * rootfs is replaced, so they would describe layers the image has not.
 * Its empty_layer entries (ENV, CMD...) stay. */
static int base_history(json_t *c, json_t **out, struct hu_error *e,
			const char *name)
{
	json_t *h = json_object_get(c, "history"), *ent, *keep;
	size_t i;

	if (h && !json_is_array(h) && !json_is_null(h))
		return hu_error_set(e, 0, name, "\"history\" is not an array");
	keep = json_array();
	if (!keep)
		return hu_error_set(e, ENOMEM, name, "out of memory");
	json_array_foreach(h, i, ent)
		if (json_is_true(json_object_get(ent, "empty_layer")))
			json_array_append(keep, ent);
	*out = keep;
	return 0;
}

static int config_parse(const char *base, const char *name, json_t **out,
			struct hu_error *e)
{
	if (!base) {
		*out = minimal_config();
		return *out ? 0 : hu_error_set(e, ENOMEM, name,
					       "out of memory");
	}
	*out = oci_json_load(base, strlen(base), NULL, e);
	return *out ? 0 : oci_error_in(e, name);
}

/* Fill what an image config must have and @c may lack. */
static void config_platform(json_t *c)
{
	const char *os, *arch, *variant;

	hu_ociw_host_platform(&os, &arch, &variant);
	if (!json_is_string(json_object_get(c, "os")))
		json_object_set_new(c, "os", json_string(os));
	if (!json_is_string(json_object_get(c, "architecture"))) {
		json_object_set_new(c, "architecture", json_string(arch));
		if (variant)
			json_object_set_new(c, "variant",
					    json_string(variant));
	}
}

int hu_ociw_config_json(const char *base, const char *base_name,
			const struct hu_ociw_layer *layers, size_t n,
			int64_t created, char **out, struct hu_error *e)
{
	const char *name = base_name ? base_name : "config";
	json_t *c, *hist = NULL, *ids = json_array();
	const char *author;
	char when[32];
	int rc = -1;

	rfc3339(created, when);
	if (!ids)
		return hu_error_set(e, ENOMEM, name, "out of memory");
	if (config_parse(base, name, &c, e) < 0) {
		json_decref(ids);
		return -1;
	}
	if (base_history(c, &hist, e, name) < 0)
		goto out;
	/* the entries written are the image's author's, as umoci says */
	author = json_string_value(json_object_get(c, "author"));
	for (size_t i = 0; i < n; i++) {
		json_t *h = json_pack("{s:s, s:s, s:s*}", "created", when,
				      "created_by", layers[i].created_by ?
				      layers[i].created_by : "hunion",
				      "author", author);

		if (!h || json_array_append_new(hist, h) < 0 ||
		    json_array_append_new(ids, json_string(
					  layers[i].diff_id)) < 0) {
			hu_error_set(e, ENOMEM, name, "out of memory");
			goto out;
		}
	}
	config_platform(c);
	json_object_set_new(c, "created", json_string(when));
	json_object_set_new(c, "history", hist);
	hist = NULL;
	json_object_set_new(c, "rootfs", json_pack("{s:s, s:O}", "type",
						   "layers", "diff_ids", ids));
	*out = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
	rc = *out ? 0 : hu_error_set(e, ENOMEM, name, "out of memory");
out:
	json_decref(hist);
	json_decref(ids);
	json_decref(c);
	return rc;
}

int hu_ociw_manifest_json(const char *config_digest, uint64_t config_size,
			  const struct hu_ociw_layer *layers, size_t n,
			  char **out, struct hu_error *e)
{
	json_t *ls = json_array(), *m;

	for (size_t i = 0; ls && i < n; i++)
		if (json_array_append_new(ls, json_pack(
			"{s:s, s:s, s:I}", "mediaType", layers[i].media_type,
			"digest", layers[i].digest, "size",
			(json_int_t)layers[i].size)) < 0) {
			json_decref(ls);
			ls = NULL;
		}
	m = ls ? json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:o}",
			   "schemaVersion", 2, "mediaType", HU_OCI_MT_MANIFEST,
			   "config", "mediaType", HU_OCI_MT_CONFIG, "digest",
			   config_digest, "size", (json_int_t)config_size,
			   "layers", ls) : NULL;
	*out = m ? json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(m);
	return *out ? 0 : hu_error_set(e, ENOMEM, NULL, "out of memory");
}

/* ---- the image ------------------------------------------------------------ */

/* The layout @dir, or where it will be made, may not lie inside a layer
 * read: writing it would change the view being written. */
static int check_outside(const char *dir, const struct hu_stack *s,
			 struct hu_error *e)
{
	char *copy;
	int fd, rc;

	if (!s)
		return 0;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		copy = strdup(dir);
		if (!copy)
			return hu_error_set(e, ENOMEM, dir, "out of memory");
		fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		free(copy);
	}
	if (fd < 0)
		return 0;	/* the layout's open says why */
	rc = hu_check_outside_layers(fd, s->layers, s->n, dir, e);
	close(fd);
	return rc;
}

int hu_ociout_open(struct hu_ociout **wp, const char *dir,
		   const struct hu_ociout_opts *o, struct hu_error *e)
{
	struct hu_ociout *w;

	if (check_outside(dir, o->stack, e) < 0)
		return -1;
	w = calloc(1, sizeof(*w));
	if (!w)
		return hu_error_set(e, ENOMEM, dir, "out of memory");
	if (hu_ociw_layout_open(&w->l, dir, true, LOCK_SH, NULL, NULL,
				e) < 0) {
		free(w);
		return -1;
	}
	w->o = *o;
	w->base_config = o->config;
	w->base_name = o->config_name;
	*wp = w;
	return 0;
}

int hu_ociw_add_layer(struct hu_ociout *w, const char *media_type,
		     const char *digest, const char *diff_id, uint64_t size,
		     const char *created_by, struct hu_error *e)
{
	struct hu_ociw_layer *ly;

	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 4;
		void *p = realloc(w->layers, cap * sizeof(*w->layers));

		if (!p)
			return hu_error_set(e, ENOMEM, w->l.path,
					    "out of memory");
		w->layers = p;
		w->cap = cap;
	}
	ly = &w->layers[w->n];
	*ly = (struct hu_ociw_layer){ .size = size };
	snprintf(ly->media_type, sizeof(ly->media_type), "%s", media_type);
	snprintf(ly->digest, sizeof(ly->digest), "%s", digest);
	snprintf(ly->diff_id, sizeof(ly->diff_id), "%s", diff_id);
	if (created_by && !(ly->created_by = strdup(created_by)))
		return hu_error_set(e, ENOMEM, w->l.path, "out of memory");
	w->n++;
	return 0;
}

int hu_ociout_layer(struct hu_ociout *w, const struct hu_tarout_opts *to,
		    int (*fill)(void *ctx, struct hu_tarout *t,
				struct hu_error *e),
		    void *ctx, const char *created_by, struct hu_digests *d,
		    struct hu_error *e)
{
	struct hu_ociw_blob b;
	struct hu_tarout *t;

	if (hu_interrupt_check(e) < 0 || hu_ociw_blob_begin(&w->l, &b, e) < 0)
		return -1;
	if (hu_tarout_open(&t, b.fd, to, e) < 0)
		goto fail;
	if (fill(ctx, t, e) < 0) {
		hu_tarout_abort(t);
		goto fail;
	}
	if (hu_tarout_close(t, d, e) < 0)
		goto fail;
	if (hu_ociw_blob_commit(&w->l, &b, d->digest, d->size, e) < 0)
		return -1;
	if (!created_by)
		created_by = w->o.history ? w->o.history : w->o.command;
	return hu_ociw_add_layer(w, d->media_type, d->digest, d->diff_id, d->size,
			 created_by, e);
fail:
	if (!e->path)	/* the stream's error: name the blob it wrote */
		hu_error_setat(e, e->err, w->l.path, "blobs/sha256",
			       "writing %s: %s", b.tmp, e->msg);
	hu_ociw_blob_abort(&w->l, &b);
	return -1;
}

int hu_ociout_commit(struct hu_ociout *w, const char *tag,
		     struct hu_oci_desc *manifest, struct hu_error *e)
{
	char *config = NULL, *man = NULL, cdigest[72], mdigest[72];
	struct hu_ociw_index ix = { .j = NULL };
	struct oci_platform p;
	json_t *desc = NULL;
	bool has;
	int64_t created = w->o.created_set ? w->o.created : time(NULL);
	int rc = -1;

	/* The last moment a stop leaves the tags as they were. */
	if (hu_interrupt_check(e) < 0)
		return -1;
	if (hu_ociw_config_json(w->base_config, w->base_name, w->layers, w->n,
				created, &config, e) < 0 ||
	    hu_ociw_blob_put(&w->l, config, strlen(config), cdigest, e) < 0 ||
	    hu_ociw_manifest_json(cdigest, strlen(config), w->layers, w->n,
				  &man, e) < 0 ||
	    hu_ociw_blob_put(&w->l, man, strlen(man), mdigest, e) < 0)
		goto out;
	/* the index entry's platform: the config's, read as a reader
	 * reads it */
	if (oci_config_platform(config, strlen(config), "config", &p, &has,
				e) < 0)
		goto out;
	desc = json_pack("{s:s, s:s, s:I, s:{s:s*, s:s*, s:s*}}", "mediaType",
			 HU_OCI_MT_MANIFEST, "digest", mdigest, "size",
			 (json_int_t)strlen(man), "platform", "architecture",
			 *p.arch ? p.arch : NULL, "os", *p.os ? p.os : NULL,
			 "variant", *p.variant ? p.variant : NULL);
	if (!desc) {
		hu_error_set(e, ENOMEM, w->l.path, "out of memory");
		goto out;
	}
	if (hu_interrupt_check(e) < 0 || hu_ociw_index_lock(&w->l, e) < 0)
		goto out;
	/* Read afresh under the lock: another writer's tag is kept. */
	if (hu_ociw_index_read(&w->l, OCI_INDEX_KEEP_UNREADABLE, &ix,
			       e) == 0) {
		rc = hu_ociw_index_set_tag(&ix, tag, desc, e);
		desc = NULL;
		if (rc == 0)
			rc = hu_ociw_index_write(&w->l, &ix, e);
	}
	hu_ociw_index_unlock(&w->l);
	if (rc == 0) {
		*manifest = (struct hu_oci_desc){ .size = strlen(man) };
		snprintf(manifest->media_type, sizeof(manifest->media_type),
			 "%s", HU_OCI_MT_MANIFEST);
		snprintf(manifest->digest, sizeof(manifest->digest), "%s",
			 mdigest);
		w->committed = true;
	}
out:
	json_decref(desc);
	hu_ociw_index_free(&ix);
	free(config);
	free(man);
	return rc;
}

void hu_ociout_close(struct hu_ociout *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++)
		free(w->layers[i].created_by);
	free(w->layers);
	if (w->committed) {
		hu_ociw_layout_tidy(&w->l);
		hu_ociw_layout_close(&w->l);
	}
	else	/* a layout this run made goes again */
		hu_ociw_layout_discard(&w->l);
	free(w);
}
