/* SPDX-License-Identifier: MIT */
/*
 * oci gc: remove the blobs of a layout that no image references.  The
 * images are the entries of index.json, walked through image indexes
 * (OCI and Docker lists) and manifests to their configs and layers.  gc
 * holds the layout's gc lock exclusive (ociwrite.h), so it waits for the
 * running hunion writers and none starts before it is done: no blob a
 * writer has written but not yet referenced in index.json is taken, and
 * the temporaries in the layout are killed writers' leftovers, removed
 * too.  Each document is read and parsed as the image reader reads it
 * (blob.c, parse.c).  An entry of an index whose type hunion does not
 * know (an artifact manifest, a type yet to come) is read as JSON too,
 * and every descriptor in it is kept.  A manifest, index or entry that
 * cannot be read (missing, corrupt, not JSON, a cycle deeper than any
 * real image) stops gc before it removes anything: what it references
 * is not known.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "oci/ociwrite.h"

/* Deeper than any image: an index of indexes of manifests is 3. */
#define GC_MAX_DEPTH 16

struct gc {
	struct hu_ociw_layout l;
	char (*marked)[65];	/* the hex of the referenced digests, sorted */
	size_t n, cap;
};

/* Where @hex is or would go in the sorted marks. */
static size_t mark_pos(const struct gc *g, const char *hex, bool *found)
{
	size_t lo = 0, hi = g->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(g->marked[mid], hex);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

/* Mark @digest (a valid one: parse.c checked it): 1 when it was new, 0
 * when marked already. */
static int mark(struct gc *g, const char *digest, struct hu_error *e)
{
	bool found;
	size_t at = mark_pos(g, digest + 7, &found);

	if (found)
		return 0;
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 64;
		void *p = realloc(g->marked, cap * sizeof(*g->marked));

		if (!p)
			return hu_error_set(e, ENOMEM, g->l.path,
					    "out of memory");
		g->marked = p;
		g->cap = cap;
	}
	memmove(&g->marked[at + 1], &g->marked[at],
		(g->n - at) * sizeof(*g->marked));
	memcpy(g->marked[at], digest + 7, 65);
	g->n++;
	return 1;
}

/* @doc: an entry of an index, where a document is (a manifest, an index,
 * or one of a type hunion does not know); else a config or a layer. */
static int walk_desc(struct gc *g, const struct hu_oci_desc *d, bool doc,
		     int depth, struct hu_error *e);

static int walk_json(struct gc *g, json_t *v, int depth, struct hu_error *e);

/* The document @digest of @size (a sha512 one: another tool's), read as
 * JSON and every descriptor in it walked. */
static int walk_foreign_doc(struct gc *g, const char *digest, uint64_t size,
			    int depth, struct hu_error *e)
{
	char *buf;
	size_t len;
	json_t *j;
	int rc;

	if (oci_doc_read_digest(g->l.dirfd, g->l.path, digest, size, &buf,
				&len, e) < 0)
		return -1;
	j = oci_json_load(buf, len, digest, e);
	free(buf);
	if (!j)
		return oci_error_in(e, g->l.path);
	rc = walk_json(g, j, depth + 1, e);
	json_decref(j);
	return rc;
}

/* Entry @i of an index that the reader's parser does not take (@o:
 * its JSON; @why: why not).  One without a digest references no blob; a
 * sha512 one (valid per the spec, in blobs/sha512/, which gc leaves
 * alone) is read for what it references; any other stops gc. */
static int walk_unreadable(struct gc *g, json_t *o, size_t i,
			   const char *why, int depth,
			   struct hu_error *e)
{
	json_t *dg = json_object_get(o, "digest");
	json_t *sz = json_object_get(o, "size");

	if (!json_is_object(o) || !dg)
		return 0;
	if (json_is_string(dg) && oci_digest_sha512(json_string_value(dg)) &&
	    json_is_integer(sz) && json_integer_value(sz) >= 0)
		return walk_foreign_doc(g, json_string_value(dg),
					(uint64_t)json_integer_value(sz),
					depth, e);
	return hu_error_set(e, 0, g->l.path, "%s (its entry %zu): what it "
			    "references is not known: refusing to collect",
			    why, i + 1);
}

/* The entries of an index, @x parsed from the JSON @j: each a document
 * walked (those the parser does not take, from their JSON). */
static int walk_index(struct gc *g, json_t *j, const struct oci_index *x,
		      int depth, struct hu_error *e)
{
	json_t *m = json_object_get(j, "manifests");

	for (size_t i = 0; i < x->n; i++) {
		const struct oci_entry *en = &x->v[i];
		int rc = en->unreadable ?
			 walk_unreadable(g, json_array_get(m, i), i,
					 en->why, depth, e) :
			 walk_desc(g, &en->desc, true, depth, e);

		if (rc < 0)
			return -1;
	}
	return 0;
}

static bool is_hex64(const char *s);

/* A descriptor of a document of a type hunion does not know, of a sha512
 * digest: never removed (gc sweeps blobs/sha256/ only), but an index or
 * manifest it names is read for what that references. */
static int walk_json_sha512(struct gc *g, json_t *v, int depth,
			    struct hu_error *e)
{
	const char *dg = json_string_value(json_object_get(v, "digest"));
	const char *mt = json_string_value(json_object_get(v, "mediaType"));
	json_t *sz = json_object_get(v, "size");
	const struct oci_media_type *t = mt ? oci_media_type(mt) : NULL;

	if (!dg || !oci_digest_sha512(dg) || !json_is_integer(sz) ||
	    json_integer_value(sz) < 0 || !t ||
	    (t->kind != OCI_KIND_INDEX && t->kind != OCI_KIND_MANIFEST))
		return 0;
	return walk_foreign_doc(g, dg, (uint64_t)json_integer_value(sz),
				depth, e);
}

/* Every descriptor in JSON value @v of a document of a type hunion does
 * not know: an object with a "digest" string (sha256, as parse.c takes
 * it) and a "size".  Each is kept, and walked if it is a document hunion
 * knows; other objects and arrays are looked into. */
static int walk_json(struct gc *g, json_t *v, int depth, struct hu_error *e)
{
	json_t *dg, *sz, *mt, *x;
	const char *key;
	size_t i;

	if (depth > GC_MAX_DEPTH)
		return hu_error_set(e, 0, g->l.path, "a document nested "
				    "deeper than %d: refusing to collect",
				    GC_MAX_DEPTH);
	if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if (walk_json(g, x, depth + 1, e) < 0)
				return -1;
		return 0;
	}
	if (!json_is_object(v))
		return 0;
	dg = json_object_get(v, "digest");
	sz = json_object_get(v, "size");
	mt = json_object_get(v, "mediaType");
	if (json_is_string(dg) && json_is_integer(sz) &&
	    json_integer_value(sz) >= 0 &&
	    strncmp(json_string_value(dg), "sha256:", 7) == 0 &&
	    is_hex64(json_string_value(dg) + 7)) {
		struct hu_oci_desc d = { .size = json_integer_value(sz) };

		snprintf(d.digest, sizeof(d.digest), "%s",
			 json_string_value(dg));
		if (json_is_string(mt))
			snprintf(d.media_type, sizeof(d.media_type), "%s",
				 json_string_value(mt));
		if (walk_desc(g, &d, false, depth + 1, e) < 0)
			return -1;
	} else if (walk_json_sha512(g, v, depth, e) < 0) {
		return -1;
	}
	json_object_foreach(v, key, x)
		if (walk_json(g, x, depth + 1, e) < 0)
			return -1;
	return 0;
}

/* Entry @d of an index, of a type hunion does not know. */
static int walk_unknown(struct gc *g, const struct hu_oci_desc *d, int depth,
			struct hu_error *e)
{
	char *buf, what[256];
	size_t len;
	json_t *j;
	int rc;

	if (oci_doc_read(g->l.dirfd, g->l.path, d, &buf, &len, e) < 0)
		return -1;
	snprintf(what, sizeof(what), "%s of type %s", d->digest,
		 d->media_type);
	j = oci_json_load(buf, len, what, e);
	free(buf);
	if (!j)
		return hu_error_set(e, 0, g->l.path, "%s: what it references "
				    "is not known: refusing to collect",
				    e->msg);
	rc = walk_json(g, j, depth + 1, e);
	json_decref(j);
	return rc;
}

/* What the document @d references: an index's entries, a manifest's
 * config and layers, read as the image reader reads them. */
/* The index @what in @buf: its entries walked. */
static int walk_index_doc(struct gc *g, const char *buf, size_t len,
			  const char *what, int depth, struct hu_error *e)
{
	json_t *j = oci_json_load(buf, len, what, e);
	struct oci_index x;
	int rc;

	if (!j || oci_index_entries(j, what, OCI_INDEX_KEEP_UNREADABLE, &x,
				    e) < 0) {
		json_decref(j);
		return oci_error_in(e, g->l.path);
	}
	rc = walk_index(g, j, &x, depth, e);
	oci_index_free(&x);
	json_decref(j);
	return rc;
}

static int walk_doc(struct gc *g, const struct hu_oci_desc *d, bool index,
		    int depth, struct hu_error *e)
{
	struct oci_manifest m;
	char *buf, what[96];
	size_t len;
	int rc;

	if (depth > GC_MAX_DEPTH)
		return hu_error_set(e, 0, g->l.path, "%s: indexes nested "
				    "deeper than %d: refusing to collect",
				    d->digest, GC_MAX_DEPTH);
	if (oci_doc_read(g->l.dirfd, g->l.path, d, &buf, &len, e) < 0)
		return -1;
	snprintf(what, sizeof(what), "%s %s", index ? "index" : "manifest",
		 d->digest);
	if (index) {
		rc = walk_index_doc(g, buf, len, what, depth + 1, e);
		free(buf);
		return rc;
	}
	rc = oci_manifest_descs(buf, len, what, &m, e);
	free(buf);
	if (rc < 0)
		return oci_error_in(e, g->l.path);
	rc = walk_desc(g, &m.config, false, depth + 1, e);
	for (size_t i = 0; i < m.nlayers && rc == 0; i++)
		rc = walk_desc(g, &m.layers[i], false, depth + 1, e);
	oci_manifest_free(&m);
	return rc;
}

static int walk_desc(struct gc *g, const struct hu_oci_desc *d, bool doc,
		     int depth, struct hu_error *e)
{
	const struct oci_media_type *mt = oci_media_type(d->media_type);
	int rc = mark(g, d->digest, e);

	/* mark()'s 1 (newly marked) must not reach the caller's loop, which
	 * stops at any non-zero: a blob of a type we do not know (an
	 * artifact's config) would end the walk and leave the layers after
	 * it unmarked, to be removed while still in use. */
	if (rc < 0)
		return -1;
	if (rc == 0 || (!mt && !doc))
		return 0;
	if (!mt)
		return walk_unknown(g, d, depth, e);
	if (mt->kind == OCI_KIND_INDEX || mt->kind == OCI_KIND_MANIFEST)
		return walk_doc(g, d, mt->kind == OCI_KIND_INDEX, depth, e);
	return 0;
}

static bool is_hex64(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!((s[n] >= '0' && s[n] <= '9') ||
		      (s[n] >= 'a' && s[n] <= 'f')))
			return false;
	return n == 64;
}

struct sweep {
	struct gc *g;
	const struct hu_oci_gc_opts *o;
	struct hu_oci_gc_stats *st;
};

/* @name of @dirfd (@dir) cannot be removed: told, counted, and gc goes
 * on with the others (it fails at the end). */
static int sweep_failed(struct sweep *sw, int err, const char *dir,
			const char *name, struct hu_error *e)
{
	struct hu_error why = { 0 };

	if (!sw->o->failed)
		return hu_error_setat(e, err, dir, name, "cannot remove");
	hu_error_setat(&why, err, dir, name, "cannot remove");
	sw->o->failed(sw->o->ctx, &why);
	hu_error_clear(&why);
	sw->st->failed++;
	return 0;
}

/* Remove @name of @dirfd, the directory @prefix of the layout (@dir),
 * and tell of it once it is gone. */
static int sweep_one(struct sweep *sw, int dirfd, const char *dir,
		     const char *prefix, const char *name, struct hu_error *e)
{
	struct stat st;
	uint64_t size = 0;
	char *rel;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode))
		size = (uint64_t)st.st_size;
	if (!sw->o->dry_run && hu_wr_unlinkat(dirfd, name, 0) < 0) {
		if (errno == ENOENT)	/* gone meanwhile: not by us */
			return 0;
		return sweep_failed(sw, errno, dir, name, e);
	}
	if (asprintf(&rel, "%s%s%s", prefix, *prefix ? "/" : "", name) < 0)
		return hu_error_set(e, ENOMEM, dir, "out of memory");
	if (sw->o->removed)
		sw->o->removed(sw->o->ctx, rel, size);
	free(rel);
	sw->st->removed++;
	sw->st->bytes_removed += size;
	return 0;
}

/* What a writer moved aside to remove after its work (aside.c): removed
 * when its mover died (its lock free), else its mover's. */
static int sweep_aside(struct sweep *sw, int dirfd, const char *dir,
		       const char *prefix, const char *name,
		       struct hu_error *e)
{
	int fd = hu_aside_locked(dirfd, name), rc;

	if (fd < 0)
		return 0;
	rc = sweep_one(sw, dirfd, dir, prefix, name, e);
	close(fd);
	return rc;
}

static int sweep_dir(struct sweep *sw, int dirfd, const char *prefix,
		     bool blobs, struct hu_error *e)
{
	struct hu_names names;
	char *dir;
	int rc = 0;

	if (asprintf(&dir, "%s%s%s", sw->g->l.path, *prefix ? "/" : "",
		     prefix) < 0)
		return hu_error_set(e, ENOMEM, sw->g->l.path, "out of memory");
	if (hu_names_read(dirfd, &names, dir, e) < 0) {
		free(dir);
		return -1;
	}
	for (size_t i = 0; i < names.n && rc == 0; i++) {
		const char *name = names.v[i].name;
		bool found = false;

		if (!strncmp(name, HU_OCIW_TMP, strlen(HU_OCIW_TMP)))
			rc = sweep_one(sw, dirfd, dir, prefix, name, e);
		else if (hu_is_aside_name(name))
			rc = sweep_aside(sw, dirfd, dir, prefix, name, e);
		else if (blobs && is_hex64(name)) {
			mark_pos(sw->g, name, &found);
			if (found)
				sw->st->kept++;
			else
				rc = sweep_one(sw, dirfd, dir, prefix, name,
					       e);
		}
	}
	hu_names_free(&names);
	if (rc == 0 && !sw->o->dry_run && sw->st->removed &&
	    hu_wr_fsync(dirfd) < 0)
		rc = hu_error_set(e, errno, dir, "cannot sync");
	free(dir);
	return rc;
}

int hu_oci_gc(const char *dir, const struct hu_oci_gc_opts *o,
	      struct hu_oci_gc_stats *st, struct hu_error *e)
{
	struct gc g = { .n = 0 };
	struct sweep sw = { .g = &g, .o = o, .st = st };
	struct hu_ociw_index ix = { .j = NULL };
	int rc = -1;

	*st = (struct hu_oci_gc_stats){ .kept = 0 };
	if (hu_ociw_layout_open(&g.l, dir, false, LOCK_EX, o->waiting, o->ctx,
				e) < 0)
		return -1;
	/* The index lock too: a writer of another tool's making that
	 * takes it (or hunion without the gc lock) changes nothing under
	 * us. */
	if (hu_ociw_index_lock(&g.l, e) < 0)
		goto out;
	/* every entry read, or nothing collected */
	if (hu_ociw_index_read(&g.l, OCI_INDEX_KEEP_UNREADABLE, &ix, e) == 0 &&
	    walk_index(&g, ix.j, &ix.x, 0, e) == 0 &&
	    sweep_dir(&sw, g.l.sha_fd, "blobs/sha256", true, e) == 0 &&
	    sweep_dir(&sw, g.l.dirfd, "", false, e) == 0)
		rc = st->failed ? hu_error_set(e, 0, dir, "%llu of %llu "
					       "files not removed",
					       (unsigned long long)st->failed,
					       (unsigned long long)
					       (st->failed + st->removed)) : 0;
	hu_ociw_index_unlock(&g.l);
out:
	hu_ociw_index_free(&ix);
	free(g.marked);
	hu_ociw_layout_close(&g.l);
	return rc;
}
