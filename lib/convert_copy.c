/* SPDX-License-Identifier: MIT */
/*
 * whiteout convert -o NEWLAYER: a copy of the whole layer with every
 * marker written in the target format, built as ".NEWLAYER.hunion-XXXXXX"
 * beside NEWLAYER, renamed into place (RENAME_NOREPLACE) when complete and
 * removed on failure.  Data, hard links, modes, owners (as root), times
 * and public xattrs are kept, as merge -o keeps them.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "convert.h"

/* Errors of the output side name "NEWLAYER/PATH/NAME". */
static int out_fail(struct conv *c, const struct wh_dir *d, const char *name,
		    int err, const char *what, struct hu_error *e)
{
	return wh_fail(e, err, c->out, d->path, name, "%s", what);
}

/* The same for an error of copy.c, which names no path. */
static int out_prefix(struct conv *c, const struct wh_dir *d,
		      const char *name, struct hu_error *e)
{
	hu_error_prefix(e, name);
	return wh_prefix(e, c->out, d->path);
}

static void progress(struct conv *c)
{
	const struct hu_report *r = c->o->report;

	if (++c->st->entries % 4096 == 0 && r && r->progress)
		r->progress(r->ctx, c->st->entries);
}

/* ---- one entry's metadata ------------------------------------------------ */

/* Owner, mode, xattrs and times of a directory or regular file @fd. */
static int meta_fd(struct conv *c, const struct wh_dir *d, const char *name,
		   int src, int fd, const struct stat *st, struct hu_error *e)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };

	/* chown first: it clears setuid/setgid and file capabilities. */
	if (c->as_root && hu_wr_fchownat(fd, "", st->st_uid, st->st_gid,
					 AT_EMPTY_PATH) < 0)
		return out_fail(c, d, name, errno, "cannot set owner", e);
	if (hu_wr_fchmod(fd, st->st_mode & 07777) < 0)
		return out_fail(c, d, name, errno, "cannot set mode", e);
	if (hu_copy_xattrs(src, NULL, fd, NULL, e) < 0)
		return out_prefix(c, d, name, e);
	if (hu_wr_futimens(fd, ts) < 0)
		return out_fail(c, d, name, errno, "cannot set times", e);
	return 0;
}

/* The same for @name in @d, never opened (symlink, device, fifo). */
static int meta_at(struct conv *c, const struct wh_dir *d, const char *name,
		   const struct stat *st, struct hu_error *e)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };

	if (c->as_root && hu_wr_fchownat(d->out, name, st->st_uid, st->st_gid,
					 AT_SYMLINK_NOFOLLOW) < 0)
		return out_fail(c, d, name, errno, "cannot set owner", e);
	if (!S_ISLNK(st->st_mode) &&
	    hu_wr_fchmodat(d->out, name, st->st_mode & 07777) < 0)
		return out_fail(c, d, name, errno, "cannot set mode", e);
	if (hu_copy_xattrs(d->fd, name, d->out, name, e) < 0)
		return out_prefix(c, d, name, e);
	if (hu_wr_utimensat(d->out, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return out_fail(c, d, name, errno, "cannot set times", e);
	return 0;
}

/* ---- ordinary entries ------------------------------------------------ */

static int copy_file(struct conv *c, const struct wh_dir *d,
		     const char *name, const struct stat *st,
		     struct hu_error *e)
{
	int src, fd, rc = -1;

	src = openat(d->fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (src < 0)
		return wh_fail(e, errno, c->l->path, d->path, name,
			       "cannot open");
	fd = hu_wr_create(d->out, name, 0600);
	if (fd < 0) {
		out_fail(c, d, name, errno, "cannot create", e);
		goto out_src;
	}
	if (hu_copy_data(&c->cs, src, st, fd, e) < 0) {
		out_prefix(c, d, name, e);
		goto out_fd;
	}
	rc = meta_fd(c, d, name, src, fd, st, e);
out_fd:
	close(fd);
out_src:
	close(src);
	return rc;
}

static int copy_symlink(struct conv *c, const struct wh_dir *d,
			const char *name, const struct stat *st,
			struct hu_error *e)
{
	size_t size = st->st_size + 1;
	char *target = malloc(size);
	ssize_t n;

	if (!target)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	n = readlinkat(d->fd, name, target, size);
	if (n < 0 || (size_t)n >= size) {
		free(target);
		return wh_fail(e, n < 0 ? errno : EAGAIN, c->l->path, d->path,
			       name, "cannot read symlink");
	}
	target[n] = '\0';
	n = hu_wr_symlinkat(target, d->out, name);
	free(target);
	if (n < 0)
		return out_fail(c, d, name, errno, "cannot create symlink", e);
	return meta_at(c, d, name, st, e);
}

/* A second name of an inode already written: a link to the first. */
static int link_again(struct conv *c, const struct wh_dir *d,
		      const char *name, const struct stat *st, bool *done,
		      struct hu_error *e)
{
	const char *first;
	char *p;

	*done = false;
	if (st->st_nlink < 2)
		return 0;
	first = hu_linkmap_get(&c->links, st->st_dev, st->st_ino);
	if (first) {
		if (hu_linkat_path(c->rootfd, first, d->out, name) < 0)
			return out_fail(c, d, name, errno,
					"cannot create hard link", e);
		*done = true;
		return 0;
	}
	p = hu_path_join(d->path, name);
	if (!p || hu_linkmap_put(&c->links, st->st_dev, st->st_ino, p) < 0) {
		free(p);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	return 0;
}

/* A non-directory, copied as it is. */
static int copy_plain(struct conv *c, const struct wh_dir *d,
		      const char *name, struct hu_error *e)
{
	struct stat st;
	bool linked;

	if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return wh_fail(e, errno, c->l->path, d->path, name,
			       "cannot stat");
	progress(c);
	if (link_again(c, d, name, &st, &linked, e) < 0 || linked)
		return linked ? 0 : -1;
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		return copy_file(c, d, name, &st, e);
	case S_IFLNK:
		return copy_symlink(c, d, name, &st, e);
	default:
		if (hu_wr_mknodat(d->out, name, st.st_mode & S_IFMT,
				  st.st_rdev) < 0)
			return out_fail(c, d, name, errno, "cannot create", e);
		return meta_at(c, d, name, &st, e);
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
	rc = hu_wr_setxattr_at(d->out, name, to, v, len, 0);
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

	if (!d->parent) {
		d->out = dup(c->rootfd);
	} else {
		if (hu_wr_mkdirat(d->parent->out, d->name, 0700) < 0)
			return out_fail(c, d->parent, d->name, errno,
					"cannot create directory", e);
		d->out = hu_open_dir_at(d->parent->out, d->name);
		progress(c);
	}
	if (d->out < 0)
		return out_fail(c, d, "", errno, "cannot open directory", e);
	if (d->opaque == HU_OPAQUE_YES ||
	    (d->twin && s == HU_FMT_OCI && t != HU_FMT_OCI)) {
		if (wh_opaque_fd(&c->to, d->out, true, e) < 0)
			return wh_prefix(e, c->out, d->path);
		if (t == HU_FMT_OCI && (d->opq_file ?
		    cv_marker_times(d, HU_OCI_OPAQUE, d->out, HU_OCI_OPAQUE,
				    c->out, e) :
		    cv_opq_times(d, d->out, c->out, e)) < 0)
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

	if (c->l->format == HU_FMT_OCI && ent->twin && t != HU_FMT_OCI) {
		/* the directory is made opaque when it is met */
		if (cv_twin_action(c, d, ent, &a, e) < 0)
			return -1;
	} else if (ent->xwhiteout && t == HU_FMT_OVERLAY) {
		if (copy_plain(c, d, ent->name, e) < 0 ||
		    copy_overlay_xattr(c, d, ent->name, "whiteout", e) < 0)
			return -1;
	} else {
		char wh[NAME_MAX + 8];

		if (hu_marker_add_whiteout(&c->to, t, d->out, ent->key, e) < 0)
			return wh_prefix(e, c->out, d->path);
		snprintf(wh, sizeof(wh), "%s%s", t == HU_FMT_OCI ?
			 HU_OCI_WH_PREFIX : "", ent->key);
		if (cv_marker_times(d, ent->name, d->out, wh, c->out, e) < 0)
			return -1;
		progress(c);
	}
	if (cv_whiteout_kept(c, ent))
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

/* After its entries: the directory's own metadata (now, so that creating
 * the entries does not change its times). */
static int copy_dir_done(void *ctx, struct wh_dir *d, struct hu_error *e)
{
	struct conv *c = ctx;

	return meta_fd(c, d, "", d->fd, d->out, &d->st, e);
}

/* ---- the new layer beside NEWLAYER ------------------------------------- */

/* Refuse an output inside the layer: walk up from its parent directory
 * to the filesystem root, comparing each directory with the layer root. */
static int check_not_in_layer(const struct hu_layer *l, int parentfd,
			      const char *out, struct hu_error *e)
{
	struct stat st, up;
	int fd = dup(parentfd), next;

	if (fd < 0)
		return hu_error_set(e, errno, out, "cannot open parent");
	while (fstat(fd, &st) == 0) {
		if (st.st_dev == l->dev && st.st_ino == l->ino) {
			close(fd);
			return hu_error_set(e, 0, out, "lies inside layer %s",
					    l->path);
		}
		next = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (next < 0 || fstat(next, &up) < 0 ||
		    (up.st_dev == st.st_dev && up.st_ino == st.st_ino)) {
			if (next >= 0)
				close(next);
			break;
		}
		close(fd);
		fd = next;
	}
	close(fd);
	return 0;
}

/* The parent of @out, open, and @out's last component; @out must not
 * exist. */
static int open_parent(const char *out, int *parentfd, char **base,
		       struct hu_error *e)
{
	char *a = strdup(out), *b = strdup(out);
	const char *dir, *name;
	struct stat st;
	int rc = -1;

	*parentfd = -1;
	*base = NULL;
	if (!a || !b) {
		hu_error_set(e, ENOMEM, out, "out of memory");
		goto out;
	}
	dir = dirname(a);
	name = basename(b);
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..") ||
	    !strcmp(name, "/")) {
		hu_error_set(e, EINVAL, out, "not a usable name for a layer");
		goto out;
	}
	*parentfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*parentfd < 0) {
		hu_error_set(e, errno, dir, "cannot open the new layer's "
			     "parent");
		goto out;
	}
	if (fstatat(*parentfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		hu_error_set(e, EEXIST, out, "the new layer already exists");
		goto out;
	}
	if (errno != ENOENT) {
		hu_error_set(e, errno, out, "cannot check the new layer");
		goto out;
	}
	*base = strdup(name);
	rc = *base ? 0 : hu_error_set(e, ENOMEM, out, "out of memory");
out:
	if (rc < 0 && *parentfd >= 0) {
		close(*parentfd);
		*parentfd = -1;
	}
	free(a);
	free(b);
	return rc;
}

/* The temporary directory ".BASE.hunion-XXXXXX" beside the new layer. */
static int make_temp(struct conv *c, int parentfd, const char *base,
		     char **tmp, struct hu_error *e)
{
	size_t len = strlen(base) + 32;

	*tmp = malloc(len);
	if (!*tmp)
		return hu_error_set(e, ENOMEM, c->out, "out of memory");
	for (int tries = 0; tries < 100; tries++) {
		c->seed = c->seed * 1103515245u + 12345u;
		snprintf(*tmp, len, ".%s.hunion-%06x", base,
			 c->seed & 0xffffff);
		if (hu_wr_mkdirat(parentfd, *tmp, 0700) == 0)
			return 0;
		if (errno != EEXIST)
			break;
	}
	hu_error_set(e, errno, c->out, "cannot create the new layer");
	free(*tmp);
	*tmp = NULL;
	return -1;
}

int cv_copy(struct conv *c, struct hu_error *e)
{
	static const struct wh_walk_ops copy = {
		.dir_pre = copy_dir, .entry = copy_entry,
		.dir_post = copy_dir_done };
	char *base = NULL, *tmp = NULL;
	int parentfd, rc = -1;

	c->rootfd = -1;
	c->as_root = geteuid() == 0;
	if (open_parent(c->out, &parentfd, &base, e) < 0)
		return -1;
	if (check_not_in_layer(c->l, parentfd, c->out, e) < 0 ||
	    wh_walk(c->l, &cv_plan_ops, c, e) < 0)
		goto out;
	if (c->o->dry_run) {
		rc = 0;
		goto out;
	}
	if (!c->as_root)
		hu_report_warn(c->o->report, EPERM, c->out, NULL,
			       "not running as root: owners are not kept");
	if (make_temp(c, parentfd, base, &tmp, e) < 0)
		goto out;
	c->rootfd = hu_open_dir_at(parentfd, tmp);
	if (c->rootfd < 0) {
		hu_error_set(e, errno, c->out, "cannot open the new layer");
		goto out_tmp;
	}
	c->pass = CV_COPY;
	rc = wh_walk(c->l, &copy, c, e);
	if (rc == 0 && hu_wr_renameat2(parentfd, tmp, parentfd, base,
				       RENAME_NOREPLACE) < 0)
		rc = hu_error_set(e, errno, c->out, "cannot move the new layer "
				  "into place");
out_tmp:
	if (rc < 0)
		(void)hu_rmtree(parentfd, tmp);
out:
	if (c->rootfd >= 0)
		close(c->rootfd);
	hu_linkmap_free(&c->links);
	free(tmp);
	free(base);
	close(parentfd);
	return rc;
}
