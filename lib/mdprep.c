/* SPDX-License-Identifier: MIT */
/*
 * Phase 1 of a merge-down: the upper made plain before anything moves.
 *
 * A redirected directory (the kernel's rename of a merged directory: the
 * upper's "b" with overlay.redirect "/a", and a whiteout at "a") merges
 * with the target's "a".  That directory is renamed to "b" in the
 * target and the upper's redirect removed; between the two the view is
 * not the old one, so the step is written down first (mdjournal.c) and
 * a re-run finishes it before anything else.  All of them go before the
 * rest, parents first: phase 2 may remove the target's "a" for the
 * whiteout.
 *
 * A metacopy file (metadata in the upper, data beneath, perhaps under
 * another name) gets its data: a copy of the bytes the view reads for it,
 * with its own metadata, made under a temporary name beside it in the
 * upper and renamed over it: the view is the same before and after.
 *
 * Which directory a redirect reaches and where a metacopy file's data
 * lies is the view's answer (view.c); the names here only say where to
 * rename, and are checked against the inode the view found.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mergedown.h"

struct item {
	enum hu_wh_kind kind;	/* HU_WH_REDIRECT (directories), METACOPY */
	char *path;
	char *target;		/* the redirect */
	ino_t src;		/* the target's directory it reaches */
	bool skip;		/* reaches nothing: nothing to move */
};

struct items {
	const struct md *m;
	struct item *v;
	size_t n, cap;
};

static bool is_dir(int rootfd, const char *path)
{
	const char *leaf;
	struct stat st;
	int fd = md_open_parent(rootfd, path, &leaf);
	bool dir;

	if (fd < 0)
		return false;
	dir = fstatat(fd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	      S_ISDIR(st.st_mode);
	close(fd);
	return dir;
}

static int collect(void *ctx, const struct hu_wh_marker *mk,
		   struct hu_error *e)
{
	struct items *it = ctx;
	struct item x = { .kind = mk->kind };

	if (mk->kind != HU_WH_METACOPY && mk->kind != HU_WH_REDIRECT)
		return 0;
	/* a metacopy file's redirect is the view's to follow */
	if (mk->kind == HU_WH_REDIRECT && !is_dir(it->m->up->fd, mk->path))
		return 0;
	if (it->n == it->cap) {
		size_t cap = it->cap ? it->cap * 2 : 16;
		struct item *v = realloc(it->v, cap * sizeof(*v));

		if (!v)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		it->v = v;
		it->cap = cap;
	}
	x.path = strdup(mk->path);
	x.target = mk->target ? strdup(mk->target) : NULL;
	if (!x.path || (mk->target && !x.target)) {
		free(x.path);
		free(x.target);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	it->v[it->n++] = x;
	return 0;
}

static void items_free(struct items *it)
{
	for (size_t i = 0; i < it->n; i++) {
		free(it->v[i].path);
		free(it->v[i].target);
	}
	free(it->v);
}

/* The inode of @path in layer root @rootfd (not followed), or 0. */
static ino_t ino_at(int rootfd, const char *path, struct stat *st)
{
	const char *leaf;
	int fd = md_open_parent(rootfd, path, &leaf);
	ino_t ino = 0;

	if (fd < 0)
		return 0;
	if (fstatat(fd, leaf, st, AT_SYMLINK_NOFOLLOW) == 0)
		ino = st->st_ino;
	close(fd);
	return ino;
}

/* Which directory of the target redirected directory @x reaches. */
static int resolve(struct md *m, struct item *x, struct hu_error *e)
{
	struct hu_vdir *d;
	struct stat st;
	int rc = md_vopen(m->s, x->path, &d, e), fd;

	if (rc <= 0) {
		x->skip = true;
		return rc < 0 ? md_prefix(m->up, NULL, NULL, e) : 0;
	}
	fd = hu_vdir_layer_fd(d, m->ito);
	if (hu_vdir_bottom_layer(d) < m->ito) {
		hu_vdir_close(d);
		return md_fail(m->up, x->path, NULL, ENOTSUP, "a redirected "
			       "directory that merges with layers beneath "
			       "the target: merge those first", e);
	}
	x->skip = fd < 0;
	if (fd >= 0 && fstat(fd, &st) < 0)
		rc = md_fail(m->to, x->path, NULL, errno, "cannot stat", e);
	else if (fd >= 0)
		x->src = st.st_ino;
	hu_vdir_close(d);
	return rc < 0 ? -1 : 0;
}

/* The parents of @path in the target, made where missing. */
static int make_parents(struct md *m, const char *path, struct hu_error *e)
{
	char *p = strdup(path);
	int rc = 0;

	if (!p)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (char *s = strchr(p, '/'); s && rc == 0; s = strchr(s + 1, '/')) {
		const char *leaf;
		struct stat st;
		int fd;

		*s = '\0';
		fd = md_open_parent(m->to->fd, p, &leaf);
		if (fd < 0) {
			rc = md_fail(m->to, p, NULL, errno, "cannot open", e);
		} else if (fstatat(fd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			   S_ISDIR(st.st_mode)) {
			/* there */
		} else if (errno != ENOENT && m->ito > 0) {
			rc = md_fail(m->to, p, NULL, ENOTSUP, "a redirected "
				     "directory's new parent is no directory "
				     "in the target, and layers lie beneath "
				     "it", e);
		} else if (hu_rmtree(fd, leaf) < 0 ||
			   (hu_wr_mkdirat(fd, leaf, 0700) < 0 &&
			    errno != EEXIST)) {
			rc = md_fail(m->to, p, NULL, errno, "cannot create", e);
		}
		if (fd >= 0)
			close(fd);
		*s = '/';
	}
	free(p);
	return rc;
}

/* The recorded step: the target's directory @in->ino moved from
 * @in->src to @in->dst (whatever the hidden dst held removed), then the
 * upper's redirect on @in->dst removed.  Each part is skipped when done:
 * a re-run after a kill anywhere finishes it. */
static int finish_intent(struct md *m, const struct md_intent *in,
			 struct hu_error *e)
{
	const char *sleaf, *dleaf;
	int sfd = -1, dfd = -1, ufd = -1, rc = -1;
	struct stat st;
	char attr[64];

	sfd = md_open_parent(m->to->fd, in->src, &sleaf);
	dfd = md_open_parent(m->to->fd, in->dst, &dleaf);
	if (dfd < 0) {
		md_fail(m->to, in->dst, NULL, errno, "cannot open", e);
		goto out;
	}
	if (strcmp(in->src, in->dst) == 0) {
		/* a redirect to its own name: nothing moves */
	} else if (sfd >= 0 &&
		   fstatat(sfd, sleaf, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		   st.st_ino == in->ino) {
		md_step(m, "redirect", in->src, NULL);
		if (hu_rmtree(dfd, dleaf) < 0 ||
		    hu_wr_renameat2(sfd, sleaf, dfd, dleaf, 0) < 0) {
			md_fail(m->to, in->dst, NULL, errno,
				"cannot move the redirected directory", e);
			goto out;
		}
	} else if (!hu_wr_dry_run() &&
		   (fstatat(dfd, dleaf, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    st.st_ino != in->ino)) {
		md_fail(m->to, in->dst, NULL, ENOENT, "the redirected "
			"directory is neither where it was nor where it goes",
			e);
		goto out;
	}
	ufd = md_open_parent(m->up->fd, in->dst, &dleaf);
	hu_marker_xattr(HU_FMT_OVERLAY, m->up->userxattr, "redirect", attr,
			sizeof(attr));
	if (ufd >= 0 && hu_wr_removexattr_at(ufd, dleaf, attr) < 0 &&
	    errno != ENODATA && errno != ENOENT) {
		md_fail(m->up, in->dst, NULL, errno, "cannot remove the "
			"redirect", e);
		goto out;
	}
	rc = md_intent_clear(m, e);
	if (rc == 0)
		m->st->prepared++;
out:
	if (sfd >= 0)
		close(sfd);
	if (dfd >= 0)
		close(dfd);
	if (ufd >= 0)
		close(ufd);
	return rc;
}

static int redirect(struct md *m, const struct items *it,
		    const struct item *x, struct hu_error *e)
{
	struct md_intent in = { .ino = x->src };
	char *src;
	struct stat st;
	int rc;

	if (x->target[0] == '/') {
		src = strdup(x->target + 1);
	} else {
		const char *slash = strrchr(x->path, '/');
		size_t dl = slash ? (size_t)(slash - x->path) : 0;

		src = malloc(dl + strlen(x->target) + 2);
		if (src)
			sprintf(src, "%.*s%s%s", (int)dl, x->path,
				dl ? "/" : "", x->target);
	}
	if (!src)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (ino_at(m->to->fd, src, &st) != x->src) {
		free(src);
		return md_fail(m->up, x->path, NULL, ENOTSUP, "the directory "
			       "this redirect reaches is not at its name in "
			       "the target", e);
	}
	if (ino_at(m->to->fd, x->path, &st) && S_ISDIR(st.st_mode) &&
	    st.st_ino != x->src) {
		for (size_t i = 0; i < it->n; i++)
			if (!it->v[i].skip && it->v[i].src == st.st_ino) {
				free(src);
				return md_fail(m->up, x->path, NULL, ENOTSUP,
					       "directories renamed over one "
					       "another (a swap): not "
					       "supported", e);
			}
	}
	in.src = src;
	in.dst = x->path;
	rc = make_parents(m, x->path, e);
	if (rc == 0)
		rc = md_intent_write(m, &in, e);
	if (rc == 0)
		rc = finish_intent(m, &in, e);
	free(src);
	return rc;
}

/* Metacopy file @path: its data copied in beside it and renamed over. */
static int materialize(struct md *m, const char *path, struct hu_error *e)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash - path) : strdup("");
	const char *leaf = slash ? slash + 1 : path;
	struct hu_ventry ent;
	struct hu_vdir *d = NULL;
	bool own = true;
	int rc, fd = -1;

	if (!dir)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	rc = md_vopen(m->s, dir, &d, e);
	if (rc == 1)
		rc = hu_vdir_lookup(d, leaf, &ent, e);
	if (rc == 1 && ent.layer == m->iup && S_ISREG(ent.st.st_mode))
		fd = hu_vdir_open_data(d, &ent, &own, e);
	if (rc == 1 && ent.layer == m->iup && S_ISREG(ent.st.st_mode) &&
	    fd < 0)
		rc = -1;
	if (rc == 1 && fd >= 0 && !own) {
		struct timespec ts[2];

		/* the directory's times before the rename changes them */
		if (md_times_get(m, ent.dirfd, true, ts, NULL, e) < 0) {
			rc = md_prefix(m->up, dir, NULL, e);
			goto out;
		}
		md_step(m, "data", dir, leaf);
		m->no_links = true;
		rc = md_copy_nondir(m, ent.dirfd, leaf, &ent.st, fd,
				    ent.dirfd, dir, leaf, e);
		m->no_links = false;
		if (rc == 0)
			m->st->prepared++;
		else
			md_prefix(m->up, dir, NULL, e);
	} else if (rc < 0) {
		md_prefix(m->up, NULL, NULL, e);
	}
out:
	if (fd >= 0)
		close(fd);
	hu_vdir_close(d);
	free(dir);
	return rc < 0 ? -1 : 0;
}

int md_prepare(struct md *m, struct hu_error *e)
{
	struct items it = { .m = m };
	struct md_intent in;
	int rc = md_intent_read(m, &in, e);

	if (rc > 0) {
		rc = finish_intent(m, &in, e);
		md_intent_free(&in);
	}
	if (rc < 0 || !hu_layer_is(m->up, HU_FMT_OVERLAY))
		return rc;
	if (hu_wh_list(m->up, collect, &it, e) < 0) {
		items_free(&it);
		return -1;
	}
	for (size_t i = 0; i < it.n && rc == 0; i++) {
		if (it.v[i].kind != HU_WH_REDIRECT)
			continue;
		if (m->keep)
			rc = md_fail(m->up, it.v[i].path, NULL, ENOTSUP,
				     "--keep-upper cannot merge a redirected "
				     "directory", e);
		else
			rc = resolve(m, &it.v[i], e);
	}
	for (size_t i = 0; i < it.n && rc == 0; i++)
		if (it.v[i].kind == HU_WH_REDIRECT && !it.v[i].skip)
			rc = redirect(m, &it, &it.v[i], e);
	/* --keep-upper: phase 2 copies the data through the view */
	for (size_t i = 0; i < it.n && rc == 0 && !m->keep; i++)
		if (it.v[i].kind == HU_WH_METACOPY)
			rc = materialize(m, it.v[i].path, e);
	items_free(&it);
	return rc;
}
