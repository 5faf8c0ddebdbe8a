/* SPDX-License-Identifier: MIT */
/*
 * fsck, overlay layers: what the kernel (fs/overlayfs) trips on in one
 * directory or entry of the layer checked.
 *
 *   redirects  namei.c/util.c ovl_get_redirect_xattr(): an empty one, a
 *              relative one with '/', an empty component fail the lookup
 *              with EINVAL, a '.' or '..' component with EACCES; one whose
 *              target no layer beneath has merges with nothing.  On a
 *              non-directory the kernel reads it only with metacopy, and
 *              leaves it on a file whose data it copied up: that is its
 *              own bookkeeping, never reported.
 *   metacopy   util.c ovl_check_metacopy_xattr(): 1 to 3 bytes (shorter
 *              than struct ovl_metacopy's header: version, len, flags,
 *              digest_algo) is EIO; namei.c: no data beneath is EIO.
 *   impure     copy_up.c and dir.c mark the upper directory "impure" when
 *              an entry with an origin or a redirect lands in it; readdir.c
 *              then looks the origins up for d_ino, which without it
 *              disagrees with st_ino.
 *   opaque     only "y" (opaque) and "x" (may hold xattr whiteouts) mean
 *              anything; any other value is read as not opaque.
 *   xattr whiteouts: lookup takes an empty file with overlay.whiteout as a
 *              whiteout in any layer, but readdir hides it only in a
 *              middle layer's merged directory marked opaque=x: elsewhere
 *              it is listed and cannot be looked up.
 * What only the whole layer shows is in fsck_ovlayer.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fsck/fsck_overlay.h"

/* ---- shared with fsck_ovlayer.c ---------------------------------------- */

const char *ovl_xattr(const struct hu_layer *l, bool other, const char *what,
		      char *buf, size_t len)
{
	return hu_marker_xattr(HU_FMT_OVERLAY, l->userxattr != other, what,
			       buf, len);
}

const char *ovl_redirect_refused(const char *r)
{
	if (!*r)
		return "empty";
	if (r[0] != '/') {
		if (strchr(r, '/'))
			return "relative, with '/'";
		if (!strcmp(r, ".") || !strcmp(r, ".."))
			return "'.' or '..'";
		return NULL;
	}
	for (const char *s = r; *s == '/';) {
		const char *next = strchrnul(s + 1, '/');
		size_t len = next - (s + 1);

		if (len == 0)
			return "an empty component";
		if (s[1] == '.' && (len == 1 || (len == 2 && s[2] == '.')))
			return "a '.' or '..' component";
		s = next;
	}
	return NULL;
}

void ovl_show_value(const char *v, size_t len, char *buf, size_t size)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 5 < size; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c >= 0x20 && c < 0x7f && c != '\\')
			buf[o++] = (char)c;
		else
			o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
	}
	buf[o] = '\0';
}

int ovl_vdir_key(struct hu_vdir *v, dev_t *dev, ino_t *ino,
		 struct hu_error *e)
{
	struct stat st;

	if (hu_vdir_stat(v, &st) < 0)
		return hu_error_set(e, errno, hu_vdir_path(v),
				    "cannot stat directory");
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

void ovl_below_close(struct ovl_below_path *bp)
{
	while (bp->n > 0)
		hu_vdir_close(bp->chain[--bp->n]);
	free(bp->chain);
	bp->chain = NULL;
}

static int below_push(struct ovl_below_path *bp, struct hu_vdir *v,
		      struct hu_error *e)
{
	struct hu_vdir **c = realloc(bp->chain, (bp->n + 1) * sizeof(*c));

	if (!c) {
		hu_vdir_close(v);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	bp->chain = c;
	bp->chain[bp->n++] = v;
	return 0;
}

int ovl_below_open(struct fsck_run *r, const char *path,
		   struct ovl_below_path *bp, struct hu_vdir **out,
		   struct hu_error *e)
{
	struct hu_vdir *v;
	char *copy, *save = NULL;
	int rc = 0;

	*out = NULL;
	/* Our own lookups report nothing: the engine's walk meets what is
	 * wrong beneath, once. */
	bp->quiet = *fsck_below(r);
	bp->quiet.problems = NULL;
	if (bp->quiet.n == 0)
		return 0;
	if (hu_vdir_open_root(&bp->quiet, &v, e) < 0 ||
	    below_push(bp, v, e) < 0)
		return -1;
	copy = strdup(path);
	if (!copy)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (char *c = strtok_r(copy, "/", &save); c && v;
	     c = strtok_r(NULL, "/", &save)) {
		struct hu_ventry ent;
		struct hu_vdir *child;

		rc = hu_vdir_lookup(v, c, &ent, e);
		if (rc <= 0 || !S_ISDIR(ent.st.st_mode)) {
			v = NULL;
			break;
		}
		rc = hu_vdir_open_child(v, &ent, &child, e);
		if (rc == 0)
			rc = below_push(bp, child, e);
		if (rc < 0)
			break;
		v = child;
	}
	free(copy);
	if (rc < 0)
		return -1;
	*out = v;
	return 0;
}

int ovl_drop_redirect(const struct hu_layer *l, int fd, const char *name,
		      bool opaque, struct hu_error *why)
{
	char op[64], rd[64];
	int err;

	ovl_xattr(l, false, "opaque", op, sizeof(op));
	ovl_xattr(l, false, "redirect", rd, sizeof(rd));
	/* Opaque first: without the redirect it would merge with the
	 * directory of its own name beneath, which it never showed. */
	if (opaque && hu_wr_setxattr_at(fd, name, op, "y", 1, 0) < 0)
		return hu_error_set(why, errno, name, "cannot set %s", op);
	if (hu_wr_removexattr_at(fd, name, rd) == 0)
		return 0;
	err = errno;
	if (opaque)
		(void)hu_wr_removexattr_at(fd, name, op);
	return hu_error_set(why, err, name, "cannot remove %s", rd);
}

void ovl_times_save(int fd, struct ovl_times *t)
{
	struct stat st;

	t->ok = fstat(fd, &st) == 0;
	if (t->ok) {
		t->ts[0] = st.st_atim;
		t->ts[1] = st.st_mtim;
	}
}

void ovl_times_restore(int fd, const struct ovl_times *t)
{
	if (t->ok)
		(void)hu_wr_futimens(fd, t->ts);
}

/* ---- the state of the layer checked ------------------------------------- */

/* One run walks in one thread; a run in another thread has its own. */
static __thread struct ovl_state state;

void ovl_state_free(struct ovl_state *st)
{
	for (size_t i = 0; i < st->nredirects; i++) {
		free(st->redirects[i].path);
		free(st->redirects[i].origin);
		free(st->redirects[i].lower);
	}
	free(st->redirects);
	free(st->belows);
	free(st->impure);
	free(st->first_own);
	free(st->first_other);
	memset(st, 0, sizeof(*st));
}

struct ovl_state *ovl_state(struct fsck_run *r, struct hu_error *e)
{
	(void)e;
	if (state.run != r || state.layer != fsck_layer(r)) {
		ovl_state_free(&state);
		state.run = r;
		state.layer = fsck_layer(r);
	}
	return &state;
}

static size_t depth_of(const struct wh_dir *wd)
{
	size_t k = 0;

	for (; wd->parent; wd = wd->parent)
		k++;
	return k;
}

static int depth_reserve(struct ovl_state *st, size_t k, struct hu_error *e)
{
	size_t cap = st->depth_cap ? st->depth_cap : 16;
	struct hu_vdir **b;
	bool *imp;

	if (k < st->depth_cap)
		return 0;
	while (cap <= k)
		cap *= 2;
	b = realloc(st->belows, cap * sizeof(*b));
	if (b)
		st->belows = b;
	imp = b ? realloc(st->impure, cap * sizeof(*imp)) : NULL;
	if (!imp)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	st->impure = imp;
	st->depth_cap = cap;
	return 0;
}

static bool is_overlay(const struct hu_layer *l)
{
	return l->format == HU_FMT_OVERLAY && !hu_layer_half(l);
}

static int found(struct fsck_run *r, const struct fsck_dir *d,
		 enum hu_problem_id id, const char *name, const char *detail,
		 struct hu_error *e)
{
	return fsck_found(r, id, d->wd->path, name, detail, e);
}

/* fsck_done(), and 0 to go on or -1 to stop, as the checks return. */
static int done(struct fsck_run *r, int rc, struct hu_error *why,
		struct hu_error *e)
{
	return fsck_done(r, rc, why, e) < 0 ? -1 : 0;
}

/* ---- the xattrs of one entry ------------------------------------------- */

/* What an entry's xattr names say, in the layer's namespace. */
struct ovl_names {
	bool origin, redirect, metacopy, whiteout, impure;
	unsigned own, other;	/* overlay xattrs in each namespace */
};

static void scan_names(const struct hu_layer *l, const char *list,
		       ssize_t len, struct ovl_names *n)
{
	const char *own = l->userxattr ? "user.overlay." : "trusted.overlay.";
	const char *other = l->userxattr ? "trusted.overlay." : "user.overlay.";

	memset(n, 0, sizeof(*n));
	for (const char *a = list; a && a < list + len; a += strlen(a) + 1) {
		bool mine = !strncmp(a, own, strlen(own));
		const char *what;

		if (!mine && strncmp(a, other, strlen(other)) != 0)
			continue;
		what = a + strlen(mine ? own : other);
		/* a nested overlay's own xattrs, escaped: not markers */
		if (!strncmp(what, "overlay.", 8))
			continue;
		if (!mine) {
			n->other++;
			continue;
		}
		n->own++;
		n->origin |= !strcmp(what, "origin");
		n->redirect |= !strcmp(what, "redirect");
		n->metacopy |= !strcmp(what, "metacopy");
		n->whiteout |= !strcmp(what, "whiteout");
		n->impure |= !strcmp(what, "impure");
	}
}

/* 1 when entry @name is gone: another check's repair removed it. */
static int read_names(const struct hu_layer *l, int dirfd, const char *name,
		      struct ovl_names *n, struct hu_error *e)
{
	/* XATTR_LIST_MAX: every list fits */
	static __thread char list[65536];
	ssize_t len = hu_listxattr_at(dirfd, name, list, sizeof(list));

	if (len < 0 && name && errno == ENOENT)
		return 1;
	if (len < 0 && errno != ENOTSUP)
		return hu_error_set(e, errno, name, "cannot list xattrs");
	scan_names(l, list, len < 0 ? 0 : len, n);
	return 0;
}

/* The same for entry @name of @d, from what the engine read of it: 1
 * when it is gone. */
static int entry_names(struct fsck_run *r, const struct fsck_dir *d,
		       const char *name, struct ovl_names *n,
		       struct hu_error *e)
{
	const struct fsck_facts *f;

	if (fsck_entry_facts(r, d, name, &f, e) < 0)
		return -1;
	if (!f)
		return 1;
	scan_names(fsck_layer(r), f->xattrs, f->xlen, n);
	return 0;
}

static char *path_of(const char *dir, const char *name)
{
	return name ? hu_path_join(dir, name) : strdup(dir);
}

/* Count the entry's overlay xattrs of each namespace, and remember where
 * each was first met. */
static int count_names(struct ovl_state *st, const struct ovl_names *n,
		       const char *dir, const char *name, struct hu_error *e)
{
	if (n->own && st->own_ns++ == 0 &&
	    !(st->first_own = path_of(dir, name)))
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (n->other && st->other_ns++ == 0 &&
	    !(st->first_other = path_of(dir, name)))
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	return 0;
}

/* ---- directories --------------------------------------------------------- */

static int check_opaque_value(struct fsck_run *r, struct fsck_dir *d,
			      struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_error why = { 0 };
	char attr[64], shown[128];
	ssize_t len;
	char *v;
	int rc;

	if (!wh_dir_may_hold(d->wd, ".opaque"))
		return 0;
	ovl_xattr(l, false, "opaque", attr, sizeof(attr));
	if (wh_xattr_read(d->wd->fd, NULL, attr, &v, &len) < 0)
		return wh_fail(e, errno, l->path, d->wd->path, "",
			       "cannot read %s", attr);
	if (!v || (len == 1 && (v[0] == 'y' || v[0] == 'x'))) {
		free(v);
		return 0;
	}
	if (len == 0)
		snprintf(shown, sizeof(shown), "empty");
	else
		ovl_show_value(v, (size_t)len, shown, sizeof(shown));
	free(v);
	rc = found(r, d, HU_PB_OPAQUE_MARK_VALUE, NULL, shown, e);
	if (rc != 1)
		return rc < 0 ? -1 : 0;
	/* The kernel reads it as not opaque, as the view does: so is the
	 * directory without it. */
	rc = hu_wr_removexattr_at(d->wd->fd, NULL, attr);
	if (rc < 0)
		hu_error_set(&why, errno, NULL, "cannot remove %s", attr);
	else if (d->wd->opaque == HU_OPAQUE_YES)
		d->wd->opaque = HU_OPAQUE_NO;
	return done(r, rc, &why, e);
}

/* Is @name a directory in view directory @v (may be NULL)? */
static int dir_below(struct hu_vdir *v, const char *name, bool *yes,
		     struct hu_error *e)
{
	struct hu_ventry ent;
	int rc;

	*yes = false;
	if (!v)
		return 0;
	rc = hu_vdir_lookup(v, name, &ent, e);
	if (rc < 0)
		return -1;
	*yes = rc == 1 && S_ISDIR(ent.st.st_mode);
	return 0;
}

static int record_redirect(struct ovl_state *st, struct fsck_dir *d,
			   bool own_below, struct hu_error *e)
{
	const char *rd = d->wd->redirect;
	struct ovl_redirect rec = { .own_below = own_below };

	if (ovl_vdir_key(d->below, &rec.dev, &rec.ino, e) < 0)
		return -1;
	if (st->nredirects == st->cap) {
		size_t cap = st->cap ? 2 * st->cap : 16;
		struct ovl_redirect *v = realloc(st->redirects,
						 cap * sizeof(*v));

		if (!v)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		st->redirects = v;
		st->cap = cap;
	}
	rec.path = strdup(d->wd->path);
	rec.origin = rd[0] == '/' ? strdup(rd + 1) :
		     hu_path_join(d->wd->parent->path, rd);
	rec.lower = strdup(hu_vdir_path(d->below));
	if (!rec.path || !rec.origin || !rec.lower) {
		free(rec.path);
		free(rec.origin);
		free(rec.lower);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	st->redirects[st->nredirects++] = rec;
	return 0;
}

static int check_dir_redirect(struct fsck_run *r, struct ovl_state *st,
			      struct fsck_dir *d, size_t k, struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	const char *rd = d->wd->redirect, *refused;
	struct hu_error why = { 0 };
	char shown[256], detail[320];
	bool own_below;
	int rc;

	/* An opaque directory's redirect is never read, nor one in the
	 * bottom layer (nothing to steer). */
	if (d->wd->opaque == HU_OPAQUE_YES || fsck_below(r)->n == 0)
		return 0;
	ovl_show_value(rd, strlen(rd), shown, sizeof(shown));
	refused = ovl_redirect_refused(rd);
	if (refused) {
		snprintf(detail, sizeof(detail), "\"%s\": %s", shown, refused);
		rc = found(r, d, HU_PB_REDIRECT_INVALID, NULL, detail, e);
		if (rc != 1)
			return rc < 0 ? -1 : 0;
		/* The view reads it as no redirect: so is it without. */
		return done(r, ovl_drop_redirect(l, d->wd->fd, NULL, false,
						 &why), &why, e);
	}
	if (dir_below(st->belows[k - 1], d->wd->name, &own_below, e) < 0)
		return wh_prefix(e, l->path, d->wd->path);
	if (d->below)
		return record_redirect(st, d, own_below, e);
	snprintf(detail, sizeof(detail), "\"%s\"", shown);
	rc = found(r, d, HU_PB_REDIRECT_MISSING, NULL, detail, e);
	if (rc != 1)
		return rc < 0 ? -1 : 0;
	return done(r, ovl_drop_redirect(l, d->wd->fd, NULL, own_below, &why),
		    &why, e);
}

int fsck_overlay_dir(struct fsck_run *r, struct fsck_dir *d,
		     struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	size_t k = depth_of(d->wd);
	struct ovl_state *st;
	struct ovl_names n;
	int rc;

	if (!is_overlay(l))
		return 0;
	if (k == 0)
		ovl_state_free(&state);	/* a new layer begins */
	st = ovl_state(r, e);
	if (depth_reserve(st, k, e) < 0)
		return -1;
	/* what a child without a redirect would merge with */
	st->belows[k] = d->merges ? d->below : NULL;
	if (d->wd->xlisted)
		scan_names(l, d->wd->xattrs, d->wd->xlen, &n);
	else if (read_names(l, d->wd->fd, NULL, &n, e) < 0)
		return wh_prefix(e, l->path, d->wd->path);
	/* The kernel marks upper directories only: elsewhere nothing is
	 * missing. */
	st->impure[k] = n.impure || !ovl_checked_is_upper(r);
	/* every other directory's names are counted as an entry */
	if (k == 0 && count_names(st, &n, "", NULL, e) < 0)
		return -1;
	rc = check_opaque_value(r, d, e);
	if (rc == 0 && k > 0 && d->wd->redirect)
		rc = check_dir_redirect(r, st, d, k, e);
	return rc;
}

/* ---- entries --------------------------------------------------------------- */

static int check_impure(struct fsck_run *r, struct ovl_state *st,
			struct fsck_dir *d, const struct wh_ent *ent,
			const struct ovl_names *n, struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	size_t k = depth_of(d->wd);
	struct hu_error why = { 0 };
	char attr[64], detail[300];
	int rc;

	if (st->impure[k])
		return 0;
	st->impure[k] = true;	/* once a directory */
	snprintf(detail, sizeof(detail), "%s has an overlay %s", ent->name,
		 n->redirect ? "redirect" : "origin");
	rc = found(r, d, HU_PB_IMPURE_MISSING, NULL, detail, e);
	if (rc != 1)
		return rc < 0 ? -1 : 0;
	ovl_xattr(l, false, "impure", attr, sizeof(attr));
	rc = hu_wr_setxattr_at(d->wd->fd, NULL, attr, "y", 1, 0);
	if (rc < 0)
		hu_error_set(&why, errno, NULL, "cannot set %s", attr);
	return done(r, rc, &why, e);
}

/* Is there data for metacopy file @name of @d (its redirect @rd, or
 * NULL) beneath, as the kernel looks it up? */
static int metacopy_data(struct fsck_run *r, struct fsck_dir *d,
			 const char *name, const char *rd, bool *has,
			 struct hu_error *e)
{
	struct ovl_below_path bp = { 0 };
	/* by its own name or a relative redirect, only where the directory
	 * merges (an opaque one reaches nothing beneath) */
	struct hu_vdir *v = d->merges ? d->below : NULL;
	struct hu_ventry ent;
	char *dir = NULL;
	const char *leaf = rd ? rd : name;
	int rc = 0, fd;

	*has = false;
	if (rd && rd[0] == '/') {
		char *slash;

		dir = strdup(rd + 1);
		if (!dir)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		slash = strrchr(dir, '/');
		leaf = slash ? slash + 1 : dir;
		if (slash)
			*slash = '\0';
		rc = ovl_below_open(r, slash ? dir : "", &bp, &v, e);
	}
	if (rc == 0 && v)
		rc = hu_vdir_lookup(v, leaf, &ent, e);
	if (rc == 1 && S_ISREG(ent.st.st_mode) &&
	    fsck_below(r)->layers[ent.layer].pindex) {
		/* an OCI layer's file, read from its index: its own data */
		rc = 0;
		*has = true;
	} else if (rc == 1 && S_ISREG(ent.st.st_mode)) {
		fd = hu_vdir_open_data(v, &ent, NULL, e);
		rc = 0;
		if (fd >= 0) {
			close(fd);
			*has = true;
		} else if (e->err == ENOENT || e->err == EIO) {
			hu_error_clear(e);	/* no data: what we ask */
		} else {
			rc = -1;
		}
	}
	ovl_below_close(&bp);
	free(dir);
	return rc < 0 ? -1 : 0;
}

static int remove_xattr(struct fsck_run *r, struct fsck_dir *d,
			const char *name, const char *what,
			struct hu_error *e)
{
	struct hu_error why = { 0 };
	char attr[64];
	int rc;

	ovl_xattr(fsck_layer(r), false, what, attr, sizeof(attr));
	rc = hu_wr_removexattr_at(d->wd->fd, name, attr);
	if (rc < 0)
		hu_error_set(&why, errno, name, "cannot remove %s", attr);
	return done(r, rc, &why, e);
}

static int check_metacopy(struct fsck_run *r, struct fsck_dir *d,
			  const struct wh_ent *ent, const struct ovl_names *n,
			  struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_error why = { 0 };
	char attr[64], detail[320], shown[256];
	char *rd = NULL;
	ssize_t len;
	bool has;
	int rc;

	ovl_xattr(l, false, "metacopy", attr, sizeof(attr));
	len = hu_lgetxattr_at(d->wd->fd, ent->name, attr, NULL, 0);
	if (len < 0)
		return wh_fail(e, errno, l->path, d->wd->path, ent->name,
			       "cannot read %s", attr);
	if (len >= 1 && len <= 3) {
		snprintf(detail, sizeof(detail), "%zd bytes", len);
		rc = found(r, d, HU_PB_METACOPY_BAD_SIZE, ent->name, detail, e);
		if (rc < 0)
			return -1;
		/* empty: a metacopy file without a digest, as the kernel
		 * writes one when it has none to record */
		if (rc == 1) {
			rc = hu_wr_setxattr_at(d->wd->fd, ent->name, attr, "",
					       0, 0);
			if (rc < 0)
				hu_error_set(&why, errno, ent->name,
					     "cannot set %s", attr);
			if (done(r, rc, &why, e) < 0)
				return -1;
		}
	}
	if (n->redirect) {
		ovl_xattr(l, false, "redirect", attr, sizeof(attr));
		if (wh_xattr_read(d->wd->fd, ent->name, attr, &rd, &len) < 0)
			return wh_fail(e, errno, l->path, d->wd->path,
				       ent->name, "cannot read %s", attr);
	}
	if (rd && ovl_redirect_refused(rd)) {
		ovl_show_value(rd, strlen(rd), shown, sizeof(shown));
		snprintf(detail, sizeof(detail), "\"%s\": %s", shown,
			 ovl_redirect_refused(rd));
		free(rd);
		rd = NULL;
		rc = found(r, d, HU_PB_REDIRECT_INVALID, ent->name, detail, e);
		if (rc == 1)
			rc = remove_xattr(r, d, ent->name, "redirect", e);
		if (rc < 0)
			return -1;
	}
	rc = metacopy_data(r, d, ent->name, rd, &has, e);
	free(rd);
	if (rc < 0)
		return wh_prefix(e, l->path, d->wd->path);
	if (has)
		return 0;
	rc = found(r, d, HU_PB_METACOPY_NO_DATA, ent->name, NULL, e);
	if (rc != 1)
		return rc < 0 ? -1 : 0;
	return remove_xattr(r, d, ent->name, "metacopy", e);
}

static int check_file(struct fsck_run *r, struct fsck_dir *d,
		      const struct wh_ent *ent, const struct ovl_names *n,
		      struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	char detail[64];
	struct stat sb;
	int rc;

	if (n->whiteout && !ent->xwhiteout) {
		if (fstatat(d->wd->fd, ent->name, &sb,
			    AT_SYMLINK_NOFOLLOW) < 0)
			return wh_fail(e, errno, l->path, d->wd->path,
				       ent->name, "cannot stat");
		/* The kernel reads it as the file it is, as the view does:
		 * the xattr says nothing. */
		snprintf(detail, sizeof(detail),
			 "not empty (%jd bytes): read as a file",
			 (intmax_t)sb.st_size);
		rc = found(r, d, HU_PB_XWHITEOUT_IGNORED, ent->name, detail,
			   e);
		if (rc == 1)
			rc = remove_xattr(r, d, ent->name, "whiteout", e);
		if (rc < 0)
			return -1;
	}
	return n->metacopy ? check_metacopy(r, d, ent, n, e) : 0;
}

/* A whiteout device in place of xattr whiteout @name, in one rename. */
static int make_device(int dirfd, const char *name, void *ctx)
{
	(void)ctx;
	(void)name;
	return hu_wr_mknodat(dirfd, name, S_IFCHR | 0, makedev(0, 0));
}

static int replace_by_device(struct fsck_dir *d, const char *name,
			     struct hu_error *why)
{
	char *tmp = NULL;
	int err;

	if (hu_make_temp(d->wd->fd, name, make_device, NULL, &tmp) < 0)
		return hu_error_set(why, errno, name,
				    "cannot create a whiteout device");
	if (hu_wr_renameat2(d->wd->fd, tmp, d->wd->fd, name, 0) == 0) {
		free(tmp);
		return 0;
	}
	err = errno;
	(void)hu_wr_unlinkat(d->wd->fd, tmp, 0);
	free(tmp);
	return hu_error_set(why, err, name, "cannot replace the file");
}

/* Remove entry @name of @d, which hides nothing. */
static int remove_entry(struct fsck_dir *d, const char *name,
			struct hu_error *why)
{
	if (hu_wr_unlinkat(d->wd->fd, name, 0) == 0)
		return 0;
	return hu_error_set(why, errno, name, "cannot remove");
}

static int check_xwhiteout(struct fsck_run *r, struct fsck_dir *d,
			   const struct wh_ent *ent, struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	bool upper = ovl_checked_is_upper(r);
	bool bottom = fsck_below(r)->n == 0;
	bool xdir = d->wd->opaque == HU_OPAQUE_XWHITEOUTS;
	struct hu_error why = { 0 };
	struct hu_ventry below;
	struct ovl_times times;
	const char *detail;
	char attr[64];
	int rc, hides = 0;

	if (d->merges) {
		hides = hu_vdir_lookup(d->below, ent->key, &below, e);
		if (hides < 0)
			return wh_prefix(e, l->path, d->wd->path);
	}
	if (!upper && !bottom && xdir && d->merges) {
		/* taken by readdir and lookup alike */
		if (hides)
			return 0;
		rc = found(r, d, HU_PB_WHITEOUT_ORPHAN, ent->name, NULL, e);
		if (rc != 1)
			return rc < 0 ? -1 : 0;
		ovl_times_save(d->wd->fd, &times);
		rc = remove_entry(d, ent->name, &why);
		ovl_times_restore(d->wd->fd, &times);
		return done(r, rc, &why, e);
	}
	detail = upper ? "in the upper layer" :
		 bottom ? "in the bottom layer" :
		 !xdir ? "its directory is not marked overlay.opaque=x" :
		 "its directory merges with nothing beneath";
	rc = found(r, d, HU_PB_XWHITEOUT_IGNORED, ent->name, detail, e);
	if (rc != 1)
		return rc < 0 ? -1 : 0;
	/* Each repair leaves the view as it is (the view, like the
	 * kernel's lookup, takes the whiteout) and makes readdir agree. */
	ovl_times_save(d->wd->fd, &times);
	if (!hides) {
		rc = remove_entry(d, ent->name, &why);
	} else if (upper) {
		rc = replace_by_device(d, ent->name, &why);
	} else {
		ovl_xattr(l, false, "opaque", attr, sizeof(attr));
		rc = hu_wr_setxattr_at(d->wd->fd, NULL, attr, "x", 1, 0);
		if (rc < 0)
			hu_error_set(&why, errno, NULL, "cannot set %s", attr);
		else
			d->wd->opaque = HU_OPAQUE_XWHITEOUTS;
	}
	ovl_times_restore(d->wd->fd, &times);
	return done(r, rc, &why, e);
}

int fsck_overlay_entry(struct fsck_run *r, struct fsck_dir *d,
		       const struct wh_ent *ent, struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct ovl_state *st;
	struct ovl_names n;
	int rc = 0;

	if (!is_overlay(l))
		return 0;
	st = ovl_state(r, e);
	rc = entry_names(r, d, ent->name, &n, e);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (count_names(st, &n, d->wd->path, ent->name, e) < 0)
		return -1;
	if (n.origin || n.redirect)
		rc = check_impure(r, st, d, ent, &n, e);
	if (rc == 0 && S_ISREG(ent->type))
		rc = check_file(r, d, ent, &n, e);
	else if (rc == 0 && !S_ISDIR(ent->type) && n.redirect) {
		rc = found(r, d, HU_PB_REDIRECT_ON_FILE, ent->name, NULL, e);
		if (rc == 1)
			rc = remove_xattr(r, d, ent->name, "redirect", e);
	}
	if (rc == 0 && ent->xwhiteout)
		rc = check_xwhiteout(r, d, ent, e);
	return rc < 0 ? -1 : 0;
}
