/* SPDX-License-Identifier: MIT */
/*
 * The walk of ONE layer (not the merged view), for the whiteout commands:
 * each directory read once, its entries classified in the layer's format
 * and sorted (an OCI whiteout by the name it hides), one open fd per
 * level, never following a symlink.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "whiteout/whiteout.h"

/* ---- errors and paths ---------------------------------------------------- */

int wh_prefix(struct hu_error *e, const char *top, const char *dir)
{
	hu_error_prefix(e, dir);
	hu_error_prefix(e, top);
	return -1;
}

int wh_fail(struct hu_error *e, int err, const char *top, const char *dir,
	    const char *name, const char *fmt, ...)
{
	char *msg;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	hu_error_set(e, err, name, "%s", msg ? msg : "out of memory");
	free(msg);
	return wh_prefix(e, top, dir);
}

const char *wh_dir_path(const struct wh_dir *d)
{
	return *d->path ? d->path : ".";
}

char *wh_ent_path(const struct wh_dir *d, const char *key)
{
	return hu_path_join(d->path, key);
}

int wh_check_whole(const struct hu_layer *l, struct hu_error *e)
{
	if (!hu_layer_half(l))
		return 0;
	return hu_error_set(e, 0, l->path, "half-converted from %s to %s by "
			    "a 'whiteout convert --in-place' that stopped: "
			    "run it again to finish",
			    hu_format_name(l->format),
			    hu_format_name(l->conv_to));
}

struct hu_layer wh_layer_as(const struct hu_layer *l, enum hu_format f,
			    bool userxattr)
{
	struct hu_layer as = *l;

	as.format = f;
	as.userxattr = userxattr;
	return as;
}

/* ---- reading one directory ------------------------------------------------ */

int wh_xattr_read(int dirfd, const char *name, const char *attr, char **v,
		  ssize_t *len)
{
	ssize_t n;

	*v = NULL;
	*len = 0;
	for (;;) {
		n = hu_lgetxattr_at(dirfd, name, attr, NULL, 0);
		if (n < 0)
			return (errno == ENODATA || errno == ENOTSUP) ? 0 : -1;
		*v = malloc(n + 1);
		if (!*v)
			return -1;
		*len = hu_lgetxattr_at(dirfd, name, attr, *v, n);
		if (*len >= 0) {
			(*v)[*len] = '\0';
			return 0;
		}
		free(*v);
		*v = NULL;
		if (errno != ERANGE)
			return -1;	/* else it grew in between: again */
	}
}

int wh_file_overlay(const struct hu_layer *l, int dirfd, const char *name,
		    bool *metacopy, char **redirect, struct hu_error *e)
{
	char attr[64];
	ssize_t len;

	*metacopy = false;
	*redirect = NULL;
	if (l->format != HU_FMT_OVERLAY)
		return 0;
	hu_marker_xattr(HU_FMT_OVERLAY, l->userxattr, "metacopy", attr,
			sizeof(attr));
	if (hu_lgetxattr_at(dirfd, name, attr, NULL, 0) >= 0)
		*metacopy = true;
	else if (errno != ENODATA && errno != ENOTSUP)
		return hu_error_set(e, errno, name, "cannot read %s", attr);
	hu_marker_xattr(HU_FMT_OVERLAY, l->userxattr, "redirect", attr,
			sizeof(attr));
	if (wh_xattr_read(dirfd, name, attr, redirect, &len) < 0)
		return hu_error_set(e, errno, name, "cannot read %s", attr);
	return 0;
}

bool wh_dir_may_hold(const struct wh_dir *d, const char *suffix)
{
	size_t n = strlen(suffix);

	if (!d->xlisted)
		return true;
	for (const char *a = d->xattrs; a && a < d->xattrs + d->xlen;
	     a += strlen(a) + 1) {
		size_t k = strlen(a);

		if (k >= n && memcmp(a + k - n, suffix, n) == 0)
			return true;
	}
	return false;
}

/* The directory's xattr names, in d->xattrs: one listing, where each
 * marker read would be a call of its own, most failing (ENODATA). */
static int list_xattrs(struct wh_dir *d, struct hu_error *e)
{
	char small[512], *list;
	ssize_t len = hu_xattr_names(d->fd, NULL, small, sizeof(small), &list);

	if (len < 0)
		return hu_error_set(e, errno, NULL, "cannot list xattrs");
	if (len > 0 && list == small) {
		list = malloc(len);
		if (!list)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		memcpy(list, small, len);
	}
	d->xattrs = len > 0 ? list : NULL;
	d->xlen = len;
	d->xlisted = true;
	return 0;
}

/* The directory's own markers: opaque state and overlay redirect. */
static int scan_self(const struct hu_layer *l, struct wh_dir *d,
		     struct hu_error *e)
{
	char attr[64];
	struct stat st;
	ssize_t len;

	if (fstat(d->fd, &d->st) < 0)
		return hu_error_set(e, errno, NULL, "cannot stat directory");
	/* A deferred layer's too: its walk probes them (fsck.c). */
	if (l->format == HU_FMT_UNION || l->format == HU_FMT_OVERLAY ||
	    l->deferred) {
		if (list_xattrs(d, e) < 0)
			return -1;
	}
	if (l->format == HU_FMT_OCI) {
		if (fstatat(d->fd, HU_OCI_OPAQUE, &st,
			    AT_SYMLINK_NOFOLLOW) == 0)
			d->opq_file = true;
		else if (errno != ENOENT)
			return hu_error_set(e, errno, HU_OCI_OPAQUE,
					    "cannot stat");
		d->opaque = d->opq_file ? HU_OPAQUE_YES : HU_OPAQUE_NO;
		return 0;
	}
	d->opaque = HU_OPAQUE_NO;
	if (wh_dir_may_hold(d, ".opaque") &&
	    hu_marker_dir_opaque(l, d->fd, &d->opaque, e) < 0)
		return -1;
	if (l->format != HU_FMT_OVERLAY || !wh_dir_may_hold(d, ".redirect"))
		return 0;
	hu_marker_xattr(HU_FMT_OVERLAY, l->userxattr, "redirect", attr,
			sizeof(attr));
	if (wh_xattr_read(d->fd, NULL, attr, &d->redirect, &len) < 0)
		return hu_error_set(e, errno, NULL, "cannot read %s", attr);
	return 0;
}

static mode_t dt_to_type(unsigned char t)
{
	return t == DT_UNKNOWN ? 0 : DTTOIF(t);
}

/* Does classifying this entry in @l's format need its lstat? */
static bool needs_stat(const struct hu_layer *l, mode_t type, bool xwh)
{
	switch (l->format) {
	case HU_FMT_UNION:
		return !type || S_ISLNK(type);
	case HU_FMT_OVERLAY:
		return !type || S_ISCHR(type) || (xwh && S_ISREG(type));
	default:
		return !type;
	}
}

/* An OCI whiteout name that hides nothing, in a layer read as OCI. */
static bool oci_invalid(const struct hu_layer *l, const char *name)
{
	const char *hidden = hu_oci_hidden(name);

	return hu_layer_is(l, HU_FMT_OCI) && hidden &&
	       hu_oci_hides_nothing(hidden);
}

static int classify(const struct hu_layer *l, struct wh_dir *d,
		    struct wh_ent *ent, unsigned char dtype,
		    bool oci_invalid_ok, struct hu_error *e)
{
	/* As in the view: the kernel's lookup honours an xattr whiteout
	 * wherever it is, not only under an "x" parent. */
	bool xwh = l->format == HU_FMT_OVERLAY;
	struct stat st = { .st_mode = dt_to_type(dtype) };

	ent->type = st.st_mode;
	if (needs_stat(l, ent->type, xwh)) {
		if (fstatat(d->fd, ent->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return hu_error_set(e, errno, ent->name,
					    "cannot stat");
		ent->type = st.st_mode & S_IFMT;
	}
	if (oci_invalid_ok && oci_invalid(l, ent->name)) {
		ent->kind = HU_MARK_NONE;
		ent->key = ent->name;
		return 0;
	}
	if (hu_marker_classify(l, d->fd, ent->name, &st, xwh, &ent->kind,
			       &ent->key, e) < 0)
		return -1;
	ent->xwhiteout = ent->kind == HU_MARK_WHITEOUT &&
			 l->format == HU_FMT_OVERLAY && S_ISREG(ent->type);
	return 0;
}

static int ent_cmp(const void *pa, const void *pb)
{
	const struct wh_ent *a = pa, *b = pb;
	int c = strcmp(a->key, b->key);

	if (c)
		return c;
	return (b->kind == HU_MARK_WHITEOUT) - (a->kind == HU_MARK_WHITEOUT);
}

/* Read, classify and sort the entries of @d. */
static int scan_entries(const struct hu_layer *l, struct wh_dir *d,
			bool oci_invalid_ok, struct hu_error *e)
{
	size_t n = 0;

	/* A child's fd is one the walk just opened: no rewind.  The root's
	 * is a dup of the layer's, whose offset others move. */
	if (hu_layer_names_read(l, d->fd, d->parent != NULL, &d->names, NULL,
				e) < 0)
		return -1;
	d->ents = calloc(d->names.n ? d->names.n : 1, sizeof(*d->ents));
	if (!d->ents)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < d->names.n; i++) {
		struct wh_ent *ent = &d->ents[n];

		ent->name = d->names.v[i].name;
		if (classify(l, d, ent, d->names.v[i].type, oci_invalid_ok,
			     e) < 0)
			return -1;
		if (ent->kind != HU_MARK_OPAQUE_FILE)
			n++;
	}
	d->n = n;
	if (l->format != HU_FMT_OCI)
		return 0;
	qsort(d->ents, n, sizeof(*d->ents), ent_cmp);
	for (size_t i = 0; i + 1 < n; i++) {
		if (d->ents[i].kind == HU_MARK_WHITEOUT &&
		    !strcmp(d->ents[i].key, d->ents[i + 1].key))
			d->ents[i].twin = d->ents[i + 1].twin = true;
	}
	return 0;
}

static void dir_free(struct wh_dir *d)
{
	if (d->fd >= 0)
		close(d->fd);
	hu_names_free(&d->names);
	free(d->ents);
	free(d->redirect);
	free(d->xattrs);
	free(d->path);
}

/* ---- the walk ---------------------------------------------------------- */

struct walk {
	const struct hu_layer *l;
	const struct wh_walk_ops *ops;
	void *ctx;
};

static int walk_dir(struct walk *w, struct wh_dir *d, struct hu_error *e)
{
	int rc = 0;

	if (scan_self(w->l, d, e) < 0 ||
	    scan_entries(w->l, d, w->ops->oci_invalid_as_entries, e) < 0)
		return wh_prefix(e, w->l->path, d->path);
	if (w->ops->dir_pre && w->ops->dir_pre(w->ctx, d, e) < 0)
		return -1;
	for (size_t i = 0; i < d->n && rc == 0; i++) {
		const struct wh_ent *ent = &d->ents[i];
		struct wh_dir child = { .parent = d, .fd = -1 };

		rc = hu_interrupt_check(e);
		if (rc == 0)
			rc = w->ops->entry(w->ctx, d, ent, e);
		if (rc <= 0 || !S_ISDIR(ent->type)) {
			rc = rc < 0 ? -1 : 0;
			continue;
		}
		child.name = ent->name;
		child.twin = ent->twin;
		child.path = hu_path_join(d->path, ent->name);
		if (!child.path)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		child.fd = hu_open_dir_at(d->fd, ent->name);
		if (child.fd < 0)
			rc = wh_fail(e, errno, w->l->path, d->path, ent->name,
				     "cannot open directory");
		else
			rc = walk_dir(w, &child, e);
		dir_free(&child);
	}
	if (rc == 0 && w->ops->dir_post)
		rc = w->ops->dir_post(w->ctx, d, e);
	else if (rc < 0 && w->ops->dir_abort)
		w->ops->dir_abort(w->ctx, d);
	return rc;
}

int wh_walk(const struct hu_layer *l, const struct wh_walk_ops *ops,
	    void *ctx, struct hu_error *e)
{
	struct walk w = { l, ops, ctx };
	struct wh_dir root = { .name = "" };
	int rc;

	root.path = strdup("");
	root.fd = dup(l->fd);
	if (!root.path || root.fd < 0) {
		rc = hu_error_set(e, root.path ? errno : ENOMEM, l->path,
				  "cannot open layer");
	} else {
		rc = walk_dir(&w, &root, e);
	}
	dir_free(&root);
	return rc;
}
