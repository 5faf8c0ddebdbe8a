/* SPDX-License-Identifier: MIT */
/*
 * whiteout convert -o NEWLAYER: a copy of the whole layer with every
 * marker written in the target format, written through treeout.c (built
 * beside NEWLAYER, renamed into place when complete), which keeps data,
 * hard links, modes, owners (as root), times and public xattrs as merge -o
 * keeps them.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "whiteout/convert.h"

static const struct hu_treeout_words convert_words = {
	.bad_name = "not a usable name for a layer",
	.no_parent = "cannot open the new layer's parent",
	.no_create = "cannot create the new layer",
	.no_open = "cannot open the new layer",
	.no_move = "cannot move the new layer into place",
};

static void progress(struct conv *c)
{
	hu_report_progress(c->o->report, ++c->st->entries);
}

/* ---- ordinary entries ------------------------------------------------ */

static int copy_file(struct conv *c, const struct wh_dir *d,
		     const char *name, const struct stat *st,
		     struct hu_error *e)
{
	int src;

	src = openat(d->fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (src < 0)
		return wh_fail(e, errno, c->l->path, d->path, name,
			       "cannot open");
	return hu_treeout_file(&c->t, name, src, st, src, st, e);
}

static int copy_symlink(struct conv *c, const struct wh_dir *d,
			const char *name, const struct stat *st,
			struct hu_error *e)
{
	char *target = hu_read_symlink(d->fd, name, st);
	int rc;

	if (!target)
		return wh_fail(e, errno, c->l->path, d->path, name,
			       "cannot read symlink");
	rc = hu_treeout_symlink(&c->t, name, target, d->fd, st, e);
	free(target);
	return rc;
}

/* A non-directory, copied as it is (or linked to its first name). */
static int copy_plain(struct conv *c, const struct wh_dir *d,
		      const char *name, struct hu_error *e)
{
	struct stat st;
	int rc;

	if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return wh_fail(e, errno, c->l->path, d->path, name,
			       "cannot stat");
	progress(c);
	rc = hu_treeout_hardlink(&c->t, name, &st, e);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		return copy_file(c, d, name, &st, e);
	case S_IFLNK:
		return copy_symlink(c, d, name, &st, e);
	default:
		return hu_treeout_special(&c->t, name, d->fd, &st, e);
	}
}

/* ---- markers --------------------------------------------------------- */

/* Overlay xattr @what of source entry @name (NULL: @d itself) onto the
 * output entry, in the target namespace. */
static int copy_overlay_xattr(struct conv *c, const struct wh_dir *d,
			      const char *name, const char *what,
			      struct hu_error *e)
{
	char from[64], to[64];
	ssize_t len;
	char *v;
	int rc;

	hu_marker_xattr(HU_FMT_OVERLAY, c->l->userxattr, what, from,
			sizeof(from));
	hu_marker_xattr(HU_FMT_OVERLAY, c->to.userxattr, what, to, sizeof(to));
	if (wh_xattr_read(d->fd, name, from, &v, &len) < 0)
		return wh_fail(e, errno, c->l->path, d->path, name ? name : "",
			       "cannot read %s", from);
	if (!v)
		return 0;
	rc = hu_wr_setxattr_at(hu_treeout_fd(&c->t), name, to, v, len, 0);
	free(v);
	if (rc < 0)
		return wh_fail(e, errno, c->out, d->path, name ? name : "",
			       "cannot set %s", to);
	return 0;
}

static int copy_dir(void *ctx, struct wh_dir *d, struct hu_error *e)
{
	struct conv *c = ctx;
	enum hu_format s = c->l->format, t = c->to.format;
	bool overlay = s == HU_FMT_OVERLAY && t == HU_FMT_OVERLAY;
	int out;

	/* the root is the new layer's, made by hu_treeout_begin() */
	if (d->parent) {
		if (hu_treeout_dir(&c->t, d->name, e) < 0)
			return -1;
		progress(c);
	}
	out = hu_treeout_fd(&c->t);
	if (cv_dir_hides(c, d, e) < 0)
		return -1;
	if (d->opaque == HU_OPAQUE_YES || cv_made_opaque(c, d)) {
		if (wh_opaque_fd(&c->to, out, true, e) < 0)
			return wh_prefix(e, c->out, d->path);
		if (t == HU_FMT_OCI && (d->opq_file ?
		    cv_marker_times(d, HU_OCI_OPAQUE, out, HU_OCI_OPAQUE,
				    c->out, e) :
		    cv_opq_times(d, out, c->out, e)) < 0)
			return -1;
		if (d->opaque == HU_OPAQUE_YES && !cv_xattrs_kept(c))
			cv_report(c, HU_WH_OPAQUE, wh_dir_path(d), NULL,
				  HU_WH_CONVERTED);
	} else if (d->opaque == HU_OPAQUE_XWHITEOUTS && overlay &&
		   copy_overlay_xattr(c, d, NULL, "opaque", e) < 0) {
		return -1;
	}
	if (d->redirect && overlay) {
		if (copy_overlay_xattr(c, d, NULL, "redirect", e) < 0)
			return -1;
		if (!cv_xattrs_kept(c))
			cv_report(c, HU_WH_REDIRECT, wh_dir_path(d),
				  d->redirect, HU_WH_CONVERTED);
	}
	return 0;
}

static int copy_whiteout(struct conv *c, const struct wh_dir *d,
			 const struct wh_ent *ent, struct hu_error *e)
{
	enum hu_format t = c->to.format;
	enum hu_wh_action a = HU_WH_CONVERTED;
	enum hu_wh_kind kind = ent->xwhiteout ? HU_WH_XWHITEOUT :
				HU_WH_WHITEOUT;
	bool kept = cv_whiteout_kept(c, ent);

	if (!kept && cv_whiteout_action(c, d, ent, &a, e) < 0)
		return -1;
	if (a == HU_WH_DROPPED_HIDDEN ||
	    (c->l->format == HU_FMT_OCI && ent->twin && t != HU_FMT_OCI)) {
		/* nothing written: a twin directory is made opaque when it
		 * is met (or not, where all beneath is hidden already) */
	} else if (ent->xwhiteout && t == HU_FMT_OVERLAY) {
		if (copy_plain(c, d, ent->name, e) < 0 ||
		    copy_overlay_xattr(c, d, ent->name, "whiteout", e) < 0)
			return -1;
	} else {
		int out = hu_treeout_fd(&c->t);
		char wh[NAME_MAX + 8];

		if (hu_marker_add_whiteout(&c->to, t, out, ent->key, e) < 0)
			return wh_prefix(e, c->out, d->path);
		if (t == HU_FMT_OCI)	/* a name read from @d: it fits */
			(void)hu_oci_whiteout_name(wh, sizeof(wh), ent->key);
		else
			snprintf(wh, sizeof(wh), "%s", ent->key);
		if (cv_marker_times(d, ent->name, out, wh, c->out, e) < 0)
			return -1;
		progress(c);
	}
	if (kept)
		return 0;
	return cv_report_ent(c, d, kind, ent->key, NULL, a, e);
}

static int copy_overlay_file(struct conv *c, const struct wh_dir *d,
			     const struct wh_ent *ent, struct hu_error *e)
{
	char *redirect;
	bool metacopy;
	bool tell = !cv_xattrs_kept(c);
	int rc = 0;

	if (wh_file_overlay(c->l, d->fd, ent->name, &metacopy, &redirect,
			    e) < 0)
		return wh_prefix(e, c->l->path, d->path);
	if (metacopy &&
	    (rc = copy_overlay_xattr(c, d, ent->name, "metacopy", e)) == 0 &&
	    tell)
		rc = cv_report_ent(c, d, HU_WH_METACOPY, ent->key, NULL,
				   HU_WH_CONVERTED, e);
	if (rc == 0 && redirect &&
	    (rc = copy_overlay_xattr(c, d, ent->name, "redirect", e)) == 0 &&
	    tell)
		rc = cv_report_ent(c, d, HU_WH_REDIRECT, ent->key, redirect,
				   HU_WH_CONVERTED, e);
	free(redirect);
	return rc;
}

static int copy_entry(void *ctx, struct wh_dir *d, const struct wh_ent *ent,
		      struct hu_error *e)
{
	struct conv *c = ctx;

	if (ent->kind == HU_MARK_WHITEOUT)
		return copy_whiteout(c, d, ent, e);
	if (ent->kind == HU_MARK_META && c->to.format != HU_FMT_OCI)
		return cv_report_ent(c, d, HU_WH_META, ent->name, NULL,
				     HU_WH_DROPPED, e);
	if (S_ISDIR(ent->type))
		return 1;
	if (copy_plain(c, d, ent->name, e) < 0)
		return -1;
	if (S_ISREG(ent->type) && c->l->format == HU_FMT_OVERLAY &&
	    c->to.format == HU_FMT_OVERLAY)
		return copy_overlay_file(c, d, ent, e);
	return 0;
}

/* After its entries: the directory's own metadata; back to its parent. */
static int copy_dir_done(void *ctx, struct wh_dir *d, struct hu_error *e)
{
	struct conv *c = ctx;

	return hu_treeout_dir_done(&c->t, d->fd, &d->st, e);
}

int cv_copy(struct conv *c, struct hu_error *e)
{
	static const struct wh_walk_ops copy = {
		.dir_pre = copy_dir, .entry = copy_entry,
		.dir_post = copy_dir_done };
	int rc;

	rc = hu_treeout_open(&c->t, c->out, &convert_words, c->l, 1, e);
	c->t.cs.bytes = c->o->report ? c->o->report->bytes : NULL;
	/* the plan refuses what cannot be converted before anything is
	 * written, and is all a dry run does */
	if (rc == 0 && !c->plain)
		rc = wh_walk(c->l, &cv_plan_ops, c, e);
	if (rc == 0 && !c->o->dry_run) {
		if (!c->t.as_root)
			hu_report_warn(c->o->report, EPERM, c->out, NULL,
				       "not running as root: owners are not "
				       "kept");
		rc = hu_treeout_begin(&c->t, e);
		c->pass = CV_COPY;
		hu_report_phase(c->o->report, HU_PHASE_WRITING, c->out);
		if (rc == 0)
			rc = wh_walk(c->l, &copy, c, e);
	}
	return hu_treeout_end(&c->t, rc, e);
}
