/* SPDX-License-Identifier: MIT */
/*
 * flatten: the merged view as one tarball.  A walk of the view (sorted,
 * each directory before its contents, the root first as "./") writing
 * every entry into the tar writer.  Names that are one inode of a layer
 * become tar hard links: the first name in output order carries the data,
 * the later ones link to it.  Sockets cannot be archived: each is skipped
 * with a warning.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "common/linkmap.h"
#include "layer/ldir.h"

struct flatten {
	const struct hu_stack *s;
	const struct hu_report *report;
	struct hu_tarout *t;
	struct hu_flatten_stats *stats;
	struct hu_linkmap links;
	struct hu_pathbuf path;	/* the current entry's */
};

/* Source errors name the entry in its layer; errors of the output stream
 * have no path (the caller names its output). */
static int ffail(const struct hu_stack *s, size_t layer, struct hu_error *e)
{
	if (e->path)
		hu_error_prefix(e, s->layers[layer].path);
	return -1;
}

static void progress(struct flatten *f)
{
	hu_report_progress(f->report, ++f->stats->entries);
}

void hu_flatten_count(struct hu_flatten_stats *st, const struct stat *s)
{
	switch (s->st_mode & S_IFMT) {
	case S_IFDIR:
		st->dirs++;
		break;
	case S_IFREG:
		st->files++;
		st->bytes += (uint64_t)s->st_size;
		break;
	case S_IFLNK:
		st->symlinks++;
		break;
	default:
		st->specials++;
	}
}

/* A later name of an inode already written: a tar hard link to the
 * first (linkmap.c).  *@done when so. */
static int link_again(struct flatten *f, const char *path,
		      const struct hu_ventry *ent, bool *done,
		      struct hu_error *e)
{
	const char *first;

	*done = false;
	if (hu_linkmap_first(&f->links, &ent->st, NULL, path, &first) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (!first)
		return 0;
	*done = true;
	f->stats->hardlinks++;
	return hu_tarout_hardlink(f->t, path, first, &ent->st, e);
}

static int on_entry(void *ctx, struct hu_vdir *d, const struct hu_ventry *ent,
		    struct hu_error *e)
{
	struct flatten *f = ctx;
	const char *path;
	size_t saved;
	bool linked;

	/* One buffer for every entry's path: no allocation per entry. */
	hu_pathbuf_pop(&f->path, 0);
	if (hu_pathbuf_push(&f->path, hu_vdir_path(d), &saved) < 0 ||
	    hu_pathbuf_push(&f->path, ent->name, &saved) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	path = f->path.s;
	progress(f);
	if (S_ISSOCK(ent->st.st_mode)) {
		hu_report_warn(f->report, 0, hu_vdir_path(d), ent->name,
			       "socket skipped");
		f->stats->skipped++;
		return 0;
	}
	if (link_again(f, path, ent, &linked, e) < 0)
		return ffail(f->s, ent->layer, e);
	if (linked)
		return 0;
	if (hu_tarout_ventry(f->t, path, d, ent, e) < 0)
		return ffail(f->s, ent->layer, e);
	hu_flatten_count(f->stats, &ent->st);
	return S_ISDIR(ent->st.st_mode) ? 1 : 0;
}

/* The root of the view, from its topmost layer directory. */
static int on_root(void *ctx, struct hu_vdir *root, struct hu_error *e)
{
	struct flatten *f = ctx;
	size_t layer;
	int fd = hu_vdir_fd(root, &layer);
	struct stat st;

	if (hu_layer_dir_stat(&f->s->layers[layer], fd, &st, e) < 0)
		return ffail(f->s, layer, e);
	if (hu_tarout_layer_dir(f->t, "", &st, &f->s->layers[layer], fd,
				e) < 0)
		return ffail(f->s, layer, e);
	f->stats->dirs++;
	return 0;
}

int hu_flatten_data_finish(const struct hu_stack *s, struct hu_error *e)
{
	/* Each tarball whose data was read forward is read to its end, its
	 * digests checked, before the output may count as written. */
	for (size_t i = 0; i < s->n; i++)
		if (hu_ldir_data_finish(&s->layers[i], e) < 0) {
			hu_error_prefix(e, s->layers[i].path);
			return -1;
		}
	return 0;
}

int hu_flatten_write_tar(const struct hu_stack *s, const struct hu_report *r,
			 struct hu_tarout *t, struct hu_flatten_stats *stats,
			 struct hu_error *e)
{
	static const struct hu_walk_ops ops = {
		.entry = on_entry, .enter_root = on_root,
		.list_ahead = true, .xattr_names = true,
		.prefetch_data = true };
	struct flatten f = { .s = s, .report = r, .t = t, .stats = stats };
	int rc;

	memset(stats, 0, sizeof(*stats));
	hu_report_phase(r, HU_PHASE_WRITING, NULL);
	rc = hu_view_walk(s, &ops, &f, e);
	if (rc >= 0)
		rc = hu_flatten_data_finish(s, e);
	hu_linkmap_free(&f.links);
	hu_pathbuf_free(&f.path);
	return rc;
}
