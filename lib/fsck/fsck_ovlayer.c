/* SPDX-License-Identifier: MIT */
/*
 * fsck, overlay layers: what only the whole layer shows, decided after
 * its walk (fsck_overlay_layer).
 *
 * The kernel keys the inode of a merged directory by the first
 * directory beneath it (inode.c: ovl_get_inode() hashes by the lower
 * inode).  Two directories of the view merging with one directory
 * beneath would share that inode, and ovl_verify_inode() refuses the
 * second lookup with ESTALE: when two directories redirect to one
 * origin, and when the origin is still reached at its own path, because
 * nothing covers it in the layer (the kernel's rename of a merged
 * directory leaves a whiteout there, and a directory made there later is
 * opaque) or because a directory there merges with it too.
 *
 * The markers of an overlay layer live under trusted.overlay.* or, for a
 * mount with userxattr, user.overlay.*; the kernel reads one namespace
 * and shows the other one's as ordinary xattrs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fsck/fsck_overlay.h"

bool ovl_checked_is_upper(struct fsck_run *r)
{
	return fsck_layer_is_top(r);
}

static const char *shown_path(const char *p)
{
	return *p ? p : ".";
}

/* ---- two directories redirecting to one origin ------------------------ */

static int key_cmp(const void *pa, const void *pb)
{
	const struct ovl_redirect *a = *(const struct ovl_redirect *const *)pa;
	const struct ovl_redirect *b = *(const struct ovl_redirect *const *)pb;

	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	if (a->ino != b->ino)
		return a->ino < b->ino ? -1 : 1;
	return a < b ? -1 : a > b;	/* walk order */
}

static int report_shared(struct fsck_run *r, struct ovl_redirect *rec,
			 struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_error why = { 0 };
	char *detail;
	int rc, fd;

	/* whole: it names paths */
	if (asprintf(&detail, "/%s, as %s does", rec->origin,
		     rec->shared_with) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	rc = fsck_found(r, HU_PB_REDIRECT_SHARED, rec->path, NULL, detail, e);
	free(detail);
	if (rc != 1)
		return rc < 0 ? -1 : 0;
	fd = hu_open_dir_beneath(l->fd, rec->path);
	if (fd < 0)
		rc = hu_error_set(&why, errno, NULL, "cannot open directory");
	else
		rc = ovl_drop_redirect(l, fd, NULL, rec->own_below, &why);
	if (fd >= 0)
		close(fd);
	rec->dropped = rc == 0;
	return fsck_done(r, rc, &why, e) < 0 ? -1 : 0;
}

static int check_shared(struct fsck_run *r, struct ovl_state *st,
			struct hu_error *e)
{
	struct ovl_redirect **by_key;
	int rc = 0;

	if (st->nredirects < 2)
		return 0;
	by_key = malloc(st->nredirects * sizeof(*by_key));
	if (!by_key)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < st->nredirects; i++)
		by_key[i] = &st->redirects[i];
	qsort(by_key, st->nredirects, sizeof(*by_key), key_cmp);
	/* The first in walk order keeps its redirect. */
	for (size_t i = 1; i < st->nredirects; i++) {
		struct ovl_redirect *first = by_key[i - 1];

		if (first->shared_with)
			first = (struct ovl_redirect *)first->first;
		if (by_key[i]->dev == first->dev &&
		    by_key[i]->ino == first->ino) {
			by_key[i]->shared_with = first->path;
			by_key[i]->first = first;
		}
	}
	free(by_key);
	for (size_t i = 0; i < st->nredirects && rc == 0; i++)
		if (st->redirects[i].shared_with)
			rc = report_shared(r, &st->redirects[i], e);
	return rc;
}

/* ---- the origin still reached at its own path --------------------------- */

enum cover { COVERED, ABSENT, MERGING };

/* The origin's path looked up in the layer checked, as the kernel does. */
struct origin_walk {
	char *buf, **comps;
	size_t n;
	enum cover how;
	size_t at;		/* ABSENT: the first component it lacks */
	int pfd;		/* ABSENT, MERGING: the layer's directory
				 * holding comps[at] (MERGING: the last) */
	char *base;		/* where the layers beneath are asked for
				 * comps[at] */
	char *lower;		/* where they are asked for the origin */
};

static void origin_walk_free(struct origin_walk *w)
{
	if (w->pfd >= 0)
		close(w->pfd);
	free(w->comps);
	free(w->buf);
	free(w->base);
	free(w->lower);
}

static int split(struct origin_walk *w, const char *origin)
{
	size_t max = 1;
	char *save = NULL;

	w->buf = strdup(origin);
	for (const char *c = origin; *c; c++)
		max += *c == '/';
	w->comps = malloc(max * sizeof(*w->comps));
	if (!w->buf || !w->comps)
		return -1;
	for (char *c = strtok_r(w->buf, "/", &save); c;
	     c = strtok_r(NULL, "/", &save))
		w->comps[w->n++] = c;
	return 0;
}

/* @lower with its last component replaced by (relative) redirect @rd, or
 * @rd itself when absolute: where the layers beneath look next. */
static char *steer(const char *lower, const char *rd)
{
	const char *slash = strrchr(lower, '/');
	char *dir, *p;

	if (rd[0] == '/')
		return strdup(rd + 1);
	dir = strndup(lower, slash ? (size_t)(slash - lower) : 0);
	p = dir ? hu_path_join(dir, rd) : NULL;
	free(dir);
	return p;
}

/* Does entry @name of @fd (lstat @sb) end the lookup of the origin? */
static int ends_lookup(const struct hu_layer *l, int fd, const char *name,
		       const struct stat *sb, bool *ends, struct hu_error *e)
{
	enum hu_marker kind;
	const char *target;

	*ends = !S_ISDIR(sb->st_mode);
	if (*ends)
		return 0;
	/* xattr whiteouts included: the kernel's lookup takes them */
	if (hu_marker_classify(l, fd, name, sb, true, &kind, &target, e) < 0)
		return -1;
	*ends = kind == HU_MARK_WHITEOUT;
	return 0;
}

/* Read the redirect of directory @fd into *@rd (NULL when none). */
static int dir_redirect(const struct hu_layer *l, int fd, char **rd,
			struct hu_error *e)
{
	char attr[64];
	ssize_t len;

	ovl_xattr(l, false, "redirect", attr, sizeof(attr));
	if (wh_xattr_read(fd, NULL, attr, rd, &len) < 0)
		return hu_error_set(e, errno, NULL, "cannot read %s", attr);
	return 0;
}

static int walk_step(const struct hu_layer *l, struct origin_walk *w,
		     int fd, size_t i, int *next, struct hu_error *e)
{
	const char *c = w->comps[i];
	enum hu_opaque op;
	struct stat sb;
	char *rd = NULL, *lower;
	bool ends;
	int sub;

	*next = -1;
	if (fstatat(fd, c, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return hu_error_set(e, errno, c, "cannot stat");
		w->how = ABSENT;
		w->at = i;
		return 0;
	}
	if (ends_lookup(l, fd, c, &sb, &ends, e) < 0)
		return -1;
	if (ends)
		return 0;	/* COVERED */
	sub = hu_open_dir_at(fd, c);
	if (sub < 0)
		return hu_error_set(e, errno, c, "cannot open directory");
	if (hu_marker_dir_opaque(l, sub, &op, e) < 0 ||
	    dir_redirect(l, sub, &rd, e) < 0) {
		close(sub);
		return -1;
	}
	/* opaque: nothing beneath is reached; a refused redirect: the
	 * lookup fails */
	if (op == HU_OPAQUE_YES || (rd && ovl_redirect_refused(rd))) {
		free(rd);
		close(sub);
		return 0;
	}
	/* the name in the parent's directory beneath, or where its
	 * redirect steers it */
	lower = hu_path_join(w->lower, c);
	if (lower && rd) {
		char *steered = steer(lower, rd);

		free(lower);
		lower = steered;
	}
	free(rd);
	free(w->lower);
	w->lower = lower;
	if (!lower) {
		close(sub);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	if (i + 1 == w->n) {
		close(sub);
		w->how = MERGING;
		return 0;
	}
	*next = sub;
	return 0;
}

static int walk_origin(const struct hu_layer *l, const char *origin,
		       struct origin_walk *w, struct hu_error *e)
{
	int fd;

	memset(w, 0, sizeof(*w));
	w->pfd = -1;
	w->lower = strdup("");
	if (!w->lower || split(w, origin) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	fd = dup(l->fd);
	if (fd < 0)
		return hu_error_set(e, errno, NULL, "cannot open layer");
	for (size_t i = 0; i < w->n; i++) {
		int next;

		if (walk_step(l, w, fd, i, &next, e) < 0) {
			close(fd);
			return -1;
		}
		if (next < 0) {
			if (w->how != COVERED)
				w->pfd = fd;
			else
				close(fd);
			break;
		}
		close(fd);
		fd = next;
	}
	if (w->how != ABSENT)
		return 0;
	w->base = strdup(w->lower);
	for (size_t i = w->at; i < w->n && w->base; i++) {
		char *p = hu_path_join(w->lower, w->comps[i]);

		free(w->lower);
		w->lower = p;
		if (!p)
			break;
	}
	return w->base && w->lower ? 0 :
		hu_error_set(e, ENOMEM, NULL, "out of memory");
}

/* Is the view beneath at @lower the directory @rec merges with? */
static int reaches(struct fsck_run *r, const char *lower,
		   const struct ovl_redirect *rec, bool *yes,
		   struct hu_error *e)
{
	struct ovl_below_path bp = { 0 };
	struct hu_vdir *v;
	dev_t dev;
	ino_t ino;
	int rc;

	*yes = false;
	rc = ovl_below_open(r, lower, &bp, &v, e);
	if (rc == 0 && v) {
		rc = ovl_vdir_key(v, &dev, &ino, e);
		*yes = rc == 0 && dev == rec->dev && ino == rec->ino;
	}
	ovl_below_close(&bp);
	return rc;
}

struct new_dir {
	int fd;			/* in the layer, being made */
	struct stat st;		/* of the directory beneath it copies */
	int src;		/* that directory */
};

static int make_dir(int dirfd, const char *name, void *ctx)
{
	(void)ctx;
	return hu_wr_mkdirat(dirfd, name, 0700);
}

/* Give @nd (made as @name in @dirfd) the metadata of its source: times
 * last, after its entries were made. */
static int copy_meta(struct new_dir *nd, int dirfd, const char *name,
		     struct hu_error *e)
{
	struct timespec ts[2] = { nd->st.st_atim, nd->st.st_mtim };

	if (hu_copy_xattrs(nd->src, NULL, nd->fd, NULL, e) < 0)
		return -1;
	if (hu_wr_fchownat(dirfd, name, nd->st.st_uid, nd->st.st_gid,
			   AT_SYMLINK_NOFOLLOW) < 0 ||
	    hu_wr_fchmodat(dirfd, name, nd->st.st_mode & 07777) < 0 ||
	    hu_wr_utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return hu_error_set(e, errno, name, "cannot set metadata");
	return 0;
}

/*
 * Whiteout the origin: the directories the layer lacks on the way to it
 * are made (as the kernel's copy-up makes them: the metadata of the ones
 * beneath), the whiteout inside, all under a temporary name renamed in
 * at the end; on failure it is removed and the layer is as it was.
 */
static int cover_absent(struct fsck_run *r, struct origin_walk *w,
			struct hu_error *why)
{
	size_t depth = w->n - 1 - w->at, made = 0;
	struct new_dir *nd = calloc(depth ? depth : 1, sizeof(*nd));
	char *tmp = NULL, *lower = strdup(w->base);
	int rc = -1;

	if (!nd || !lower) {
		hu_error_set(why, ENOMEM, NULL, "out of memory");
		goto out;
	}
	if (hu_make_temp(w->pfd, w->comps[w->at], make_dir, NULL, &tmp) < 0) {
		hu_error_set(why, errno, w->comps[w->at], "cannot make");
		goto out;
	}
	for (size_t i = 0; i < depth; i++) {
		struct ovl_below_path bp = { 0 };
		int parent = i ? nd[i - 1].fd : w->pfd;
		const char *name = i ? w->comps[w->at + i] : tmp;
		struct hu_vdir *v = NULL;
		char *p = hu_path_join(lower, w->comps[w->at + i]);

		free(lower);
		lower = p;
		nd[made].fd = nd[made].src = -1;
		made++;
		if (!p || ovl_below_open(r, p, &bp, &v, why) < 0 || !v) {
			ovl_below_close(&bp);
			if (!hu_error_has_msg(why))
				hu_error_set(why, ENOENT, p, "gone beneath");
			goto undo;
		}
		nd[i].src = dup(hu_vdir_fd(v, NULL));
		ovl_below_close(&bp);
		if (i && hu_wr_mkdirat(parent, name, 0700) < 0) {
			hu_error_set(why, errno, name, "cannot make");
			goto undo;
		}
		nd[i].fd = hu_open_dir_at(parent, name);
		if (nd[i].fd < 0 || nd[i].src < 0 ||
		    fstat(nd[i].src, &nd[i].st) < 0) {
			hu_error_set(why, errno, name, "cannot open");
			goto undo;
		}
	}
	if (hu_wr_mknodat(nd[depth - 1].fd, w->comps[w->n - 1], S_IFCHR | 0,
			  makedev(0, 0)) < 0) {
		hu_error_set(why, errno, w->comps[w->n - 1],
			     "cannot create whiteout");
		goto undo;
	}
	for (size_t i = depth; i-- > 0;)
		if (copy_meta(&nd[i], i ? nd[i - 1].fd : w->pfd,
			      i ? w->comps[w->at + i] : tmp, why) < 0)
			goto undo;
	if (hu_wr_renameat2(w->pfd, tmp, w->pfd, w->comps[w->at],
			    RENAME_NOREPLACE) < 0) {
		hu_error_set(why, errno, w->comps[w->at], "cannot rename in");
		goto undo;
	}
	rc = 0;
	goto out;
undo:
	(void)hu_rmtree(w->pfd, tmp);
out:
	for (size_t i = 0; i < made; i++) {
		if (nd[i].fd >= 0)
			close(nd[i].fd);
		if (nd[i].src >= 0)
			close(nd[i].src);
	}
	free(nd);
	free(tmp);
	free(lower);
	return rc;
}

static int cover(struct fsck_run *r, struct origin_walk *w,
		 struct hu_error *why)
{
	const struct hu_layer *l = fsck_layer(r);
	const char *last = w->comps[w->n - 1];
	struct ovl_times times;
	char attr[64];
	int rc;

	if (w->how == MERGING) {
		/* as the kernel's mkdir over its whiteout would have made
		 * it: opaque */
		ovl_xattr(l, false, "opaque", attr, sizeof(attr));
		rc = hu_wr_setxattr_at(w->pfd, last, attr, "y", 1, 0);
		return rc < 0 ? hu_error_set(why, errno, last, "cannot set %s",
					     attr) : 0;
	}
	ovl_times_save(w->pfd, &times);
	if (w->at + 1 == w->n)
		rc = hu_wr_mknodat(w->pfd, last, S_IFCHR | 0, makedev(0, 0)) <
			0 ? hu_error_set(why, errno, last,
					 "cannot create whiteout") : 0;
	else if (hu_wr_dry_run())
		rc = 0;		/* nothing made to go on with */
	else
		rc = cover_absent(r, w, why);
	ovl_times_restore(w->pfd, &times);
	return rc;
}

/* Is @prefix @path or a directory above it (component-wise)?  The rest
 * of @path after it in *@rest. */
static bool path_under(const char *path, const char *prefix,
		       const char **rest)
{
	size_t n = strlen(prefix);

	if (strncmp(path, prefix, n) != 0 || (path[n] && path[n] != '/' && n))
		return false;
	*rest = path + n + (path[n] == '/');
	return true;
}

/* The paths of the view that may reach @rec's directory beneath: the one
 * its redirect names, that directory's own path, and the same below each
 * other redirected directory whose directory beneath lies above it. */
static int candidates(const struct ovl_state *st,
		      const struct ovl_redirect *rec, char ***out, size_t *n)
{
	char **c = malloc((st->nredirects + 2) * sizeof(*c));
	const char *rest;

	*out = c;
	*n = 0;
	if (!c)
		return -1;
	c[(*n)++] = strdup(rec->origin);
	c[(*n)++] = strdup(rec->lower);
	for (size_t i = 0; i < st->nredirects; i++) {
		const struct ovl_redirect *o = &st->redirects[i];

		if (o != rec && !o->dropped &&
		    path_under(rec->lower, o->lower, &rest) && *rest)
			c[(*n)++] = hu_path_join(o->path, rest);
	}
	for (size_t i = 0; i < *n; i++)
		if (!c[i])
			return -1;
	return 0;
}

/* Does view path @at reach @rec's directory beneath?  Then report it
 * (once: *@told) and cover it. */
static int check_at(struct fsck_run *r, const struct ovl_redirect *rec,
		    const char *at, bool *told, struct hu_error *e)
{
	struct origin_walk w;
	struct hu_error why = { 0 };
	char *detail;
	bool yes = false;
	int rc;

	rc = walk_origin(fsck_layer(r), at, &w, e);
	if (rc == 0 && w.how != COVERED)
		rc = reaches(r, w.lower, rec, &yes, e);
	if (rc < 0 || !yes)
		goto out;
	*told = true;
	if (asprintf(&detail, w.how == MERGING ?
		     "/%s: a directory there merges with it too" :
		     "/%s: nothing covers it", at) < 0) {
		rc = hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	rc = fsck_found(r, HU_PB_REDIRECT_UNCOVERED, rec->path, NULL, detail,
			e);
	free(detail);
	if (rc == 1)
		rc = fsck_done(r, cover(r, &w, &why), &why, e);
out:
	origin_walk_free(&w);
	return rc < 0 ? -1 : 0;
}

static int check_one_origin(struct fsck_run *r, const struct ovl_state *st,
			    const struct ovl_redirect *rec,
			    struct hu_error *e)
{
	char **c;
	size_t n;
	bool told = false;
	int rc = candidates(st, rec, &c, &n);

	if (rc < 0)
		hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < n && rc == 0 && !told; i++) {
		bool seen = !strcmp(c[i], rec->path);

		for (size_t j = 0; j < i && !seen; j++)
			seen = !strcmp(c[i], c[j]);
		if (!seen)
			rc = check_at(r, rec, c[i], &told, e);
	}
	for (size_t i = 0; i < n; i++)
		free(c[i]);
	free(c);
	return rc;
}

static int check_uncovered(struct fsck_run *r, struct ovl_state *st,
			   struct hu_error *e)
{
	for (size_t i = 0; i < st->nredirects; i++) {
		const struct ovl_redirect *rec = &st->redirects[i];

		/* of a shared origin, the first tells */
		if (rec->dropped || rec->shared_with)
			continue;
		if (check_one_origin(r, st, rec, e) < 0) {
			hu_error_prefix(e, fsck_layer(r)->path);
			return -1;
		}
	}
	return 0;
}

/* ---- both namespaces ------------------------------------------------------ */

/* Move the overlay xattrs of the other namespace of entry @name of @fd
 * (NULL: @fd itself) to the layer's: each is set there (unless there is
 * one already, which the readers use now) before it goes. */
static int move_xattrs(const struct hu_layer *l, int fd, const char *name,
		       struct hu_error *e)
{
	const char *other = l->userxattr ? "trusted.overlay." : "user.overlay.";
	char *list = NULL, *v;
	ssize_t len, vlen;
	int rc = 0;

	if (hu_llistxattr_at(fd, name, &list, &len) < 0)
		return hu_error_set(e, errno, name, "cannot list xattrs");
	for (char *a = list; a && a < list + len && rc == 0;
	     a += strlen(a) + 1) {
		const char *what;
		char own[300];

		if (strncmp(a, other, strlen(other)) != 0)
			continue;
		what = a + strlen(other);
		if (!strncmp(what, "overlay.", 8))
			continue;	/* a nested overlay's, escaped */
		ovl_xattr(l, false, what, own, sizeof(own));
		if (wh_xattr_read(fd, name, a, &v, &vlen) < 0) {
			rc = hu_error_set(e, errno, name, "cannot read %s", a);
			break;
		}
		/* user.* cannot be set on a symlink or device: the kernel
		 * does without there (copy_up.c ignores that EPERM) */
		if (v && hu_wr_setxattr_at(fd, name, own, v, (size_t)vlen,
					   XATTR_CREATE) < 0 &&
		    errno != EEXIST && errno != EPERM)
			rc = hu_error_set(e, errno, name, "cannot set %s", own);
		free(v);
		if (rc == 0 && hu_wr_removexattr_at(fd, name, a) < 0 &&
		    errno != ENODATA)
			rc = hu_error_set(e, errno, name, "cannot remove %s",
					  a);
	}
	free(list);
	return rc;
}

static int move_dir(void *ctx, struct wh_dir *d, struct hu_error *e)
{
	const struct hu_layer *l = ctx;

	if (d->parent || move_xattrs(l, d->fd, NULL, e) == 0)
		return 0;
	return wh_prefix(e, l->path, d->path);
}

static int move_entry(void *ctx, struct wh_dir *d, const struct wh_ent *ent,
		      struct hu_error *e)
{
	const struct hu_layer *l = ctx;

	if (move_xattrs(l, d->fd, ent->name, e) < 0)
		return wh_prefix(e, l->path, d->path);
	return S_ISDIR(ent->type);
}

static int check_namespaces(struct fsck_run *r, struct ovl_state *st,
			    struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	const struct wh_walk_ops ops = { .dir_pre = move_dir,
					 .entry = move_entry };
	struct hu_error why = { 0 };
	char detail[700];
	int rc;

	if (!st->own_ns || !st->other_ns)
		return 0;
	snprintf(detail, sizeof(detail),
		 "%s.overlay.* on %ju entries (first %s), %s.overlay.* on %ju "
		 "(first %s)", l->userxattr ? "user" : "trusted",
		 (uintmax_t)st->own_ns, shown_path(st->first_own),
		 l->userxattr ? "trusted" : "user", (uintmax_t)st->other_ns,
		 shown_path(st->first_other));
	rc = fsck_found(r, HU_PB_NAMESPACE_MIXED, "", NULL, detail, e);
	if (rc != 1)
		return rc < 0 ? -1 : 0;
	rc = wh_walk(l, &ops, (void *)l, &why);
	return fsck_done(r, rc, &why, e) < 0 ? -1 : 0;
}

int fsck_overlay_layer(struct fsck_run *r, struct hu_error *e)
{
	struct ovl_state *st;
	int rc;

	if (fsck_layer(r)->format != HU_FMT_OVERLAY ||
	    hu_layer_half(fsck_layer(r)))
		return 0;
	st = ovl_state(r, e);
	rc = check_shared(r, st, e);
	if (rc == 0)
		rc = check_uncovered(r, st, e);
	if (rc == 0)
		rc = check_namespaces(r, st, e);
	ovl_state_free(st);
	return rc;
}
