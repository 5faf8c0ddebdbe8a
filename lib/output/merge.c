/* SPDX-License-Identifier: MIT */
/*
 * merge -o: write the merged view as a new plain tree, through treeout.c
 * (built beside OUT, renamed into place when complete).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output/treeout.h"

struct merge {
	const struct hu_stack *s;
	const struct hu_merge_opts *o;
	struct hu_merge_stats *stats;
	struct hu_treeout t;
	uint64_t done;
};

static const struct hu_treeout_words merge_words = {
	.bad_name = "not a usable output name",
	.no_parent = "cannot open output's parent",
	.no_create = "cannot create the output directory",
	.no_open = "cannot open the output directory",
	.no_move = "cannot move the new tree into place",
};

static void progress(struct merge *m)
{
	hu_report_progress(m->o->report, ++m->done);
}

/* --link: the output shares the source inode. */
static int link_file(struct merge *m, const struct hu_ventry *ent,
		     struct hu_error *e)
{
	if (hu_wr_linkat(ent->dirfd, ent->name, hu_treeout_fd(&m->t),
			 ent->name) == 0)
		return 0;
	return hu_treeout_fail(&m->t, ent->name, errno, errno == EXDEV ?
			       "cannot hard-link across filesystems (--link "
			       "needs OUT on the layers' filesystem)" :
			       "cannot hard-link", e);
}

/* A copy of the bytes of @src, which it takes.  The metadata and xattrs
 * are the entry's own: for a metacopy file not those of @src, which holds
 * only the data. */
static int copy_file(struct merge *m, const struct hu_ventry *ent, int src,
		     const struct stat *data, struct hu_error *e)
{
	int xsrc = src;

	if (data->st_ino != ent->st.st_ino || data->st_dev != ent->st.st_dev) {
		xsrc = openat(ent->dirfd, ent->name,
			      O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (xsrc < 0) {
			close(src);
			return hu_treeout_fail(&m->t, ent->name, errno,
					       "cannot open source", e);
		}
	}
	m->stats->bytes += data->st_size;
	return hu_treeout_file(&m->t, ent->name, src, data, xsrc, &ent->st, e);
}

static int write_file(struct merge *m, struct hu_vdir *d,
		      const struct hu_ventry *ent, struct hu_error *e)
{
	struct stat data = ent->st;
	int src, rc;

	src = hu_vdir_open_data(d, ent, NULL, e);
	if (src < 0)
		return -1;
	/* Only an overlay layer can hold a metacopy file, whose data is
	 * another file's. */
	if (hu_layer_is(&m->s->layers[ent->layer], HU_FMT_OVERLAY) &&
	    fstat(src, &data) < 0) {
		rc = hu_treeout_fail(&m->t, ent->name, errno,
				     "cannot stat source", e);
	} else if (m->o->data == HU_DATA_LINK &&
		   data.st_ino == ent->st.st_ino &&
		   data.st_dev == ent->st.st_dev) {
		/* not when the data lives in another file than the
		 * metadata (metacopy): that file has other metadata */
		rc = link_file(m, ent, e);
	} else {
		return copy_file(m, ent, src, &data, e);
	}
	close(src);
	return rc;
}

static int write_symlink(struct merge *m, const struct hu_ventry *ent,
			 struct hu_error *e)
{
	char *target = hu_read_symlink(ent->dirfd, ent->name, &ent->st);
	int rc;

	if (!target)
		return hu_treeout_fail(&m->t, ent->name, errno,
				       "cannot read symlink", e);
	rc = hu_treeout_symlink(&m->t, ent->name, target, ent->dirfd,
				&ent->st, e);
	free(target);
	return rc;
}

static void count_dry(struct merge *m, mode_t type, const struct stat *st)
{
	m->stats->dirs += type == S_IFDIR;
	m->stats->files += type == S_IFREG;
	if (type == S_IFREG)
		m->stats->bytes += st->st_size;
	m->stats->symlinks += type == S_IFLNK;
	m->stats->specials += type != S_IFDIR && type != S_IFREG &&
			      type != S_IFLNK;
}

static int on_entry(void *ctx, struct hu_vdir *d, const struct hu_ventry *ent,
		    struct hu_error *e)
{
	struct merge *m = ctx;
	mode_t type = ent->st.st_mode & S_IFMT;
	int rc;

	progress(m);
	if (type == S_IFSOCK) {
		hu_report_warn(m->o->report, 0, hu_vdir_path(d), ent->name,
			       "socket skipped");
		m->stats->skipped++;
		return 0;
	}
	if (m->o->dry_run) {
		count_dry(m, type, &ent->st);
		return type == S_IFDIR;
	}
	if (type == S_IFDIR) {
		m->stats->dirs++;
		return hu_treeout_dir(&m->t, ent->name, e) < 0 ? -1 : 1;
	}
	rc = hu_treeout_hardlink(&m->t, ent->name, &ent->st, e);
	if (rc != 0) {
		m->stats->hardlinks += rc > 0;
		return rc < 0 ? -1 : 0;
	}
	switch (type) {
	case S_IFREG:
		m->stats->files++;
		return write_file(m, d, ent, e);
	case S_IFLNK:
		m->stats->symlinks++;
		return write_symlink(m, ent, e);
	default:
		m->stats->specials++;
		return hu_treeout_special(&m->t, ent->name, ent->dirfd,
					  &ent->st, e);
	}
}

/* After a directory's contents: its own metadata, from its topmost layer
 * directory. */
static int on_leave(void *ctx, struct hu_vdir *d, const struct hu_ventry *ent,
		    struct hu_error *e)
{
	struct merge *m = ctx;
	struct stat st;
	size_t layer;
	int src = hu_vdir_fd(d, &layer);

	if (m->o->dry_run)
		return 0;
	if (hu_layer_dir_stat(&m->s->layers[layer], src, &st, e) < 0)
		return hu_treeout_prefix(&m->t, "", e);
	return hu_treeout_dir_done(&m->t, src, &st, e);
}

int hu_merge_tree(const struct hu_stack *s, const char *out,
		  const struct hu_merge_opts *o, struct hu_merge_stats *stats,
		  struct hu_error *e)
{
	static const struct hu_walk_ops ops = {
		.entry = on_entry, .leave = on_leave };
	struct merge m = { .s = s, .o = o, .stats = stats };
	int rc;

	memset(stats, 0, sizeof(*stats));
	rc = hu_treeout_open(&m.t, out, &merge_words, s->layers, s->n, e);
	m.t.cs.bytes = o->report ? o->report->bytes : NULL;
	if (rc == 0 && !m.t.as_root)
		hu_report_warn(o->report, EPERM, out, NULL,
			       "not running as root: owners are not kept");
	/* a dry run walks and counts, with nothing begun */
	if (rc == 0 && !o->dry_run)
		rc = hu_treeout_begin(&m.t, e);
	if (rc == 0) {
		hu_report_phase(o->report, HU_PHASE_WRITING, out);
		rc = hu_view_walk(s, &ops, &m, e);
	}
	return hu_treeout_end(&m.t, rc, e);
}
