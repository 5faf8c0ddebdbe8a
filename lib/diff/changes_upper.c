/* SPDX-License-Identifier: MIT */
/*
 * diff: the two sides of a directory, and the upper layers' own
 * directories.
 *
 * A side is listed whole (the old view; the new one where it may differ
 * from the old beneath the upper layers), or "fast": with one upper layer
 * over the base, and the layers beneath looked up along the same path in
 * both views, the new view of a directory is the old one with the upper
 * layer's own entries over it.  The upper layer's own view (a stack of
 * that layer alone) lists those, with the view's rules for what its
 * markers are; its raw names say which old names a whiteout hides.
 *
 * Redirects: the upper layers' directories at the current path, read for
 * an overlay redirect, which sends the lookup beneath elsewhere.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "diff/changes.h"

int chg_side_list(struct chg_dir *sd, struct hu_vdir *d, struct hu_error *e)
{
	memset(sd, 0, sizeof(*sd));
	sd->d = d;
	return hu_vdir_list(d, &sd->ents, &sd->n, e);
}

void chg_side_lookup(struct chg_dir *sd, struct hu_vdir *d)
{
	memset(sd, 0, sizeof(*sd));
	sd->d = d;
	sd->lookup = true;
}

int chg_side_fast(const struct chg_walk *w, struct chg_dir *sd,
		  struct hu_vdir *nd, struct hu_vdir *ud, struct hu_error *e)
{
	memset(sd, 0, sizeof(*sd));
	sd->d = nd;
	sd->ud = ud;
	sd->merged = hu_vdir_is_merged(nd);
	if (hu_vdir_list(ud, &sd->uents, &sd->n, e) < 0)
		return -1;
	if (hu_layer_names_read(&w->ustack.layers[0], hu_vdir_fd(ud, NULL),
				false, &sd->raw, NULL, e) < 0) {
		hu_error_prefix(e, hu_vdir_path(ud));
		hu_error_prefix(e, w->ustack.layers[0].path);
		return -1;
	}
	sd->own = malloc((sd->n ? sd->n : 1) * sizeof(*sd->own));
	if (!sd->own)
		return chg_nomem(e);
	for (size_t i = 0; i < sd->n; i++) {
		sd->own[i] = sd->uents[i];
		sd->own[i].layer = w->base;
	}
	sd->ents = sd->own;
	return 0;
}

void chg_side_free(struct chg_dir *sd)
{
	free(sd->own);
	hu_names_free(&sd->raw);
	sd->own = NULL;
}

static int name_key_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct hu_name *)elem)->name);
}

static int entry_key_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct hu_ventry *)elem)->name);
}

static bool has_name(const struct hu_names *l, const char *name)
{
	return l->n && bsearch(name, l->v, l->n, sizeof(*l->v), name_key_cmp);
}

/* Is old name @name, which fast side @sd does not list, gone from the new
 * view?  When the dir does not merge, yes; else when the upper layer
 * holds a whiteout of it: a name of the upper dir that its own view does
 * not list is one (the view hides whiteouts only), and in an OCI layer
 * .wh.NAME is. */
bool chg_fast_gone(const struct chg_walk *w, const struct chg_dir *sd,
		   const char *name)
{
	char wh[NAME_MAX + 1];

	if (!sd->merged)
		return true;
	if (w->ustack.layers[0].format != HU_FMT_OCI)
		return has_name(&sd->raw, name);
	if (!hu_oci_whiteout_name(wh, sizeof(wh), name))
		return false;
	return has_name(&sd->raw, wh);
}

bool chg_side_has(const struct chg_dir *sd, const char *name)
{
	return sd->n && bsearch(name, sd->ents, sd->n, sizeof(*sd->ents),
				entry_key_cmp);
}

/* Raw names come sorted, and so do the names they white out: ".wh.a" <
 * ".wh.b" as "a" < "b". */
const char *chg_fast_whiteout(const struct chg_walk *w,
			      const struct chg_dir *sd, size_t k)
{
	const char *name = sd->raw.v[k].name;

	if (w->ustack.layers[0].format != HU_FMT_OCI)
		return chg_side_has(sd, name) ? NULL : name;
	return hu_oci_hidden(name);
}

/* ---- redirects of the upper layers ------------------------------------ */

void chg_uppers_close(const struct chg_walk *w, struct chg_uppers *u)
{
	if (u->own && u->fd)
		for (size_t k = 0; k < w->news->n - w->base; k++)
			if (u->fd[k] >= 0)
				close(u->fd[k]);
	free(u->fd);
	u->fd = NULL;
}

int chg_uppers_root(const struct chg_walk *w, struct chg_uppers *u,
		    struct hu_error *e)
{
	size_t nup = w->news->n - w->base;

	u->own = false;
	u->fd = malloc(nup * sizeof(*u->fd));
	if (!u->fd)
		return chg_nomem(e);
	for (size_t k = 0; k < nup; k++) {
		const struct hu_layer *l = &w->news->layers[w->base + k];

		u->fd[k] = hu_layer_is(l, HU_FMT_OVERLAY) ? l->fd : -1;
	}
	return 0;
}

/* The upper directories of child @name; *@redirected when one of them
 * sends the lookup beneath elsewhere. */
int chg_uppers_child(const struct chg_walk *w, const struct chg_uppers *pu,
		     const char *name, struct chg_uppers *cu,
		     bool *redirected, struct hu_error *e)
{
	size_t nup = w->news->n - w->base;

	*redirected = false;
	cu->own = true;
	cu->fd = malloc(nup * sizeof(*cu->fd));
	if (!cu->fd)
		return chg_nomem(e);
	for (size_t k = 0; k < nup; k++)
		cu->fd[k] = -1;
	for (size_t k = 0; k < nup; k++) {
		const struct hu_layer *l = &w->news->layers[w->base + k];
		char attr[64];
		int fd;

		if (pu->fd[k] < 0)
			continue;
		fd = hu_open_dir_at(pu->fd[k], name);
		if (fd < 0) {
			if (errno == ENOENT || errno == ENOTDIR ||
			    errno == ELOOP)
				continue;
			hu_error_setat(e, errno, w->path.s, name,
				       "cannot open directory");
			hu_error_prefix(e, l->path);
			return -1;
		}
		cu->fd[k] = fd;
		for (int i = 0; i < 2 && !*redirected; i++) {
			if (!hu_layer_overlay_xattr(l, i, "redirect", attr,
						    sizeof(attr)))
				continue;
			if (fgetxattr(fd, attr, NULL, 0) >= 0)
				*redirected = true;
			else if (errno != ENODATA && errno != ENOTSUP) {
				hu_error_setat(e, errno, w->path.s, name,
					       "cannot read %s", attr);
				hu_error_prefix(e, l->path);
				return -1;
			}
		}
	}
	return 0;
}
