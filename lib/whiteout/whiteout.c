/* SPDX-License-Identifier: MIT */
/*
 * The markers of ONE layer by hand: the listing of 'whiteout ls' (a walk
 * of lwalk.c), and add / rm / opaque by a path relative to the layer
 * root, walked one component at a time without following symlinks.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "whiteout/whiteout.h"

const char *hu_wh_kind_name(enum hu_wh_kind k)
{
	static const char *const names[] = {
		[HU_WH_WHITEOUT] = "whiteout", [HU_WH_XWHITEOUT] = "xwhiteout",
		[HU_WH_OPAQUE] = "opaque", [HU_WH_REDIRECT] = "redirect",
		[HU_WH_METACOPY] = "metacopy", [HU_WH_META] = "meta",
	};

	return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

/* ---- ls ---------------------------------------------------------------- */

struct list {
	const struct hu_layer *l;
	hu_wh_fn fn;
	void *ctx;
};

static int emit(struct list *ls, enum hu_wh_kind kind, const char *path,
		const char *target, struct hu_error *e)
{
	struct hu_wh_marker m = { kind, path, target, ls->l->format,
				  ls->l->userxattr };

	return ls->fn(ls->ctx, &m, e) < 0 ? -1 : 0;
}

static int list_dir(void *ctx, struct wh_dir *d, struct hu_error *e)
{
	struct list *ls = ctx;

	if (d->opaque == HU_OPAQUE_YES &&
	    emit(ls, HU_WH_OPAQUE, wh_dir_path(d), NULL, e) < 0)
		return -1;
	if (d->redirect &&
	    emit(ls, HU_WH_REDIRECT, wh_dir_path(d), d->redirect, e) < 0)
		return -1;
	return 0;
}

static int list_entry(void *ctx, struct wh_dir *d, const struct wh_ent *ent,
		      struct hu_error *e)
{
	struct list *ls = ctx;
	char *path = NULL, *redirect = NULL;
	bool metacopy = false;
	int rc = 0;

	if (ent->kind == HU_MARK_META)
		return 0;
	if (ent->kind == HU_MARK_NONE && S_ISDIR(ent->type))
		return 1;
	if (ent->kind == HU_MARK_NONE && S_ISREG(ent->type) &&
	    wh_file_overlay(ls->l, d->fd, ent->name, &metacopy, &redirect,
			    e) < 0)
		return wh_prefix(e, ls->l->path, d->path);
	if (ent->kind == HU_MARK_NONE && !metacopy && !redirect)
		return 0;
	path = wh_ent_path(d, ent->key);
	if (!path)
		rc = hu_error_set(e, ENOMEM, NULL, "out of memory");
	else if (ent->kind == HU_MARK_WHITEOUT)
		rc = emit(ls, ent->xwhiteout ? HU_WH_XWHITEOUT :
			  HU_WH_WHITEOUT, path, NULL, e);
	if (rc == 0 && metacopy)
		rc = emit(ls, HU_WH_METACOPY, path, NULL, e);
	if (rc == 0 && redirect)
		rc = emit(ls, HU_WH_REDIRECT, path, redirect, e);
	free(path);
	free(redirect);
	return rc;
}

int hu_wh_list(const struct hu_layer *l, hu_wh_fn fn, void *ctx,
	       struct hu_error *e)
{
	static const struct wh_walk_ops ops = {
		.dir_pre = list_dir, .entry = list_entry };
	struct list ls = { l, fn, ctx };

	if (wh_check_whole(l, e) < 0)
		return -1;
	/* Detected NONE, the layer's detection walked it whole and met no
	 * marker of any format, nor a redirect or metacopy xattr: there is
	 * nothing to list.  Walking it again was half the time of an ls of
	 * a plain layer. */
	if (l->format == HU_FMT_NONE && !l->deferred)
		return 0;
	return wh_walk(l, &ops, &ls, e);
}

/* ---- add, rm, opaque by path ------------------------------------------- */

/* A path operand resolved to its parent directory. */
struct target {
	int dirfd;		/* the parent directory */
	char *rel;		/* normalised, for messages ("" for the root) */
	const char *dir;	/* @rel's parent part (a copy) */
	const char *leaf;	/* the last component ("" for the root) */
	char *buf;
};

static void target_free(const struct hu_layer *l, struct target *t)
{
	if (t->dirfd >= 0 && t->dirfd != l->fd)
		close(t->dirfd);
	free(t->rel);
	free(t->buf);
}

/* Split @path into components, refusing "..": "." and empty ones go. */
static int split(const struct hu_layer *l, const char *path,
		 struct target *t, struct hu_error *e)
{
	size_t len = strlen(path), o = 0;
	const char *s = path;

	t->rel = malloc(len + 1);
	t->buf = malloc(len + 2);
	if (!t->rel || !t->buf)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	while (*s) {
		const char *end = strchrnul(s, '/');
		size_t n = end - s;

		if (n == 2 && s[0] == '.' && s[1] == '.') {
			while (*path == '/')
				path++;
			return hu_error_setat(e, 0, l->path, path,
					      "'..' is not allowed in a path "
					      "inside a layer");
		}
		if (n && !(n == 1 && s[0] == '.')) {
			if (o)
				t->rel[o++] = '/';
			memcpy(t->rel + o, s, n);
			o += n;
		}
		s = *end ? end + 1 : end;
	}
	t->rel[o] = '\0';
	return 0;
}

/* Why component @comp of @t (the path so far in t->dir) cannot be
 * entered from @fd. */
static void component_fail(const struct hu_layer *l, const struct target *t,
			   int fd, const char *comp, struct hu_error *e)
{
	int err = errno;
	struct stat st;

	if (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode))
		hu_error_setat(e, 0, l->path, t->rel,
			       "'%s' is a symlink, not followed", t->dir);
	else
		hu_error_setat(e, err, l->path, t->rel,
			       "cannot open directory '%s'", t->dir);
}

/* Open the parent directory of @t one component at a time, never
 * following a symlink. */
static int open_parent(const struct hu_layer *l, struct target *t,
		       struct hu_error *e)
{
	char *comp = t->buf;
	int fd = l->fd, next = l->fd;

	while (*t->dir && *comp && next >= 0) {
		char *end = strchrnul(comp, '/'), saved = *end;

		*end = '\0';		/* t->dir: the path up to here */
		next = hu_open_dir_at(fd, comp);
		if (next < 0)
			component_fail(l, t, fd, comp, e);
		*end = saved;
		if (fd != l->fd)
			close(fd);
		fd = next;
		comp = *end ? end + 1 : end;
	}
	t->dirfd = fd;
	return fd < 0 ? -1 : 0;
}

static int resolve(const struct hu_layer *l, const char *path,
		   struct target *t, struct hu_error *e)
{
	char *slash;

	memset(t, 0, sizeof(*t));
	t->dirfd = -1;
	if (split(l, path, t, e) < 0)
		return -1;
	strcpy(t->buf, t->rel);
	slash = strrchr(t->buf, '/');
	t->leaf = slash ? slash + 1 : t->buf;
	t->dir = slash ? t->buf : "";
	if (slash)
		*slash = '\0';
	return open_parent(l, t, e);
}

static int target_fail(struct hu_error *e, const struct hu_layer *l,
		       const struct target *t, int err, const char *msg)
{
	return hu_error_setat(e, err, l->path, t->rel, "%s", msg);
}

/* Errors of marker.c name the entry in the parent: add the rest. */
static int marker_fail(struct hu_error *e, const struct hu_layer *l,
		       const struct target *t)
{
	return wh_prefix(e, l->path, t->dir);
}

int hu_wh_write_format(const struct hu_layer *l, enum hu_format want,
		       enum hu_format *out, struct hu_error *e)
{
	if (l->format == HU_FMT_NONE) {
		*out = want == HU_FMT_AUTO ? hu_mount_layer_format() : want;
		return 0;
	}
	if (want != HU_FMT_AUTO && want != l->format)
		return hu_error_set(e, 0, l->path, "a layer in the %s format: "
				    "%s markers would mix formats (convert "
				    "it with 'hunion whiteout convert')",
				    hu_format_name(l->format),
				    hu_format_name(want));
	*out = l->format;
	return 0;
}

/* Is @name in @dirfd a whiteout in @w's format?  (-1: error, errno) */
static int is_whiteout(const struct hu_layer *w, int dirfd, const char *name,
		       const struct stat *st, struct hu_error *e)
{
	enum hu_opaque op = HU_OPAQUE_NO;
	enum hu_marker kind;
	const char *key;

	if (w->format == HU_FMT_OVERLAY &&
	    hu_marker_dir_opaque(w, dirfd, &op, e) < 0)
		return -1;
	if (hu_marker_classify(w, dirfd, name, st,
			       op == HU_OPAQUE_XWHITEOUTS, &kind, &key,
			       e) < 0)
		return -1;
	return kind == HU_MARK_WHITEOUT;
}

static int wh_add(const struct hu_layer *l, enum hu_format f,
		  const char *path, struct hu_error *e)
{
	char wh[NAME_MAX + 8];
	struct hu_layer w;
	struct target t = { .dirfd = -1 };
	struct stat st;
	int rc = -1;

	if (hu_wh_write_format(l, f, &f, e) < 0 || resolve(l, path, &t, e) < 0)
		goto out;
	w = wh_layer_as(l, f, l->userxattr);
	if (!*t.leaf) {
		target_fail(e, l, &t, 0, "the layer root cannot be whited out");
		goto out;
	}
	if (f == HU_FMT_OCI) {
		if (hu_oci_is_marker(t.leaf)) {
			target_fail(e, l, &t, 0, "a name starting with .wh. "
				    "cannot be whited out in the oci format");
			goto out;
		}
		if (hu_oci_whiteout_name(wh, sizeof(wh), t.leaf) &&
		    fstatat(t.dirfd, wh, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			rc = 1;
			goto out;
		}
	}
	if (fstatat(t.dirfd, t.leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		rc = f == HU_FMT_OCI ? 0 :
			is_whiteout(&w, t.dirfd, t.leaf, &st, e);
		if (rc < 0)
			marker_fail(e, l, &t);
		else if (rc == 0)
			target_fail(e, l, &t, 0, "exists; remove it first");
		rc = rc > 0 ? 1 : -1;
		goto out;
	}
	if (errno != ENOENT) {
		target_fail(e, l, &t, errno, "cannot stat");
		goto out;
	}
	rc = hu_marker_add_whiteout(&w, f, t.dirfd, t.leaf, e);
	if (rc < 0)
		marker_fail(e, l, &t);
out:
	target_free(l, &t);
	return rc;
}

static int wh_remove(const struct hu_layer *l, const char *path,
		     struct hu_error *e)
{
	char wh[NAME_MAX + 8];
	const char *name;
	struct target t = { .dirfd = -1 };
	struct stat st;
	int rc = -1;

	if (resolve(l, path, &t, e) < 0)
		goto out;
	name = t.leaf;
	if (l->format == HU_FMT_OCI) {
		if (!*t.leaf || hu_oci_is_marker(t.leaf) ||
		    !hu_oci_whiteout_name(wh, sizeof(wh), t.leaf)) {
			target_fail(e, l, &t, 0, "not a whiteout");
			goto out;
		}
		name = wh;
	}
	if (!*name || fstatat(t.dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		target_fail(e, l, &t, *name ? errno : 0, "not a whiteout");
		goto out;
	}
	if (l->format != HU_FMT_OCI) {
		rc = is_whiteout(l, t.dirfd, name, &st, e);
		if (rc <= 0) {
			if (rc == 0)
				target_fail(e, l, &t, 0, "not a whiteout");
			else
				marker_fail(e, l, &t);
			rc = -1;
			goto out;
		}
	}
	rc = hu_wr_unlinkat(t.dirfd, name, 0);
	if (rc < 0)
		hu_error_setat(e, errno, l->path, t.rel, "cannot remove %s",
			       l->format == HU_FMT_OCI ? wh : "the whiteout");
out:
	target_free(l, &t);
	return rc;
}

int wh_opaque_fd(const struct hu_layer *w, int fd, bool opaque,
		 struct hu_error *e)
{
	/* The directory itself, by its fd: no name to go wrong. */
	if (hu_marker_set_opaque(w, w->format, fd, ".", opaque, e) == 0)
		return 0;
	/* marker.c names "." or "./.wh..wh..opq": relative to @fd */
	if (e->path && !strncmp(e->path, "./", 2))
		memmove(e->path, e->path + 2, strlen(e->path) - 1);
	else if (e->path && !strcmp(e->path, "."))
		e->path[0] = '\0';
	return -1;
}

/* Is directory @fd opaque in @w's format? */
static int dir_is_opaque(const struct hu_layer *w, int fd, bool *yes,
			 struct hu_error *e)
{
	enum hu_opaque op;
	struct stat st;

	if (w->format == HU_FMT_OCI) {
		*yes = fstatat(fd, HU_OCI_OPAQUE, &st,
			       AT_SYMLINK_NOFOLLOW) == 0;
		if (!*yes && errno != ENOENT)
			return hu_error_set(e, errno, HU_OCI_OPAQUE,
					    "cannot stat");
		return 0;
	}
	if (hu_marker_dir_opaque(w, fd, &op, e) < 0)
		return -1;
	*yes = op == HU_OPAQUE_YES;
	return 0;
}

static int wh_set_opaque(const struct hu_layer *l, enum hu_format f,
			 const char *path, bool opaque, struct hu_error *e)
{
	struct hu_layer w;
	struct target t = { .dirfd = -1 };
	bool now;
	int fd = -1, rc = -1;

	if (hu_wh_write_format(l, f, &f, e) < 0 || resolve(l, path, &t, e) < 0)
		goto out;
	w = wh_layer_as(l, f, l->userxattr);
	fd = hu_open_dir_at(t.dirfd, *t.leaf ? t.leaf : ".");
	if (fd < 0) {
		target_fail(e, l, &t, errno == ELOOP ? ENOTDIR : errno,
			    "cannot open directory");
		goto out;
	}
	if (dir_is_opaque(&w, fd, &now, e) < 0) {
		wh_prefix(e, l->path, t.rel);
		goto out;
	}
	if (now == opaque) {
		rc = 1;
		goto out;
	}
	rc = wh_opaque_fd(&w, fd, opaque, e);
	if (rc < 0)
		wh_prefix(e, l->path, t.rel);
out:
	if (fd >= 0)
		close(fd);
	target_free(l, &t);
	return rc;
}

/* Dry runs live in the write wrapper: switch it on around one edit. */
enum edit { EDIT_ADD, EDIT_RM, EDIT_SET, EDIT_CLEAR };

static int edit(const struct hu_layer *l, const struct hu_wh_edit *o,
		enum edit op, const char *path, struct hu_error *e)
{
	bool was = hu_wr_dry_run();
	int rc;

	if (l->unpacked)
		return hu_error_set(e, 0, l->path, "a tarball layer cannot be "
				    "changed in place");
	if (wh_check_whole(l, e) < 0)
		return -1;
	hu_wr_set_dry_run(was || o->dry_run);
	if (op == EDIT_ADD)
		rc = wh_add(l, o->format, path, e);
	else if (op == EDIT_RM)
		rc = wh_remove(l, path, e);
	else
		rc = wh_set_opaque(l, o->format, path, op == EDIT_SET, e);
	hu_wr_set_dry_run(was);
	return rc;
}

int hu_wh_add(const struct hu_layer *l, const struct hu_wh_edit *o,
	      const char *path, struct hu_error *e)
{
	return edit(l, o, EDIT_ADD, path, e);
}

int hu_wh_remove(const struct hu_layer *l, const struct hu_wh_edit *o,
		 const char *path, struct hu_error *e)
{
	return edit(l, o, EDIT_RM, path, e);
}

int hu_wh_set_opaque(const struct hu_layer *l, const struct hu_wh_edit *o,
		     const char *path, bool opaque, struct hu_error *e)
{
	return edit(l, o, opaque ? EDIT_SET : EDIT_CLEAR, path, e);
}
