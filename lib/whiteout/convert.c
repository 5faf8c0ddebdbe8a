/* SPDX-License-Identifier: MIT */
/*
 * whiteout convert: rewrite every marker of one layer in another format.
 *
 * Two passes over the layer.  The plan pass refuses what the target
 * cannot say (overlay redirects and metacopy outside overlay, union
 * whiteouts under user.*, and for a copy the entries that would read as
 * markers there) before anything is written, and is all a dry run does.
 * The write pass then works in place (convert_inplace.c) or writes a
 * whole new layer (convert_copy.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "whiteout/convert.h"

/* ---- what changes -------------------------------------------------------- */

bool cv_ns_changes(const struct conv *c)
{
	return c->to.userxattr != c->l->userxattr;
}

/* Does a whiteout of this entry's kind stay as it is? */
bool cv_whiteout_kept(const struct conv *c, const struct wh_ent *ent)
{
	enum hu_format s = c->l->format, t = c->to.format;

	if (s != t)
		return false;
	/* ns only matters where the whiteout carries an xattr */
	return s == HU_FMT_OCI || (s == HU_FMT_OVERLAY && !ent->xwhiteout) ||
	       !cv_ns_changes(c);
}

bool cv_xattrs_kept(const struct conv *c)
{
	return c->l->format == c->to.format &&
	       (c->l->format == HU_FMT_OCI || !cv_ns_changes(c));
}

void cv_report(struct conv *c, enum hu_wh_kind kind, const char *path,
	       const char *target, enum hu_wh_action a)
{
	struct hu_wh_marker m = { kind, path, target, c->l->format,
				  c->l->userxattr };

	/* Count and tell in the pass that does it (the plan, when dry). */
	if ((c->pass == CV_PLAN) != c->o->dry_run)
		return;
	if (a == HU_WH_DROPPED || a == HU_WH_DROPPED_HIDDEN)
		c->st->dropped++;
	else
		c->st->converted++;
	if (c->o->change)
		c->o->change(c->o->ctx, &m, a);
}

int cv_report_ent(struct conv *c, const struct wh_dir *d,
		  enum hu_wh_kind kind, const char *key, const char *target,
		  enum hu_wh_action a, struct hu_error *e)
{
	char *path = wh_ent_path(d, key);

	if (!path)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	cv_report(c, kind, path, target, a);
	free(path);
	return 0;
}

/*
 * An OCI whiteout with an entry of the same name (the next one) in its
 * directory: a directory becomes opaque, a non-directory needs nothing
 * (unless it is the target-format whiteout a stopped run left).
 */
int cv_twin_action(struct conv *c, const struct wh_dir *d,
		   const struct wh_ent *ent, enum hu_wh_action *a,
		   struct hu_error *e)
{
	const struct wh_ent *twin = ent + 1;
	enum hu_marker kind;
	const char *key;
	struct stat st;

	if (S_ISDIR(twin->type)) {
		*a = HU_WH_MADE_OPAQUE;
		return 0;
	}
	*a = HU_WH_DROPPED;
	if (c->pass == CV_COPY || (c->pass == CV_PLAN && c->out))
		return 0;
	if (fstatat(d->fd, twin->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return wh_fail(e, errno, c->l->path, d->path, twin->name,
			       "cannot stat");
	if (hu_marker_classify(&c->to, d->fd, twin->name, &st, false, &kind,
			       &key, e) < 0)
		return wh_prefix(e, c->l->path, d->path);
	if (kind == HU_MARK_WHITEOUT)
		*a = HU_WH_CONVERTED;
	return 0;
}

/* An OCI directory its parent also whites out becomes opaque, unless a
 * directory above already hides all beneath (that whiteout then goes). */
bool cv_made_opaque(const struct conv *c, const struct wh_dir *d)
{
	return d->twin && c->l->format == HU_FMT_OCI &&
	       c->to.format != HU_FMT_OCI &&
	       !(d->parent && d->parent->hides_beneath);
}

/* Is @d opaque in the target format, as a stopped run may have left it
 * (its source marker already gone)? */
static int half_opaque(const struct conv *c, const struct wh_dir *d,
		       bool *opaque, struct hu_error *e)
{
	enum hu_opaque op;
	struct stat st;

	*opaque = false;
	if (!c->half)
		return 0;
	if (c->to.format == HU_FMT_OCI) {
		if (fstatat(d->fd, HU_OCI_OPAQUE, &st,
			    AT_SYMLINK_NOFOLLOW) == 0)
			*opaque = true;
		else if (errno != ENOENT)
			return wh_fail(e, errno, c->l->path, d->path,
				       HU_OCI_OPAQUE, "cannot stat");
		return 0;
	}
	if (hu_marker_dir_opaque(&c->to, d->fd, &op, e) < 0)
		return wh_prefix(e, c->l->path, d->path);
	*opaque = op == HU_OPAQUE_YES;
	return 0;
}

/*
 * Nothing beneath @d shows through it in the target: it is opaque there,
 * or lies in such a directory without a redirect of its own (the lookup
 * stops at an opaque directory; only an overlay redirect starts it
 * again).  A whiteout in it hides nothing, and overlayfs lists it as an
 * entry that cannot be opened: it goes.
 */
int cv_dir_hides(const struct conv *c, struct wh_dir *d, struct hu_error *e)
{
	bool opaque;

	/* an opaque root hides the layers beneath in OCI only (the view's
	 * root_stops(): the kernel ignores an opaque root) */
	bool opaque_here = d->opaque == HU_OPAQUE_YES &&
			   (d->parent || c->l->format == HU_FMT_OCI);

	d->hides_beneath = opaque_here || cv_made_opaque(c, d) ||
			   (d->parent && d->parent->hides_beneath &&
			    !d->redirect);
	if (d->hides_beneath)
		return 0;
	if (half_opaque(c, d, &opaque, e) < 0)
		return -1;
	d->hides_beneath = opaque;
	return 0;
}

int cv_whiteout_action(struct conv *c, const struct wh_dir *d,
		       const struct wh_ent *ent, enum hu_wh_action *a,
		       struct hu_error *e)
{
	*a = HU_WH_CONVERTED;
	if (d->hides_beneath) {
		*a = HU_WH_DROPPED_HIDDEN;
		return 0;
	}
	return ent->twin ? cv_twin_action(c, d, ent, a, e) : 0;
}

/* The new marker @dst in @dfd takes the times of the old one, @src in
 * @d: a round trip between formats gives back the same layer.  Errors
 * name "@top/@d->path/@dst". */
int cv_marker_times(const struct wh_dir *d, const char *src, int dfd,
		    const char *dst, const char *top, struct hu_error *e)
{
	struct timespec ts[2];
	struct stat st;

	if (fstatat(d->fd, src, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return wh_fail(e, errno, top, d->path, src, "cannot stat");
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	if (hu_wr_utimensat(dfd, dst, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return wh_fail(e, errno, top, d->path, dst,
			       "cannot set times");
	return 0;
}

/* A .wh..wh..opq made for directory @d (in @dfd) takes its times. */
int cv_opq_times(const struct wh_dir *d, int dfd, const char *top,
		 struct hu_error *e)
{
	struct timespec ts[2] = { d->st.st_atim, d->st.st_mtim };

	if (hu_wr_utimensat(dfd, HU_OCI_OPAQUE, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return wh_fail(e, errno, top, d->path, HU_OCI_OPAQUE,
			       "cannot set times");
	return 0;
}

/* ---- the plan pass ------------------------------------------------------- */

static int refuse(struct conv *c, const struct wh_dir *d, const char *name,
		  const char *what, struct hu_error *e)
{
	return wh_fail(e, 0, c->l->path, d->path, name, "%s, which the %s "
		       "format cannot express: nothing was changed", what,
		       hu_format_name(c->to.format));
}

static int plan_dir(void *ctx, struct wh_dir *d, struct hu_error *e)
{
	struct conv *c = ctx;

	if (d->redirect && c->to.format != HU_FMT_OVERLAY)
		return refuse(c, d, "", "an overlay redirect", e);
	/* The root: OCI's opaque marker there hides every layer beneath
	 * (image-spec layer.md), the kernel ignores an opaque xattr there
	 * (so does the view).  Across that line the mark changes meaning. */
	if (!d->parent && d->opaque == HU_OPAQUE_YES &&
	    (c->l->format == HU_FMT_OCI) != (c->to.format == HU_FMT_OCI))
		return c->l->format == HU_FMT_OCI ?
			refuse(c, d, HU_OCI_OPAQUE, "an opaque marker on the "
			       "layer's root (it hides every layer beneath; "
			       "the kernel ignores an opaque root)", e) :
			wh_fail(e, 0, c->l->path, d->path, "", "an opaque mark "
				"on the layer's root, which hides nothing "
				"here but would hide every layer beneath in "
				"the oci format: clear it first ('hunion "
				"whiteout opaque --clear'): nothing was "
				"changed");
	if (cv_dir_hides(c, d, e) < 0)
		return -1;
	if (d->opaque == HU_OPAQUE_YES && !cv_xattrs_kept(c))
		cv_report(c, HU_WH_OPAQUE, wh_dir_path(d), NULL,
			  HU_WH_CONVERTED);
	if (d->redirect && !cv_xattrs_kept(c))
		cv_report(c, HU_WH_REDIRECT, wh_dir_path(d), d->redirect,
			  HU_WH_CONVERTED);
	return 0;
}

/* An ordinary entry that the target format would read as a marker. */
static int plan_lookalike(struct conv *c, const struct wh_dir *d,
			  const struct wh_ent *ent, struct hu_error *e)
{
	enum hu_format s = c->l->format, t = c->to.format;
	struct stat st;

	if (!c->out && hu_conv_temp_prefixed(ent->name))
		return wh_fail(e, 0, c->l->path, d->path, ent->name,
			       "an entry named like the temporary files of a "
			       "conversion in place: nothing was changed");

	if (t == HU_FMT_OCI && s != HU_FMT_OCI &&
	    hu_oci_is_marker(ent->name))
		return wh_fail(e, 0, c->l->path, d->path, ent->name,
			       "an ordinary entry that would read as an OCI "
			       "marker: nothing was changed");
	if (t != HU_FMT_OVERLAY || s == HU_FMT_OVERLAY || !S_ISCHR(ent->type))
		return 0;
	if (fstatat(d->fd, ent->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return wh_fail(e, errno, c->l->path, d->path, ent->name,
			       "cannot stat");
	if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0))
		return wh_fail(e, 0, c->l->path, d->path, ent->name,
			       "a character device 0/0, which would read as "
			       "an overlay whiteout: nothing was changed");
	return 0;
}

static int plan_file(struct conv *c, const struct wh_dir *d,
		     const struct wh_ent *ent, struct hu_error *e)
{
	char *redirect;
	bool metacopy;
	int rc = 0;

	if (wh_file_overlay(c->l, d->fd, ent->name, &metacopy, &redirect,
			    e) < 0)
		return wh_prefix(e, c->l->path, d->path);
	if ((metacopy || redirect) && c->to.format != HU_FMT_OVERLAY)
		rc = refuse(c, d, ent->name, metacopy ?
			    "an overlay metacopy file" :
			    "an overlay redirect", e);
	else if (metacopy && !cv_xattrs_kept(c))
		rc = cv_report_ent(c, d, HU_WH_METACOPY, ent->key, NULL,
				   HU_WH_CONVERTED, e);
	if (rc == 0 && redirect && !cv_xattrs_kept(c))
		rc = cv_report_ent(c, d, HU_WH_REDIRECT, ent->key, redirect,
				   HU_WH_CONVERTED, e);
	free(redirect);
	return rc;
}

static int plan_whiteout(struct conv *c, const struct wh_dir *d,
			 const struct wh_ent *ent, struct hu_error *e)
{
	enum hu_wh_action a = HU_WH_CONVERTED;
	bool union_out = c->to.format == HU_FMT_UNION;

	if (cv_whiteout_kept(c, ent))
		return 0;
	if (cv_whiteout_action(c, d, ent, &a, e) < 0)
		return -1;
	if (union_out && c->to.userxattr && a == HU_WH_CONVERTED)
		return wh_fail(e, 0, c->l->path, d->path, ent->key,
			       "a whiteout, which the union format cannot "
			       "write under user.* (Linux allows no user.* "
			       "xattrs on symlinks; use overlay or oci): "
			       "nothing was changed");
	return cv_report_ent(c, d, ent->xwhiteout ? HU_WH_XWHITEOUT :
			     HU_WH_WHITEOUT, ent->key, NULL, a, e);
}

static int plan_entry(void *ctx, struct wh_dir *d, const struct wh_ent *ent,
		      struct hu_error *e)
{
	struct conv *c = ctx;

	switch (ent->kind) {
	case HU_MARK_WHITEOUT:
		return plan_whiteout(c, d, ent, e);
	case HU_MARK_META:
		if (c->to.format == HU_FMT_OCI)
			return S_ISDIR(ent->type);
		return cv_report_ent(c, d, HU_WH_META, ent->name, NULL,
				     HU_WH_DROPPED, e);
	default:
		break;
	}
	/* In place too: after the first change, every target-format marker
	 * of the layer counts as one (convert_inplace.c); a half-converted
	 * layer holds only those the run made. */
	if (!c->half && plan_lookalike(c, d, ent, e) < 0)
		return -1;
	if (S_ISDIR(ent->type))
		return 1;
	return S_ISREG(ent->type) ? plan_file(c, d, ent, e) : 0;
}

/* ---- the driver ------------------------------------------------------- */

static int check_target(const struct hu_convert_opts *o, struct hu_error *e)
{
	if (o->to != HU_FMT_UNION && o->to != HU_FMT_OVERLAY &&
	    o->to != HU_FMT_OCI)
		return hu_error_set(e, EINVAL, NULL, "convert to what? (union, "
				    "overlay or oci)");
	return 0;
}

const struct wh_walk_ops cv_plan_ops = {
	.dir_pre = plan_dir, .entry = plan_entry };

/* A half-converted layer is finished to the format it was going to. */
static int check_half(const struct hu_layer *l, const char *out,
		      const struct hu_convert_opts *o, struct hu_error *e)
{
	bool user = o->to != HU_FMT_OCI && o->to_userxattr;
	bool want = l->conv_to != HU_FMT_OCI && l->conv_to_userxattr;

	if (!hu_layer_half(l))
		return 0;
	if (!out && o->to == l->conv_to && user == want)
		return 0;
	return hu_error_set(e, 0, l->path, "half-converted from %s to %s%s "
			    "by a run that stopped: finish it first with "
			    "'hunion whiteout convert --in-place --to=%s%s'",
			    hu_format_name(l->format),
			    hu_format_name(l->conv_to),
			    want ? " (user.*)" : "",
			    hu_format_name(l->conv_to),
			    want ? " --to-userxattr" : "");
}

int hu_wh_convert(const struct hu_layer *l, const char *out,
		  const struct hu_convert_opts *o,
		  struct hu_convert_stats *st, struct hu_error *e)
{
	struct hu_layer src = wh_layer_as(l, l->format, l->userxattr);
	struct conv c = { .l = &src, .o = o, .st = st, .out = out,
			  .pass = CV_PLAN, .half = hu_layer_half(l),
			  .half_l = l,
			  .seed = (unsigned)getpid() ^ (unsigned)time(NULL) };

	memset(st, 0, sizeof(*st));
	if (check_target(o, e) < 0 || check_half(l, out, o, e) < 0)
		return -1;
	/* The walks classify in the source format; the target's markers a
	 * stopped run made are known where they matter (convert_inplace.c) */
	src.conv_to = HU_FMT_AUTO;
	c.to = wh_layer_as(&src, o->to, o->to_userxattr);
	/* Its detection walked it whole (names_plain is never set before):
	 * the walks of the plan and of a conversion in place would meet
	 * nothing (one walk, not three). */
	c.plain = l->format == HU_FMT_NONE && l->names_plain && !c.half;
	if (out)
		return cv_copy(&c, e);
	if (l->unpacked)
		return hu_error_set(e, 0, l->path, "a tarball layer cannot be "
				    "converted in place: use -o");
	/* Before the plan: what it reads, another run may be changing. */
	if (!o->dry_run && hu_layer_lock_change(l, e) < 0)
		return -1;
	if (!c.plain && wh_walk(&src, &cv_plan_ops, &c, e) < 0)
		return -1;
	if (o->dry_run)
		return 0;
	c.pass = CV_INPLACE;
	if (!c.plain && wh_walk(&src, &cv_inplace_ops, &c, e) < 0)
		return -1;
	/* A record of the format fsck left names the target, also where
	 * nothing else changed (a layer whose markers are gone); before the
	 * last change, since till then the conversion record speaks. */
	if (hu_layer_record_convert(&src, &c.to, e) < 0) {
		hu_error_prefix(e, l->path);
		return -1;
	}
	/* the last change: the layer is read in the target format alone */
	if ((c.half || st->started) && hu_conv_record_clear(&src, &c.to, e) < 0)
		return -1;
	return 0;
}
