/* SPDX-License-Identifier: MIT */
/*
 * fsck: copy-ups identical to what lies beneath (copyupIdentical, info).
 * A file or symlink of the layer checked whose data, mode, owner, mtime
 * (a copy-up keeps it) and public xattrs are those of the entry the
 * layers beneath show at its path is a copy-up that changed nothing;
 * with --vacuum it goes, and the entry beneath shows through.
 *
 * Only where the view then shows the same entry: its directory merges
 * with the one beneath, nothing else of the layer hides the name (an
 * OCI whiteout beside it), and neither side is one name of several of
 * an inode (the view would gain or lose a hard link).  Entries whose
 * data or name lie elsewhere (overlay metacopy, redirect) are left.
 * The comparison is diff's (changes_cmp.c), so the two never disagree
 * on what "unchanged" means.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diff/changes.h"
#include "fsck/fsck.h"

/* Do @f's xattrs put a regular file's data or name elsewhere: an overlay
 * metacopy or redirect? */
static bool overlay_elsewhere(const struct hu_layer *l,
			      const struct fsck_facts *f)
{
	char attr[64];

	if (l->format != HU_FMT_OVERLAY)
		return false;
	hu_marker_xattr(HU_FMT_OVERLAY, l->userxattr, "metacopy", attr,
			sizeof(attr));
	if (fsck_xattr_listed(f->xattrs, f->xlen, attr))
		return true;
	hu_marker_xattr(HU_FMT_OVERLAY, l->userxattr, "redirect", attr,
			sizeof(attr));
	return fsck_xattr_listed(f->xattrs, f->xlen, attr);
}

/* Is @ent, lstat @st, a plain copy-up candidate: a regular file or
 * symlink, no marker, one name, no overlay metacopy or redirect?  1
 * yes, 0 no, -1 error. */
static int candidate(struct fsck_run *r, const struct fsck_dir *d,
		     const struct wh_ent *ent, struct stat *st,
		     struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	const struct fsck_facts *f;
	enum hu_marker kind = HU_MARK_NONE;
	const char *key;

	/* An OCI .wh.* name the walk hands over (one that hides nothing)
	 * is no copy-up either. */
	if (ent->kind != HU_MARK_NONE || ent->twin ||
	    (!S_ISREG(ent->type) && !S_ISLNK(ent->type)) ||
	    (hu_layer_is(l, HU_FMT_OCI) && hu_oci_is_marker(ent->name)))
		return 0;
	/* Afresh: a check before this one may have repaired the entry
	 * (the engine forgets what it read of it then); a file it replaced
	 * by a whiteout is no file. */
	if (fsck_entry_facts(r, d, ent->name, &f, e) < 0)
		return -1;
	if (!f)
		return 0;
	*st = f->st;
	if ((!S_ISREG(st->st_mode) && !S_ISLNK(st->st_mode)) ||
	    st->st_nlink > 1)
		return 0;
	if (S_ISREG(st->st_mode))
		return !overlay_elsewhere(l, f);
	/* A symlink a marker check just made a union whiteout is one now. */
	if (hu_marker_classify(l, d->wd->fd, ent->name, st, true, &kind, &key,
			       e) < 0)
		return wh_prefix(e, l->path, d->wd->path);
	return kind == HU_MARK_NONE;
}

/* Does @ent (lstat @st) equal @below in every way the view shows? */
static int identical(struct fsck_run *r, struct fsck_dir *d,
		     const struct wh_ent *ent, const struct stat *st,
		     const struct hu_ventry *below, bool *same,
		     struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	/* The entry as a one-layer view of its own, named in errors as
	 * LAYER/DIR/NAME like the side beneath. */
	struct hu_layer ul = *l;
	struct hu_stack us = { .n = 1, .layers = &ul };
	struct hu_ventry uent = { .name = ent->name, .layer = 0,
				  .dirfd = d->wd->fd, .st = *st };
	struct chg_side n = { &us, NULL, &uent };
	struct chg_side o = { fsck_below(r), d->below, below };
	unsigned what;
	int rc;

	*same = false;
	ul.path = hu_path_join(l->path, d->wd->path);
	if (!ul.path)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	rc = hu_vdir_open_root(&us, &n.d, e);
	if (rc == 0)
		rc = chg_compare(&n, &o, CHG_CMP_FULL, &what, e);
	if (rc == 0)
		*same = what == 0;
	if (n.d)
		hu_vdir_close(n.d);
	free(ul.path);
	return rc;
}

int fsck_vacuum_entry(struct fsck_run *r, struct fsck_dir *d,
		      const struct wh_ent *ent, struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_error why = { 0 };
	struct hu_ventry below;
	struct stat st;
	bool same;
	int rc;

	if (hu_layer_half(l) || !d->merges || !d->below)
		return 0;
	rc = candidate(r, d, ent, &st, e);
	if (rc <= 0)
		return rc;
	rc = hu_vdir_lookup(d->below, ent->name, &below, e);
	if (rc <= 0)
		return rc;
	/* The inode first: most changed files differ there, and the data
	 * and xattrs of those are never read. */
	if (below.st.st_mode != st.st_mode || below.st.st_nlink > 1 ||
	    below.st.st_uid != st.st_uid || below.st.st_gid != st.st_gid ||
	    below.st.st_size != st.st_size ||
	    below.st.st_mtim.tv_sec != st.st_mtim.tv_sec ||
	    below.st.st_mtim.tv_nsec != st.st_mtim.tv_nsec)
		return 0;
	if (identical(r, d, ent, &st, &below, &same, e) < 0)
		return -1;
	if (!same)
		return 0;
	rc = fsck_found(r, HU_PB_COPYUP_IDENTICAL, d->wd->path, ent->name,
			NULL, e);
	if (rc != 1)
		return rc;
	/* One unlink; the directory the view shows keeps its times. */
	rc = fsck_keep_times(r, d, &why);
	if (rc == 0 && hu_wr_unlinkat(d->wd->fd, ent->name, 0) < 0)
		rc = hu_error_setat(&why, errno, d->wd->path, ent->name,
				    "cannot remove");
	fsck_restore_times(r, d);
	return fsck_done(r, rc, &why, e);
}
