/* SPDX-License-Identifier: MIT */
/*
 * fsck: the markers of every format (hunion-layers(7)) in the layer
 * checked.  Here: lookalikes of the layer's own markers (a union whiteout
 * without its xattr, marker xattrs where they mean nothing or with values
 * the readers do not take), whiteouts and opaque marks that do nothing
 * or that the kernel lists as entries, and the entry points; markers of
 * another format are fsck_foreign.c's, what interrupted runs leave
 * fsck_leftover.c's (fsck_marker.h between them).
 *
 * A repair makes the new state whole before the old one goes, so a
 * failed or faulted one leaves the entry as it was; a repair that adds or
 * removes an entry gives its directory back the times it had, since the
 * topmost layer's directory is what the view shows.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fsck/fsck_marker.h"

/* ---- small helpers ------------------------------------------------------ */

/*
 * The times of a directory the view shows are the topmost layer's
 * directory's: a repair that adds or removes entries of @d keeps them.
 * Before the change they are recorded on @d (convrec.c's times record,
 * private), so that a run killed before it puts them back leaves them
 * for the next (fm_check_times_record); after it they come back and the
 * record goes.
 */
int fsck_keep_times(struct fsck_run *r, struct fsck_dir *d,
		    struct hu_error *why)
{
	const struct hu_layer *l = fsck_layer(r);

	if (d->wd->changed)
		return 0;
	if (hu_conv_times_set(l, l, d->wd->fd, &d->wd->st, why) < 0)
		return hu_error_setat(why, why->err, d->wd->path, "",
				      "cannot record the directory's times "
				      "(%s)", why->msg);
	d->wd->changed = true;
	return 0;
}

void fsck_restore_times(struct fsck_run *r, struct fsck_dir *d)
{
	const struct hu_layer *l = fsck_layer(r);
	struct timespec ts[2] = { d->wd->st.st_atim, d->wd->st.st_mtim };
	struct hu_error why = { 0 };

	if (!d->wd->changed)
		return;
	/* The record stays when the times cannot come back: the next run
	 * tries again. */
	if (hu_wr_futimens(d->wd->fd, ts) < 0) {
		hu_report_warn(fsck_opts(r)->report, errno, l->path,
			       d->wd->path,
			       "cannot restore the directory's times");
		return;
	}
	if (hu_conv_times_clear(l, l, d->wd->fd, &why) < 0) {
		hu_report_warn(fsck_opts(r)->report, why.err, l->path,
			       d->wd->path, "%s", why.msg);
		hu_error_clear(&why);
		return;
	}
	d->wd->changed = false;
}

int fm_keep(struct fsck_run *r, const struct fsck_dir *d,
		struct hu_error *why)
{
	return fsck_keep_times(r, (struct fsck_dir *)d, why);
}

/* The outcome of a repair in @d: @rc 0 done, -1 failed with @why.  The
 * directory gets its times back either way (a failed repair may have made
 * and removed a temporary); that is no part of the repair, which is
 * complete (or undone) by now: a warning when it fails. */
int fm_done(struct fsck_run *r, const struct fsck_dir *d, int rc,
		struct hu_error *why, struct hu_error *e)
{
	fsck_restore_times(r, (struct fsck_dir *)d);
	return fsck_done(r, rc, why, e);
}

int fm_fail(struct hu_error *why, const struct fsck_dir *d,
		const char *name, const char *what)
{
	return hu_error_setat(why, errno, d->wd->path, name, "%s", what);
}

/* Report @id at @name of @d; 1 when to repair now, 0 not, -1 stop. */
int fm_found(struct fsck_run *r, const struct fsck_dir *d,
		 enum hu_problem_id id, const char *name, const char *detail,
		 struct hu_error *e)
{
	return fsck_found(r, id, d->wd->path, name, detail, e);
}

/* Are the layers beneath known?  Checked alone, without --all-layers, a
 * layer's whiteouts may be meant for layers not given: no whiteout or
 * opaque mark is then said to hide nothing. */
static bool beneath_known(const struct fsck_run *r)
{
	return fsck_below(r)->n > 0 || fsck_opts(r)->all_layers;
}

/* ---- what one entry is ---------------------------------------------------- */

static int look_at(struct fsck_run *r, const struct fsck_dir *d,
		   const char *name, struct look *k, struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	char target[sizeof(HU_UNION_WHITEOUT_TARGET) + 1], attr[64], v[2];
	const struct fsck_facts *f;
	ssize_t n;

	memset(k, 0, sizeof(*k));
	if (fsck_entry_facts(r, d, name, &f, e) < 0)
		return -1;
	if (!f)
		return 1;	/* repaired away */
	k->st = f->st;
	/* a copy: a repair by one check makes the engine forget its own */
	if (f->xlen > 0) {
		k->xattrs = malloc(f->xlen);
		if (!k->xattrs)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		memcpy(k->xattrs, f->xattrs, f->xlen);
		k->xlen = f->xlen;
	}
	k->dev00 = S_ISCHR(k->st.st_mode) && k->st.st_rdev == makedev(0, 0);
	if (!S_ISLNK(k->st.st_mode) ||
	    k->st.st_size != (off_t)strlen(HU_UNION_WHITEOUT_TARGET))
		return 0;
	n = readlinkat(d->wd->fd, name, target, sizeof(target));
	if (n < 0)
		return wh_fail(e, errno, l->path, d->wd->path, name,
			       "cannot read symlink");
	k->wh_target = (size_t)n == strlen(HU_UNION_WHITEOUT_TARGET) &&
		       !memcmp(target, HU_UNION_WHITEOUT_TARGET, n);
	if (!k->wh_target)
		return 0;
	hu_marker_xattr(HU_FMT_UNION, l->userxattr, "whiteout", attr,
			sizeof(attr));
	k->union_wh = hu_lgetxattr_at(d->wd->fd, name, attr, v, 1) == 1 &&
		      v[0] == 'y';
	return 0;
}

/* ---- lookalikes of the layer's own format ------------------------------- */

/* Union whiteouts: the symlink and its xattr belong together, valued
 * "y" (marker.c reads one byte: anything else is no whiteout). */
static int check_union_whiteout(struct fsck_run *r, const struct fsck_dir *d,
				const char *name, const struct look *k,
				struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_error why = { 0 };
	enum hu_problem_id id;
	char attr[64], *v = NULL;
	ssize_t len;
	int rc;

	if (l->format != HU_FMT_UNION || k->union_wh)
		return 0;
	hu_marker_xattr(HU_FMT_UNION, l->userxattr, "whiteout", attr,
			sizeof(attr));
	if (!fsck_xattr_listed(k->xattrs, k->xlen, attr) && !k->wh_target)
		return 0;
	if (wh_xattr_read(d->wd->fd, name, attr, &v, &len) < 0)
		return wh_fail(e, errno, l->path, d->wd->path, name,
			       "cannot read %s", attr);
	id = !k->wh_target ? HU_PB_WHITEOUT_MARK_MISPLACED :
		v ? HU_PB_WHITEOUT_MARK_VALUE : HU_PB_WHITEOUT_UNMARKED;
	rc = fm_found(r, d, id, name, id == HU_PB_WHITEOUT_MARK_VALUE ? v : NULL,
		   e);
	free(v);
	if (rc != 1)
		return rc < 0 ? -1 : 1;
	/* One syscall each: the entry is what it was, or repaired. */
	if (id == HU_PB_WHITEOUT_MARK_MISPLACED)
		rc = hu_wr_removexattr_at(d->wd->fd, name, attr);
	else
		rc = hu_wr_setxattr_at(d->wd->fd, name, attr, "y", 1, 0);
	if (rc < 0)
		fm_fail(&why, d, name, id == HU_PB_WHITEOUT_MARK_MISPLACED ?
		     "cannot remove the whiteout xattr" :
		     "cannot set the whiteout xattr");
	return fsck_done(r, rc, &why, e) < 0 ? -1 : 1;
}

/* The layer's own opaque xattr on what is no directory: the kernel
 * reads it on directories only. */
static int check_opaque_misplaced(struct fsck_run *r, const struct fsck_dir *d,
				  const char *name, const struct look *k,
				  struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_error why = { 0 };
	char attr[64];
	int rc;

	if (S_ISDIR(k->st.st_mode) ||
	    (l->format != HU_FMT_UNION && l->format != HU_FMT_OVERLAY))
		return 0;
	hu_marker_xattr(l->format, l->userxattr, "opaque", attr, sizeof(attr));
	if (!fsck_xattr_listed(k->xattrs, k->xlen, attr))
		return 0;
	rc = fm_found(r, d, HU_PB_OPAQUE_MARK_MISPLACED, name, NULL, e);
	if (rc != 1)
		return rc < 0 ? -1 : 1;
	rc = hu_wr_removexattr_at(d->wd->fd, name, attr);
	if (rc < 0)
		fm_fail(&why, d, name, "cannot remove the opaque xattr");
	return fsck_done(r, rc, &why, e) < 0 ? -1 : 1;
}

/* ---- whiteouts against what lies beneath -------------------------------- */

static int check_whiteout_below(struct fsck_run *r, struct fsck_dir *d,
				const struct wh_ent *ent, struct hu_error *e)
{
	struct hu_error why = { 0 };
	struct hu_ventry below;
	enum hu_problem_id id;
	int rc;

	if (ent->kind != HU_MARK_WHITEOUT || ent->xwhiteout ||
	    !beneath_known(r))
		return 0;
	if (d->merges) {
		rc = hu_vdir_lookup(d->below, ent->key, &below, e);
		if (rc != 0)
			return rc < 0 ? -1 : 0;
		id = HU_PB_WHITEOUT_ORPHAN;
	} else {
		/* overlayfs lists a whiteout of a directory it does not
		 * merge as an entry that cannot be looked up */
		id = HU_PB_WHITEOUT_UNMERGED_DIR;
	}
	rc = fm_found(r, d, id, ent->key, NULL, e);
	if (rc != 1)
		return rc;
	/* It hides nothing: the view is the same without it. */
	rc = fm_keep(r, d, &why);
	if (rc == 0 && hu_wr_unlinkat(d->wd->fd, ent->name, 0) < 0)
		rc = fm_fail(&why, d, ent->name, "cannot remove");
	return fm_done(r, d, rc, &why, e);
}

static int check_oci_invalid(struct fsck_run *r, const struct fsck_dir *d,
			     const struct wh_ent *ent, struct hu_error *e)
{
	const char *hidden = hu_oci_hidden(ent->name);
	struct hu_error why = { 0 };
	int rc;

	if (fsck_layer(r)->format != HU_FMT_OCI || !hidden ||
	    !hu_oci_hides_nothing(hidden))
		return 0;
	rc = fm_found(r, d, HU_PB_OCI_WHITEOUT_INVALID, ent->name, NULL, e);
	if (rc == 1) {
		rc = fm_keep(r, d, &why);
		if (rc == 0)
			rc = fm_remove_entry(d, ent->name, &why);
		rc = fm_done(r, d, rc, &why, e);
	}
	return rc < 0 ? -1 : 1;
}

/* ---- the checks ---------------------------------------------------------- */

int fsck_marker_entry(struct fsck_run *r, struct fsck_dir *d,
		      const struct wh_ent *ent, struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct look k;
	int rc;

	/* A half-converted layer is finished first (fsck_marker_dir): its
	 * markers are then in one format, checked by the next run. */
	if (hu_layer_half(l))
		return 0;
	rc = fm_check_leftover(r, d, ent, e);
	if (rc != 0)
		return rc;
	rc = check_oci_invalid(r, d, ent, e);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (l->format == HU_FMT_NONE)
		return 0;
	rc = look_at(r, d, ent->name, &k, e);
	if (rc == 0)
		rc = fm_check_foreign(r, d, ent->name, &k, e);
	if (rc == 0)
		rc = check_union_whiteout(r, d, ent->name, &k, e);
	if (rc == 0)
		rc = check_opaque_misplaced(r, d, ent->name, &k, e);
	if (rc == 0)
		rc = check_whiteout_below(r, d, ent, e);
	free(k.xattrs);
	return rc < 0 ? -1 : 0;
}

/* The layer's opaque xattr with a value the readers do not take: not
 * opaque, so it goes (union; the overlay one is fsck_overlay.c's). */
static int check_opaque_value(struct fsck_run *r, struct fsck_dir *d,
			      struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_error why = { 0 };
	char attr[64], *v;
	ssize_t len;
	int rc;

	if (l->format != HU_FMT_UNION)
		return 0;
	if (!wh_dir_may_hold(d->wd, ".opaque"))
		return 0;
	hu_marker_xattr(HU_FMT_UNION, l->userxattr, "opaque", attr,
			sizeof(attr));
	if (wh_xattr_read(d->wd->fd, NULL, attr, &v, &len) < 0)
		return wh_fail(e, errno, l->path, d->wd->path, "",
			       "cannot read %s", attr);
	if (!v || (len == 1 && v[0] == 'y')) {
		free(v);
		return 0;
	}
	rc = fm_found(r, d, HU_PB_OPAQUE_MARK_VALUE, NULL, v, e);
	free(v);
	if (rc != 1)
		return rc;
	rc = hu_wr_removexattr_at(d->wd->fd, NULL, attr);
	if (rc < 0)
		fm_fail(&why, d, "", "cannot remove the opaque xattr");
	return fsck_done(r, rc, &why, e);
}

/* An opaque directory over no directory, or over an empty one. */
static int check_opaque_redundant(struct fsck_run *r, struct fsck_dir *d,
				  struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	const struct hu_ventry *ents;
	struct hu_error why = { 0 };
	size_t n = 0;
	int rc;

	/* overlayfs marks every directory it makes opaque (redirect_dir=on),
	 * new ones too: in an overlay layer that is its own bookkeeping. */
	if (d->wd->opaque != HU_OPAQUE_YES || !beneath_known(r) ||
	    l->format == HU_FMT_OVERLAY)
		return 0;
	if (d->below && hu_vdir_list(d->below, &ents, &n, e) < 0)
		return -1;
	if (n > 0)
		return 0;
	rc = fm_found(r, d, HU_PB_OPAQUE_REDUNDANT, NULL, NULL, e);
	if (rc != 1)
		return rc;
	rc = fm_keep(r, d, &why);
	if (rc == 0 && wh_opaque_fd(l, d->wd->fd, false, &why) < 0)
		rc = wh_prefix(&why, "", d->wd->path);
	return fm_done(r, d, rc, &why, e);
}

int fsck_marker_dir(struct fsck_run *r, struct fsck_dir *d,
		    struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct look k;
	int rc;

	if (hu_layer_half(l))
		return *d->wd->path ? 0 : fm_check_converting(r, d, e);
	if (fm_check_times_record(r, d, e) < 0)
		return -1;
	if (l->format == HU_FMT_NONE)
		return 0;
	rc = check_opaque_value(r, d, e);
	if (rc == 0)
		rc = check_opaque_redundant(r, d, e);
	if (rc < 0 || *d->wd->path)
		return rc < 0 ? -1 : 0;
	/* The root's own xattrs; every other directory's are checked as an
	 * entry of its parent. */
	memset(&k, 0, sizeof(k));
	if (fstat(d->wd->fd, &k.st) < 0 ||
	    hu_llistxattr_at(d->wd->fd, NULL, &k.xattrs, &k.xlen) < 0)
		return wh_fail(e, errno, l->path, "", "", "cannot read xattrs");
	rc = fm_check_foreign(r, d, NULL, &k, e);
	free(k.xattrs);
	return rc < 0 ? -1 : 0;
}

