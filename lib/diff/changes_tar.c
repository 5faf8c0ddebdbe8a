/* SPDX-License-Identifier: MIT */
/*
 * The change set as an OCI layer (diff --oci, flatten --base): the walk of
 * changes.c, every directory's deletions first, written as
 *   - one whiteout .wh.NAME per deleted name, none below it;
 *   - every added or modified entry in full (the contents of an added
 *     directory too, a directory before its contents), a later name of an
 *     inode written as a hard link to the first;
 *   - a name left out as unchanged (--exact, --trees) whose inode is
 *     written under another name, as a hard link to it: where it comes
 *     later, in its place, else at the end of the layer;
 *   - an opaque directory: by default whiteouts of the old names it no
 *     longer shows, as for any directory; with opaque markers its
 *     .wh..wh..opq right after its own entry, then its whole contents.
 * Sockets cannot be archived: each is skipped with a warning.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diff/changes.h"
#include "common/linkmap.h"

/* A name left out as unchanged whose inode has other names. */
struct kept {
	struct stat st;
	char *path;
};

struct tarsink {
	const struct hu_stack *s;
	const struct hu_report *report;
	struct hu_tarout *t;
	bool markers;
	struct hu_linkmap links;
	struct kept *kept;		/* in walk order */
	size_t nkept, capkept;
};

/* Errors of the source name the entry in its layer; errors of the output
 * stream have no path (the caller names its output). */
static int tfail(const struct tarsink *k, const struct hu_change *c,
		 struct hu_error *e)
{
	if (e->path && c->ent)
		hu_error_prefix(e, k->s->layers[c->ent->layer].path);
	return -1;
}

static int whiteout(struct tarsink *k, const char *path, struct hu_error *e)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int rc;

	if (!slash)
		return hu_tarout_whiteout(k->t, "", path, e);
	dir = strndup(path, slash - path);
	if (!dir)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	rc = hu_tarout_whiteout(k->t, dir, slash + 1, e);
	free(dir);
	return rc;
}

/* A later name of an inode already written: a hard link (linkmap.c).
 * *@done then; else the first name is remembered. */
static int link_again(struct tarsink *k, const struct hu_change *c,
		      bool *done, struct hu_error *e)
{
	const struct stat *st = &c->ent->st;
	const char *first;

	*done = false;
	if (hu_linkmap_first(&k->links, st, NULL, c->path, &first) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (!first)
		return 0;
	*done = true;
	return hu_tarout_hardlink(k->t, c->path, first, st, e);
}

static int entry(struct tarsink *k, const struct hu_change *c,
		 struct hu_error *e)
{
	const struct hu_ventry *ent = c->ent;
	bool linked;

	if (S_ISSOCK(ent->st.st_mode)) {
		hu_report_warn(k->report, 0, NULL, c->path, "socket skipped");
		return 0;
	}
	if (link_again(k, c, &linked, e) < 0)
		return tfail(k, c, e);
	if (linked)
		return 0;
	if (hu_tarout_ventry(k->t, c->path, c->dir, ent, e) < 0)
		return tfail(k, c, e);
	if (c->opaque && k->markers)
		return hu_tarout_opaque(k->t, c->path, e);
	return 0;
}

/*
 * An unchanged name of an inode with other names.  Left out, it keeps the
 * old file when the layer is applied, and a new name of the inode written
 * in the layer becomes a file of its own: the group breaks.  So when any
 * name of the inode is written, this one is too, as a hard link to it
 * (umoci and containerd keep such groups the same way): at once when the
 * inode was written before, else at the end of the layer (keep_links()).
 */
static int on_same(void *ctx, const struct hu_change *c, struct hu_error *e)
{
	struct tarsink *k = ctx;
	const struct stat *st = &c->ent->st;
	const char *first = hu_linkmap_first_of(&k->links, st);
	struct kept *v;

	if (first)
		return hu_tarout_hardlink(k->t, c->path, first, st, e) < 0 ?
			tfail(k, c, e) : 0;
	if (k->nkept == k->capkept) {
		size_t cap = k->capkept ? 2 * k->capkept : 16;

		v = realloc(k->kept, cap * sizeof(*v));
		if (!v)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		k->kept = v;
		k->capkept = cap;
	}
	v = &k->kept[k->nkept];
	v->path = strdup(c->path);
	if (!v->path)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	v->st = *st;
	k->nkept++;
	return 0;
}

/* With @write, the unchanged names whose inode was written after them,
 * as hard links to it; the others stay out.  Then free them. */
static int keep_links(struct tarsink *k, bool write, struct hu_error *e)
{
	int rc = write ? 0 : -1;

	for (size_t i = 0; i < k->nkept; i++) {
		struct kept *v = &k->kept[i];
		const char *first = hu_linkmap_first_of(&k->links, &v->st);

		if (rc == 0 && first)
			rc = hu_tarout_hardlink(k->t, v->path, first, &v->st,
						e);
		free(v->path);
	}
	free(k->kept);
	k->kept = NULL;
	k->nkept = k->capkept = 0;
	return rc;
}

static int on_change(void *ctx, const struct hu_change *c, struct hu_error *e)
{
	struct tarsink *k = ctx;

	if (c->kind == HU_CHG_DELETE)
		return whiteout(k, c->path, e);
	return entry(k, c, e);
}

int hu_changes_write_tar(const struct hu_stack *s,
			 const struct hu_changes_opts *o, bool opaque_markers,
			 struct hu_tarout *t, struct hu_error *e)
{
	/* Everything an added or opaque directory holds is new; nothing
	 * below a deleted one needs a whiteout. */
	const struct chg_flags f = { .rec_add = true, .rec_del = false,
				     .replace_opaque = opaque_markers,
				     .same = on_same };
	struct tarsink k = { .s = s, .report = o->report, .t = t,
			     .markers = opaque_markers };
	int rc;

	rc = chg_walk(s, o, &f, on_change, &k, e);
	if (keep_links(&k, rc == 0, e) < 0)
		rc = -1;
	hu_linkmap_free(&k.links);
	return rc;
}
