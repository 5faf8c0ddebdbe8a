/* SPDX-License-Identifier: MIT */
/*
 * index.json of a layout we write: read, a tag pointed at a new manifest
 * or removed, replaced whole.  A tag moved or removed takes its entry
 * with it: the image it named leaves the index (and `oci gc` frees its
 * blobs) unless another entry holds it, one of another tag or an
 * untagged one someone else wrote, as umoci and skopeo replace a tag.  A writer takes the index lock (ociwrite.h), reads the
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
	char *path;
	int rc;

	if (asprintf(&path, "%s/blobs", l->path) < 0)
		return hu_error_set(e, ENOMEM, l->path, "out of memory");
	rc = hu_ociw_lock_wait(l->blobs_fd, LOCK_EX, path, NULL, NULL, e);
	free(path);
	return rc;
}

void hu_ociw_index_unlock(struct hu_ociw_layout *l)
{
	(void)flock(l->blobs_fd, LOCK_UN);
}

void hu_ociw_index_free(struct hu_ociw_index *ix)
{
	oci_index_free(&ix->x);
	json_decref(ix->j);
	ix->j = NULL;
}

int hu_ociw_index_parse(const char *buf, size_t len, const char *path,
			unsigned flags, struct hu_ociw_index *ix,
			struct hu_error *e)
{
	json_t *m;

	memset(ix, 0, sizeof(*ix));
	ix->j = oci_json_load(buf, len, "index.json", e);
	if (!ix->j)
		return oci_error_in(e, path);
	m = json_object_get(ix->j, "manifests");
	/* `umoci init` writes an index with none: no images */
	if ((!m || json_is_null(m)) &&
	    json_object_set_new(ix->j, "manifests", json_array()) < 0) {
		hu_ociw_index_free(ix);
		return hu_error_set(e, ENOMEM, path, "out of memory");
	}
	if (oci_index_entries(ix->j, "index.json", flags, &ix->x, e) < 0) {
		hu_ociw_index_free(ix);
		return oci_error_in(e, path);
	}
	return 0;
}

int hu_ociw_index_read(const struct hu_ociw_layout *l, unsigned flags,
		       struct hu_ociw_index *ix, struct hu_error *e)
{
	char *buf;
	size_t len;
	int rc;

	memset(ix, 0, sizeof(*ix));
	if (oci_file_read(l->dirfd, l->path, "index.json", &buf, &len, e) < 0)
		return -1;
	rc = hu_ociw_index_parse(buf, len, l->path, flags, ix, e);
	free(buf);
	return rc;
}

/* The entries parsed again, after a change of the array. */
static int reparse(struct hu_ociw_index *ix, struct hu_error *e)
{
	struct oci_index x;

	if (oci_index_entries(ix->j, "index.json", OCI_INDEX_KEEP_UNREADABLE,
			      &x, e) < 0)
		return -1;
	oci_index_free(&ix->x);
	ix->x = x;
	return 0;
}

/* Remove the entries tagged @tag: their number. */
static size_t remove_tag(struct hu_ociw_index *ix, const char *tag)
{
	json_t *m = json_object_get(ix->j, "manifests");
	size_t n = 0;

	/* the parsed entries stand at the indexes of the array's */
	for (size_t i = ix->x.n; i-- > 0;) {
		const struct oci_entry *en = &ix->x.v[i];

		if (en->tag && strcmp(en->tag, tag) == 0) {
			json_array_remove(m, i);
			n++;
		}
	}
	return n;
}

int hu_ociw_index_set_tag(struct hu_ociw_index *ix, const char *tag,
			  json_t *desc, struct hu_error *e)
{
	json_t *m = json_object_get(ix->j, "manifests"), *ann;

	if (!json_is_string(json_object_get(desc, "digest"))) {
		json_decref(desc);
		return hu_error_set(e, EINVAL, "index.json", "a descriptor "
				    "without digest");
	}
	(void)remove_tag(ix, tag);
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
	/* the entries again, ours with them */
	return reparse(ix, e);
}

int hu_ociw_index_rm_tag(struct hu_ociw_index *ix, const char *tag,
			 struct hu_error *e)
{
	if (remove_tag(ix, tag) == 0)
		return hu_error_set(e, 0, NULL, "no image tagged %s", tag);
	return reparse(ix, e);
}

int hu_ociw_index_write(struct hu_ociw_layout *l,
			const struct hu_ociw_index *ix, struct hu_error *e)
{
	char *text = json_dumps(ix->j, JSON_COMPACT);
	int rc;

	if (!text)
		return hu_error_set(e, ENOMEM, l->path, "out of memory");
	rc = hu_ociw_replace_file(l->dirfd, "index.json", text, false,
				  l->path, e);
	free(text);
	return rc;
}

/* ---- oci rm -------------------------------------------------------------- */

int hu_oci_rm(const char *dir, const char *tag, bool dry_run,
	      struct hu_error *e)
{
	struct hu_ociw_layout l;
	struct hu_ociw_index ix = { .j = NULL };
	int rc = -1;

	if (!oci_tag_valid(tag))
		return hu_error_set(e, 0, dir, "'%.140s' is no tag", tag);
	/* a writer: gc waits for it, as for any */
	if (hu_ociw_layout_open(&l, dir, false, LOCK_SH, NULL, NULL, e) < 0)
		return -1;
	if (hu_ociw_index_lock(&l, e) < 0)
		goto out;
	if (hu_ociw_index_read(&l, OCI_INDEX_KEEP_UNREADABLE, &ix, e) == 0 &&
	    hu_ociw_index_rm_tag(&ix, tag, e) == 0)
		rc = dry_run ? 0 : hu_ociw_index_write(&l, &ix, e);
	if (rc < 0)
		oci_error_in(e, dir);
	hu_ociw_index_unlock(&l);
out:
	hu_ociw_index_free(&ix);
	hu_ociw_layout_close(&l);
	return rc;
}

/* ---- oci ls -------------------------------------------------------------- */

/* The platform of @en: its descriptor's, or its config's for a
 * manifest. */
static int entry_platform(const struct hu_ociw_layout *l,
			  const struct oci_entry *en, struct oci_platform *p,
			  bool *has, struct hu_error *e)
{
	const struct oci_media_type *mt = oci_media_type(en->desc.media_type);
	struct oci_manifest m;
	char *buf, what[96];
	size_t len;
	int rc;

	*p = en->platform;
	*has = en->has_platform;
	if (*has || en->unreadable || !mt || mt->kind != OCI_KIND_MANIFEST)
		return 0;
	if (oci_doc_read(l->dirfd, l->path, &en->desc, &buf, &len, e) < 0)
		return -1;
	snprintf(what, sizeof(what), "manifest %s", en->desc.digest);
	rc = oci_manifest_descs(buf, len, what, &m, e);
	free(buf);
	if (rc < 0)
		return oci_error_in(e, l->path);
	rc = oci_doc_read(l->dirfd, l->path, &m.config, &buf, &len, e);
	if (rc == 0) {
		snprintf(what, sizeof(what), "config %s", m.config.digest);
		rc = oci_config_platform(buf, len, what, p, has, e);
		free(buf);
		if (rc < 0)
			oci_error_in(e, l->path);
	}
	oci_manifest_free(&m);
	return rc;
}

static const char *or_null(const char *s)
{
	return *s ? s : NULL;
}

int hu_oci_list(const char *dir,
		int (*fn)(void *ctx, const struct hu_oci_entry *en,
			  struct hu_error *e),
		void *ctx, struct hu_error *e)
{
	struct hu_ociw_layout l;
	struct hu_ociw_index ix;
	int rc = 0;

	if (hu_ociw_layout_open(&l, dir, false, 0, NULL, NULL, e) < 0)
		return -1;
	if (hu_ociw_index_read(&l, OCI_INDEX_KEEP_UNREADABLE, &ix, e) < 0) {
		hu_ociw_layout_close(&l);
		return -1;
	}
	for (size_t i = 0; i < ix.x.n && rc == 0; i++) {
		const struct oci_entry *x = &ix.x.v[i];
		struct oci_platform p;
		bool has;
		struct hu_oci_entry en = {
			.tag = x->tag,
			.digest = x->unreadable ? NULL : x->desc.digest,
			.media_type = x->unreadable ? NULL :
				      x->desc.media_type,
			.size = x->desc.size,
		};

		rc = entry_platform(&l, x, &p, &has, e);
		if (rc == 0 && has) {
			en.os = p.os;
			en.arch = p.arch;
			en.variant = or_null(p.variant);
		}
		if (rc == 0)
			rc = fn(ctx, &en, e);
	}
	hu_ociw_index_free(&ix);
	hu_ociw_layout_close(&l);
	return rc;
}
