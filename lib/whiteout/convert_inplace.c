/* SPDX-License-Identifier: MIT */
/*
 * whiteout convert --in-place: only the markers change, through the write
 * wrapper.  Before the first change, a record on the layer root (convrec.c)
 * says that the layer is being converted, and from which format to which:
 * until the last change is made and the record removed, every reader
 * takes the markers of both formats (marker.c, view_*.c).  A new marker is
 * made before the old one goes: for the same name (union <-> overlay)
 * under a temporary name renamed over the old, for another name (.wh.NAME
 * <-> NAME) beside it.  So at every step the view of the layer is the
 * view it had, whether the run goes on, fails or is killed, and running
 * it again finishes it.  The times of the directories touched come back
 * after.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "whiteout/convert.h"

/* Before each change.  Before the first, the record, unless a run that
 * stopped left it; before the first in directory @d (NULL: a change of
 * xattrs only), its times, which come back after. */
static int started(struct conv *c, struct wh_dir *d, struct hu_error *e)
{
	if (!c->st->started) {
		if (!c->half && hu_conv_record_set(c->l, &c->to, e) < 0)
			return -1;
		c->st->started = true;
	}
	if (!d || d->changed)
		return 0;
	if (hu_conv_times_set(c->l, &c->to, d->fd, &d->st, e) < 0)
		return wh_prefix(e, c->l->path, d->path);
	d->changed = true;
	return 0;
}

/* Move overlay/union xattr @what of @d/@name (NULL: @d itself) from the
 * source namespace and format to the target's. */
static int move_xattr(struct conv *c, struct wh_dir *d, const char *name,
		      const char *what, struct hu_error *e)
{
	char from[64], to[64];
	ssize_t len;
	char *v;
	int rc;

	hu_marker_xattr(c->l->format, c->l->userxattr, what, from,
			sizeof(from));
	hu_marker_xattr(c->to.format, c->to.userxattr, what, to, sizeof(to));
	if (wh_xattr_read(d->fd, name, from, &v, &len) < 0)
		return wh_fail(e, errno, c->l->path, d->path, name,
			       "cannot read %s", from);
	if (!v)
		return 0;
	if (started(c, NULL, e) < 0) {
		free(v);
		return -1;
	}
	rc = hu_wr_setxattr_at(d->fd, name, to, v, len, 0);
	free(v);
	if (rc < 0)
		return wh_fail(e, errno, c->l->path, d->path, name,
			       "cannot set %s", to);
	if (hu_wr_removexattr_at(d->fd, name, from) < 0 && errno != ENODATA)
		return wh_fail(e, errno, c->l->path, d->path, name,
			       "cannot remove %s", from);
	return 0;
}

/* The opaque marker of @d itself: the new one first, then the old. */
static int opaque_inplace(struct conv *c, struct wh_dir *d,
			  struct hu_error *e)
{
	enum hu_format s = c->l->format, t = c->to.format;
	char from[64];

	if (s != HU_FMT_OCI && t != HU_FMT_OCI)
		return move_xattr(c, d, NULL, "opaque", e);
	if (started(c, d, e) < 0)	/* .wh..wh..opq comes or goes */
		return -1;
	if (wh_opaque_fd(&c->to, d->fd, true, e) < 0)
		return wh_prefix(e, c->l->path, d->path);
	if (t == HU_FMT_OCI && cv_opq_times(d, d->fd, c->l->path, e) < 0)
		return -1;
	if (s == HU_FMT_OCI) {
		if (hu_wr_unlinkat(d->fd, HU_OCI_OPAQUE, 0) < 0)
			return wh_fail(e, errno, c->l->path, d->path,
				       HU_OCI_OPAQUE, "cannot remove");
		return 0;
	}
	hu_marker_xattr(s, c->l->userxattr, "opaque", from, sizeof(from));
	if (hu_wr_removexattr_at(d->fd, NULL, from) < 0 && errno != ENODATA)
		return wh_fail(e, errno, c->l->path, d->path, "",
			       "cannot remove %s", from);
	return 0;
}

static int inplace_dir(void *ctx, struct wh_dir *d, struct hu_error *e)
{
	struct conv *c = ctx;
	bool overlay_ns = c->l->format == HU_FMT_OVERLAY &&
			  c->to.format == HU_FMT_OVERLAY && cv_ns_changes(c);
	struct timespec ts[2];

	/* The times a stopped run changed: those it kept come back. */
	if (c->half && hu_conv_times_read(d->fd, ts, &d->changed, e) < 0)
		return wh_prefix(e, c->l->path, d->path);
	if (d->changed) {
		d->st.st_atim = ts[0];
		d->st.st_mtim = ts[1];
	}
	if (cv_dir_hides(c, d, e) < 0)
		return -1;

	if (d->opaque == HU_OPAQUE_YES && !cv_xattrs_kept(c)) {
		if (opaque_inplace(c, d, e) < 0)
			return -1;
		cv_report(c, HU_WH_OPAQUE, wh_dir_path(d), NULL,
			  HU_WH_CONVERTED);
	}
	if (d->opaque == HU_OPAQUE_XWHITEOUTS && overlay_ns &&
	    move_xattr(c, d, NULL, "opaque", e) < 0)
		return -1;
	if (d->redirect && overlay_ns) {
		if (move_xattr(c, d, NULL, "redirect", e) < 0)
			return -1;
		cv_report(c, HU_WH_REDIRECT, wh_dir_path(d), d->redirect,
			  HU_WH_CONVERTED);
	}
	return 0;
}

/* Put a target-format whiteout at @name, with the times of old marker
 * @src: made whole under a temporary name (a union whiteout takes two
 * steps) and renamed over the old one (@flags 0, so the name is never
 * unhidden) or into place (RENAME_NOREPLACE). */
static int put_whiteout(struct conv *c, struct wh_dir *d, const char *name,
			const char *src, unsigned int flags,
			struct hu_error *e)
{
	struct timespec ts[2];
	struct stat st;

	if (started(c, d, e) < 0)
		return -1;
	if (fstatat(d->fd, src, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return wh_fail(e, errno, c->l->path, d->path, src,
			       "cannot stat");
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	if (hu_marker_put_whiteout(&c->to, c->to.format, d->fd, name, ts,
				   flags, &c->seed, e) < 0)
		return wh_prefix(e, c->l->path, d->path);
	return 0;
}

/* A union/overlay whiteout becomes .wh.NAME: made first, then the old
 * one goes.  .wh.NAME may already be there from a run that stopped. */
static int to_oci_whiteout(struct conv *c, struct wh_dir *d,
			   const struct wh_ent *ent, struct hu_error *e)
{
	char wh[NAME_MAX + 8];
	struct stat st;

	/* a name read from @d: it fits */
	(void)hu_oci_whiteout_name(wh, sizeof(wh), ent->name);
	if (started(c, d, e) < 0)
		return -1;
	if (fstatat(d->fd, wh, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return wh_fail(e, errno, c->l->path, d->path, wh,
				       "cannot stat");
		if (hu_marker_add_whiteout(&c->to, HU_FMT_OCI, d->fd,
					   ent->name, e) < 0)
			return wh_prefix(e, c->l->path, d->path);
	}
	/* also when a stopped run made it, maybe not its times */
	if (cv_marker_times(d, ent->name, d->fd, wh, c->l->path, e) < 0)
		return -1;
	if (hu_wr_unlinkat(d->fd, ent->name, 0) < 0)
		return wh_fail(e, errno, c->l->path, d->path, ent->name,
			       "cannot remove the old whiteout");
	return 0;
}

/* .wh.NAME becomes a union/overlay whiteout NAME (or, with a twin, makes
 * the directory NAME opaque, or just goes). */
static int from_oci_whiteout(struct conv *c, struct wh_dir *d,
			     const struct wh_ent *ent, enum hu_wh_action a,
			     struct hu_error *e)
{
	if (started(c, d, e) < 0)
		return -1;
	if (a == HU_WH_MADE_OPAQUE &&
	    hu_marker_set_opaque(&c->to, c->to.format, d->fd, ent->key, true,
				 e) < 0)
		return wh_prefix(e, c->l->path, d->path);
	if (!ent->twin && put_whiteout(c, d, ent->key, ent->name,
				       RENAME_NOREPLACE, e) < 0)
		return -1;
	/* CONVERTED with a twin: the whiteout a stopped run made */
	if (ent->twin && a == HU_WH_CONVERTED &&
	    cv_marker_times(d, ent->name, d->fd, ent->key, c->l->path, e) < 0)
		return -1;
	if (hu_wr_unlinkat(d->fd, ent->name, 0) < 0)
		return wh_fail(e, errno, c->l->path, d->path, ent->name,
			       "cannot remove the old whiteout");
	return 0;
}

/* A whiteout that hides nothing goes, with the target-format whiteout of
 * its name a stopped run may have made beside an OCI one. */
static int drop_whiteout(struct conv *c, struct wh_dir *d,
			 const struct wh_ent *ent, struct hu_error *e)
{
	enum hu_wh_action twin = HU_WH_DROPPED;

	if (ent->twin && cv_twin_action(c, d, ent, &twin, e) < 0)
		return -1;
	if (started(c, d, e) < 0)
		return -1;
	if (twin == HU_WH_CONVERTED &&
	    hu_wr_unlinkat(d->fd, ent[1].name, 0) < 0)
		return wh_fail(e, errno, c->l->path, d->path, ent[1].name,
			       "cannot remove the whiteout");
	if (hu_wr_unlinkat(d->fd, ent->name, 0) < 0)
		return wh_fail(e, errno, c->l->path, d->path, ent->name,
			       "cannot remove the whiteout");
	return 0;
}

static int inplace_whiteout(struct conv *c, struct wh_dir *d,
			    const struct wh_ent *ent, struct hu_error *e)
{
	enum hu_format s = c->l->format, t = c->to.format;
	enum hu_wh_action a = HU_WH_CONVERTED;
	int rc;

	if (cv_whiteout_kept(c, ent))
		return 0;
	if (cv_whiteout_action(c, d, ent, &a, e) < 0)
		return -1;
	if (a == HU_WH_DROPPED_HIDDEN)
		rc = drop_whiteout(c, d, ent, e);
	else if (s == HU_FMT_OCI)
		rc = from_oci_whiteout(c, d, ent, a, e);
	else if (t == HU_FMT_OCI)
		rc = to_oci_whiteout(c, d, ent, e);
	else if (s == t)	/* only the namespace of an xattr changes */
		rc = move_xattr(c, d, ent->name, "whiteout", e);
	else
		rc = put_whiteout(c, d, ent->name, ent->name, 0, e);
	if (rc < 0)
		return -1;
	return cv_report_ent(c, d, ent->xwhiteout ? HU_WH_XWHITEOUT :
			     HU_WH_WHITEOUT, ent->key, NULL, a, e);
}

static int inplace_file(struct conv *c, struct wh_dir *d,
			const struct wh_ent *ent, struct hu_error *e)
{
	char *redirect;
	bool metacopy;
	int rc = 0;

	if (c->l->format != HU_FMT_OVERLAY || cv_xattrs_kept(c))
		return 0;
	if (wh_file_overlay(c->l, d->fd, ent->name, &metacopy, &redirect,
			    e) < 0)
		return wh_prefix(e, c->l->path, d->path);
	if (metacopy && (rc = move_xattr(c, d, ent->name, "metacopy", e)) == 0)
		rc = cv_report_ent(c, d, HU_WH_METACOPY, ent->key, NULL,
				   HU_WH_CONVERTED, e);
	if (rc == 0 && redirect &&
	    (rc = move_xattr(c, d, ent->name, "redirect", e)) == 0)
		rc = cv_report_ent(c, d, HU_WH_REDIRECT, ent->key, redirect,
				   HU_WH_CONVERTED, e);
	free(redirect);
	return rc;
}

static int inplace_entry(void *ctx, struct wh_dir *d,
			 const struct wh_ent *ent, struct hu_error *e)
{
	struct conv *c = ctx;

	switch (ent->kind) {
	case HU_MARK_WHITEOUT:
		return inplace_whiteout(c, d, ent, e);
	case HU_MARK_META:
		if (c->to.format == HU_FMT_OCI)
			return 0;
		if (started(c, d, e) < 0)
			return -1;
		if (hu_rmtree(d->fd, ent->name) < 0)
			return wh_fail(e, errno, c->l->path, d->path,
				       ent->name, "cannot remove");
		return cv_report_ent(c, d, HU_WH_META, ent->name, NULL,
				     HU_WH_DROPPED, e);
	default:
		break;
	}
	if (hu_conv_temp_name(c->half_l, ent->name)) {
		/* a temporary whiteout a stopped run left */
		if (started(c, d, e) < 0)
			return -1;
		if (hu_wr_unlinkat(d->fd, ent->name, 0) < 0)
			return wh_fail(e, errno, c->l->path, d->path,
				       ent->name, "cannot remove");
		return 0;
	}
	if (S_ISDIR(ent->type))
		return 1;
	return S_ISREG(ent->type) ? inplace_file(c, d, ent, e) : 0;
}

/* After the entries: the "x" of a directory that no longer holds xattr
 * whiteouts goes, and the times the changes touched come back. */
static int inplace_dir_done(void *ctx, struct wh_dir *d, struct hu_error *e)
{
	struct conv *c = ctx;
	struct timespec ts[2] = { d->st.st_atim, d->st.st_mtim };
	char attr[64];

	if (d->opaque == HU_OPAQUE_XWHITEOUTS &&
	    c->to.format != HU_FMT_OVERLAY) {
		hu_marker_xattr(HU_FMT_OVERLAY, c->l->userxattr, "opaque",
				attr, sizeof(attr));
		if (started(c, NULL, e) < 0)
			return -1;
		if (hu_wr_removexattr_at(d->fd, NULL, attr) < 0 &&
		    errno != ENODATA)
			return wh_fail(e, errno, c->l->path, d->path, "",
				       "cannot remove %s", attr);
	}
	if (!d->changed)
		return 0;
	if (hu_wr_futimens(d->fd, ts) < 0)
		return wh_fail(e, errno, c->l->path, d->path, "",
			       "cannot restore the directory's times");
	if (hu_conv_times_clear(c->l, &c->to, d->fd, e) < 0)
		return wh_prefix(e, c->l->path, d->path);
	return 0;
}

/* A failure inside @d: its times come back all the same. */
static void inplace_dir_abort(void *ctx, struct wh_dir *d)
{
	struct timespec ts[2] = { d->st.st_atim, d->st.st_mtim };

	if (d->changed)
		(void)hu_wr_futimens(d->fd, ts);
}

const struct wh_walk_ops cv_inplace_ops = {
	.dir_pre = inplace_dir, .entry = inplace_entry,
	.dir_post = inplace_dir_done, .dir_abort = inplace_dir_abort };
