/* SPDX-License-Identifier: MIT */
/*
 * index.json of a layout we write: read, a tag pointed at a new manifest,
 * replaced whole.  A writer takes the index lock (ociwrite.h), reads the
 * index afresh, changes it and replaces it (temporary, fsync, rename,
 * directory fsync) before it lets go, so two writers never lose each
 * other's tags (the race containers/image#1028 has), and a reader sees
 * the old index or the new one.  And `oci ls`: the images of an index.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "internal.h"
#include "oci/ociwrite.h"

int hu_ociw_index_lock(struct hu_ociw_layout *l, struct hu_error *e)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/blobs", l->path);
	return hu_ociw_lock_wait(l->blobs_fd, LOCK_EX, path, NULL, NULL, e);
}

void hu_ociw_index_unlock(struct hu_ociw_layout *l)
{
	(void)flock(l->blobs_fd, LOCK_UN);
}

int hu_ociw_index_read(const struct hu_ociw_layout *l, json_t **out,
		       struct hu_error *e)
{
	json_t *j, *m;

	if (hu_ociw_read_json(l->dirfd, "index.json", l->path, &j, e) < 0)
		return -1;
	m = json_object_get(j, "manifests");
	/* `umoci init` writes an index with none: no images */
	if ((!m || json_is_null(m)) &&
	    json_object_set_new(j, "manifests", json_array()) < 0) {
		json_decref(j);
		return hu_error_set(e, ENOMEM, l->path, "out of memory");
	}
	if (!json_is_array(json_object_get(j, "manifests"))) {
		json_decref(j);
		return hu_error_setat(e, 0, l->path, "index.json", "no "
				      "\"manifests\" array");
	}
	*out = j;
	return 0;
}

static const char *entry_tag(json_t *ent)
{
	json_t *ann = json_object_get(ent, "annotations");

	return json_string_value(json_object_get(ann, HU_OCI_REF_NAME));
}

/* Take @tag from @ent, and its annotations when that was the last. */
static void drop_tag(json_t *ent)
{
	json_t *ann = json_object_get(ent, "annotations");

	json_object_del(ann, HU_OCI_REF_NAME);
	if (json_object_size(ann) == 0)
		json_object_del(ent, "annotations");
}

int hu_ociw_index_set_tag(json_t *index, const char *tag, json_t *desc,
			  struct hu_error *e)
{
	json_t *m = json_object_get(index, "manifests"), *ann;
	const char *digest = json_string_value(json_object_get(desc,
							       "digest"));

	if (!json_is_array(m) || !digest) {
		json_decref(desc);
		return hu_error_set(e, EINVAL, "index.json", "no \"manifests\" "
				    "array, or a descriptor without digest");
	}
	for (size_t i = json_array_size(m); i-- > 0;) {
		json_t *ent = json_array_get(m, i);
		const char *t = entry_tag(ent), *d;

		if (t && strcmp(t, tag) == 0)
			drop_tag(ent);
		d = json_string_value(json_object_get(ent, "digest"));
		if (!entry_tag(ent) && d && strcmp(d, digest) == 0)
			json_array_remove(m, i);
	}
	ann = json_object_get(desc, "annotations");
	if (!ann && json_object_set_new(desc, "annotations",
					ann = json_object()) < 0)
		ann = NULL;
	if (!ann || json_object_set_new(ann, HU_OCI_REF_NAME,
					json_string(tag)) < 0 ||
	    json_array_append_new(m, desc) < 0) {
		json_decref(desc);
		return hu_error_set(e, ENOMEM, "index.json", "out of memory");
	}
	return 0;
}

int hu_ociw_index_write(struct hu_ociw_layout *l, json_t *index,
			struct hu_error *e)
{
	char *text = json_dumps(index, JSON_COMPACT);
	int rc;

	if (!text)
		return hu_error_set(e, ENOMEM, l->path, "out of memory");
	rc = hu_ociw_replace_file(l->dirfd, "index.json", text, false,
				  l->path, e);
	free(text);
	return rc;
}

/* ---- oci ls -------------------------------------------------------------- */

static bool is_manifest(const char *mt)
{
	return mt && (!strcmp(mt, HU_OCI_MT_MANIFEST) ||
		      !strcmp(mt, HU_DOCKER_MT_MANIFEST));
}

/* The platform of @ent: its descriptor's, or its config's for a manifest.
 * @held keeps the config read alive for the caller. */
static int entry_platform(const struct hu_ociw_layout *l, json_t *ent,
			  struct hu_oci_entry *en, json_t **held,
			  struct hu_error *e)
{
	json_t *p = json_object_get(ent, "platform"), *man, *cfg;
	const char *cd;
	int rc;

	if (!p && is_manifest(en->media_type) && en->digest) {
		if (hu_ociw_blob_json(l, en->digest, &man, e) < 0)
			return -1;
		cd = json_string_value(json_object_get(
			json_object_get(man, "config"), "digest"));
		rc = cd ? hu_ociw_blob_json(l, cd, &cfg, e) : 0;
		json_decref(man);
		if (rc < 0 || !cd)
			return rc;
		*held = p = cfg;
	}
	en->os = json_string_value(json_object_get(p, "os"));
	en->arch = json_string_value(json_object_get(p, "architecture"));
	en->variant = json_string_value(json_object_get(p, "variant"));
	return 0;
}

int hu_oci_list(const char *dir,
		int (*fn)(void *ctx, const struct hu_oci_entry *en,
			  struct hu_error *e),
		void *ctx, struct hu_error *e)
{
	struct hu_ociw_layout l;
	json_t *index, *ent;
	size_t i;
	int rc = 0;

	if (hu_ociw_layout_open(&l, dir, false, 0, NULL, NULL, e) < 0)
		return -1;
	if (hu_ociw_index_read(&l, &index, e) < 0) {
		hu_ociw_layout_close(&l);
		return -1;
	}
	json_array_foreach(json_object_get(index, "manifests"), i, ent) {
		json_t *held = NULL;
		struct hu_oci_entry en = {
			.tag = entry_tag(ent),
			.digest = json_string_value(json_object_get(ent,
								    "digest")),
			.media_type = json_string_value(
				json_object_get(ent, "mediaType")),
			.size = (uint64_t)json_integer_value(
				json_object_get(ent, "size")),
		};

		rc = entry_platform(&l, ent, &en, &held, e);
		if (rc == 0)
			rc = fn(ctx, &en, e);
		json_decref(held);
		if (rc < 0)
			break;
	}
	json_decref(index);
	hu_ociw_layout_close(&l);
	return rc;
}
