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
 * whiteout.  The moved directory gets the marker that keeps what lies
 * beneath the target as the view had it: a redirect where it merges with
 * layers there (the view's hu_vdir_redirect_keeps() checks it), opaque
 * where it merges with none but one has its new name.  Where the target
 * has nothing to move, a new directory takes its place; it is made in
 * the staging directory before the record is written, so that the
 * record holds its inode and a re-run moves it like the others.
 *
 * A metacopy file (metadata in the upper, data beneath, perhaps under
 * another name) gets its data: a copy of the bytes the view reads for it,
 * written into its own inode, its metadata kept: the view is the same
 * before and after.  These go first, before any directory of the target
 * moves: the data a metacopy file's redirect names may lie in one.
 *
 * Which directory a redirect reaches and where a metacopy file's data
 * lies is the view's answer (view.c); the names here only say where to
 * rename, and are checked against the inode the view found.
 *
 * With --keep-upper nothing here is done: the analysis refuses what it
 * would refuse, and an upper that needs these steps is merged through a
 * clone (mdkeep.c), where they are done on the clone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "mergedown/mergedown.h"

struct item {
	enum hu_wh_kind kind;	/* HU_WH_REDIRECT (directories), METACOPY */
	char *path;
	char *target;		/* the redirect */
	ino_t src;		/* the target's directory it reaches, 0: none
				 * (a new one is made for @keep) */
	char *srcpath;		/* and its path there (NULL: none) */
	char *keep;		/* it merges with layers beneath the target:
				 * the redirect ("/a/b") the target's
				 * directory keeps to reach them */
	bool opaque;		/* it merges with nothing beneath the target,
				 * and a layer beneath has a directory of
				 * its name there: the target's made opaque */
	bool pull;		/* its parent merges with nothing in the
				 * target: its entries there are pulled
				 * up into it instead (pull_up) */
	bool skip;		/* reaches nothing: nothing to move */
	size_t swapped;		/* moved into a target that has no parent
				 * for it: the length of the path of its
				 * highest ancestor that merges with
				 * nothing (0: none); that one and those
				 * down to it get new directories in the
				 * target (redirects()) */
};

struct items {
	const struct md *m;
	struct item *v;
	size_t n, cap;
	bool file_redirect;	/* a metacopy file's redirect was met */
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
	if (mk->kind == HU_WH_REDIRECT && !is_dir(it->m->up->fd, mk->path)) {
		it->file_redirect = true;
		return 0;
	}
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
		free(it->v[i].srcpath);
		free(it->v[i].keep);
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

/*
 * Redirected directory @x (view directory @d) merges with layers beneath
 * the target: the redirect the target's directory is to keep, from the
 * highest of them (its path there, where the view found it), into
 * @x->keep.  Refused unless the kernel, following it, would find just
 * the directories the view has beneath the target.
 */
static int redirect_to_keep(struct md *m, struct hu_vdir *d, struct item *x,
			    struct hu_error *e)
{
	const char *p = NULL;
	int rc;

	for (size_t j = m->ito; j-- > 0 && !p;)
		p = hu_vdir_layer_path(d, j);
	if (m->tofmt.format != HU_FMT_OVERLAY || !p)
		return md_fail(m->up, x->path, NULL, ENOTSUP, "a redirected "
			       "directory that merges with layers beneath "
			       "the target, which has no overlay redirects: "
			       "merge those first", e);
	x->keep = malloc(strlen(p) + 2);
	if (!x->keep)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	sprintf(x->keep, "/%s", p);
	rc = hu_vdir_redirect_keeps(d, m->ito, x->keep, e);
	if (rc == 0)
		return md_fail(m->up, x->path, NULL, ENOTSUP, "a redirected "
			       "directory whose directories beneath the "
			       "target no redirect of the target's reaches "
			       "as they are: merge those first", e);
	return rc < 0 ? -1 : 0;	/* the view's error names the layer */
}

/* The highest directory above @path that merges with nothing beneath the
 * upper (phase 2 would move its tree in whole, markers dropped): the
 * length of its path into *@len, 0 when none. */
static int under_swapped(struct md *m, const char *path, size_t *len,
			 struct hu_error *e)
{
	char *p = strdup(path);
	int rc = 0;

	*len = 0;
	if (!p)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (char *s = strchr(p, '/'); s && rc >= 0 && !*len;
	     s = strchr(s + 1, '/')) {
		struct hu_vdir *d;

		*s = '\0';
		rc = md_vopen(m->s, p, &d, e);
		if (rc == 1 && hu_vdir_width(d) == 1)
			*len = s - p;
		hu_vdir_close(d);
		*s = '/';
	}
	free(p);
	return rc < 0 ? md_prefix(m->up, NULL, NULL, e) : 0;
}

/* Of the view's parent directory of @path: does it merge with the
 * target's (*@merges), and do the layers beneath the target have a
 * directory of @path's name in it (*@below: with no redirect, the
 * target's directory there would merge with it)? */
static int parent_facts(struct md *m, const char *path, bool *merges,
			bool *below, struct hu_error *e)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash - path) : strdup("");
	struct hu_ventry ent;
	struct hu_vdir *d;
	int rc;

	*merges = *below = false;
	if (!dir)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	rc = md_vopen(m->s, dir, &d, e);
	if (rc == 1) {
		*merges = hu_vdir_layer_fd(d, m->ito) >= 0;
		rc = m->ito ? hu_vdir_lookup_below(d, slash ? slash + 1 : path,
						   m->ito, &ent, e) : 0;
		*below = rc == 1 && S_ISDIR(ent.st.st_mode);
	}
	hu_vdir_close(d);
	free(dir);
	return rc < 0 ? md_prefix(m->up, NULL, NULL, e) : 0;
}

/* Has upper directory @fd a redirect (its own item, then)? */
static bool has_redirect(const struct md *m, int fd)
{
	char attr[64];

	hu_marker_xattr(HU_FMT_OVERLAY, m->up->userxattr, "redirect", attr,
			sizeof(attr));
	return fgetxattr(fd, attr, NULL, 0) >= 0;
}

/* Has entry @name of target directory @fd (NULL: @fd itself) an overlay
 * redirect or metacopy xattr?  1 yes, 0 no, -1 with errno. */
static int has_reference(const struct md *m, int fd, const char *name)
{
	static const char *const what[] = { "redirect", "metacopy" };
	char attr[64];

	for (size_t i = 0; i < 2; i++) {
		hu_marker_xattr(HU_FMT_OVERLAY, m->to->userxattr, what[i],
				attr, sizeof(attr));
		if ((name ? hu_lgetxattr_at(fd, name, attr, NULL, 0) :
		     fgetxattr(fd, attr, NULL, 0)) >= 0)
			return 1;
		if (errno != ENODATA && errno != ENOTSUP)
			return -1;
	}
	return 0;
}

static int find_reference(const struct md *m, int fd, const char *path,
			  char **found, struct hu_error *e);

/* The same for entry @name of target directory @dirfd (lstat @st), at
 * @path: 1 with *@found (malloc'd), 0 none. */
static int entry_reference(const struct md *m, int dirfd, const char *name,
			   const struct stat *st, const char *path,
			   char **found, struct hu_error *e)
{
	char *sub = hu_path_join(path, name);
	int rc, fd;

	if (!sub)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (S_ISDIR(st->st_mode)) {
		fd = hu_open_dir_at(dirfd, name);
		rc = fd < 0 ? md_fail(m->to, sub, NULL, errno, "cannot open",
				      e) :
			find_reference(m, fd, sub, found, e);
		if (fd >= 0)
			close(fd);
	} else {
		rc = has_reference(m, dirfd, name);
		if (rc < 0)
			md_fail(m->to, sub, NULL, errno, "cannot read xattrs",
				e);
		if (rc > 0) {
			*found = sub;
			sub = NULL;
		}
	}
	free(sub);
	return rc;
}

/* The first entry of target tree @fd (at @path; @fd itself included) with
 * an overlay redirect or a metacopy file: 1 with its path in *@found
 * (malloc'd), 0 none. */
static int find_reference(const struct md *m, int fd, const char *path,
			  char **found, struct hu_error *e)
{
	struct hu_names names;
	int rc = has_reference(m, fd, NULL);

	if (rc != 0) {
		if (rc < 0)
			return md_fail(m->to, path, NULL, errno,
				       "cannot read xattrs", e);
		*found = strdup(path);
		return *found ? 1 : hu_error_set(e, ENOMEM, NULL,
						 "out of memory");
	}
	if (hu_names_read(fd, &names, NULL, e) < 0)
		return md_prefix(m->to, path, NULL, e);
	for (size_t i = 0; i < names.n && rc == 0; i++) {
		const char *name = names.v[i].name;
		struct stat st;

		if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			rc = md_fail(m->to, path, name, errno, "cannot stat",
				     e);
		else
			rc = entry_reference(m, fd, name, &st, path, found, e);
	}
	hu_names_free(&names);
	return rc;
}

/*
 * Pull the entries of target directory @tfd that the view shows in upper
 * directory @ufd (through its redirect) up into @ufd, each with one
 * rename(2): the view shows the same inode at the same place before and
 * after, so each step keeps it.  Where both hold a directory that merges,
 * the same one level down.  What the upper hides, and the target's
 * markers, stay behind.
 *
 * With @found, nothing is moved: 1 with *@found (malloc'd) when what
 * would be pulled up holds an overlay redirect or metacopy file.  Such a
 * marker of the target may reach layers beneath it, which it would no
 * longer reach from the upper (looked up through the target first), nor
 * once the upper's tree is swapped in with its markers dropped.
 */
static int pull_dir(struct md *m, int ufd, int tfd, const char *path,
		    char **found, struct hu_error *e)
{
	struct hu_names names;
	struct timespec times[2];
	int rc = 0;

	/* the upper directory's times, before the renames change them */
	if (!found && md_times_get(m, ufd, NULL, true, times, NULL, e) < 0)
		return md_prefix(m->up, path, NULL, e);
	if (hu_names_read(tfd, &names, NULL, e) < 0)
		return md_prefix(m->to, path, NULL, e);
	for (size_t i = 0; i < names.n && rc == 0; i++) {
		const char *name = names.v[i].name, *target;
		enum hu_marker tk, uk;
		struct stat ts, us;
		enum hu_opaque op;
		int u2, t2;

		if (fstatat(tfd, name, &ts, AT_SYMLINK_NOFOLLOW) < 0 ||
		    hu_marker_classify(m->to, tfd, name, &ts, true, &tk,
				       &target, e) < 0) {
			rc = md_fail(m->to, path, name, errno, "cannot stat",
				     e);
			break;
		}
		if (tk != HU_MARK_NONE)
			continue;
		if (fstatat(ufd, name, &us, AT_SYMLINK_NOFOLLOW) < 0) {
			if (found) {	/* only looking */
				rc = entry_reference(m, tfd, name, &ts, path,
						     found, e);
				continue;
			}
			md_step(m, "pull", path, name);
			if (hu_wr_renameat2(tfd, name, ufd, name,
					    RENAME_NOREPLACE) < 0)
				rc = md_fail(m->to, path, name, errno,
					     "cannot move up", e);
			continue;
		}
		if (!S_ISDIR(us.st_mode) || !S_ISDIR(ts.st_mode) ||
		    hu_marker_classify(m->up, ufd, name, &us, true, &uk,
				       &target, e) < 0 || uk != HU_MARK_NONE)
			continue;	/* hidden by the upper's entry */
		u2 = hu_open_dir_at(ufd, name);
		t2 = hu_open_dir_at(tfd, name);
		if (u2 < 0 || t2 < 0)
			rc = md_fail(m->up, path, name, errno, "cannot open", e);
		else if (hu_marker_dir_opaque(m->up, u2, &op, e) < 0)
			rc = md_prefix(m->up, path, name, e);
		else if (op != HU_OPAQUE_YES && !has_redirect(m, u2)) {
			char *sub = hu_path_join(path, name);

			rc = sub ? pull_dir(m, u2, t2, sub, found, e) :
				hu_error_set(e, ENOMEM, NULL, "out of memory");
			free(sub);
		}
		if (u2 >= 0)
			close(u2);
		if (t2 >= 0)
			close(t2);
	}
	hu_names_free(&names);
	return rc;
}

/* Redirected directory @x whose parent merges with nothing in the
 * target: what the view shows of the target's directory is pulled up
 * into the upper's, then the redirect goes (it reaches nothing the view
 * shows any more).  Where a layer beneath has a directory of its name,
 * the upper's is made opaque first: without the redirect it would merge
 * with that one. */
static int pull_up(struct md *m, const struct item *x, struct hu_error *e)
{
	struct hu_vdir *d;
	const char *leaf;
	char attr[64];
	int rc = md_vopen(m->s, x->path, &d, e), ufd, tfd;

	if (rc <= 0)
		return rc < 0 ? md_prefix(m->up, NULL, NULL, e) : 0;
	ufd = hu_vdir_layer_fd(d, m->iup);
	tfd = hu_vdir_layer_fd(d, m->ito);
	md_step(m, "redirect", x->path, NULL);
	rc = ufd >= 0 && tfd >= 0 ? pull_dir(m, ufd, tfd, x->path, NULL, e) :
		0;
	hu_vdir_close(d);
	if (rc < 0)
		return -1;
	hu_marker_xattr(HU_FMT_OVERLAY, m->up->userxattr, "redirect", attr,
			sizeof(attr));
	ufd = md_open_parent(m->up->fd, x->path, &leaf);
	if (ufd < 0)
		rc = md_fail(m->up, x->path, NULL, errno, "cannot open", e);
	else if (x->opaque &&
		 hu_marker_set_opaque(m->up, HU_FMT_OVERLAY, ufd, leaf, true,
				      e) < 0)
		rc = md_prefix(m->up, x->path, NULL, e);
	else if (hu_wr_removexattr_at(ufd, leaf, attr) < 0 &&
		 errno != ENODATA)
		rc = md_fail(m->up, x->path, NULL, errno, "cannot remove the "
			     "redirect", e);
	if (ufd >= 0)
		close(ufd);
	if (rc == 0)
		m->st->prepared++;
	return rc;
}

/* Redirected directory @path (view directory @d), whose entries in the
 * target are to be pulled up: 1 with *@found (malloc'd) when those hold
 * an overlay redirect or metacopy file, which may reach layers beneath
 * the target and would not once pulled up (pull_dir).  Nothing is
 * changed. */
static int reaches_beneath(struct md *m, struct hu_vdir *d, const char *path,
			   char **found, struct hu_error *e)
{
	int ufd = hu_vdir_layer_fd(d, m->iup), tfd = hu_vdir_layer_fd(d, m->ito);

	if (ufd < 0 || tfd < 0)
		return 0;
	return pull_dir(m, ufd, tfd, path, found, e);
}

/*
 * Redirected directory @x (view directory @d) under one that merges with
 * nothing in the target (@merges: not its own parent, but one pulled up
 * above it): its entries there are pulled up, unless they hold markers
 * that may reach layers beneath the target.  Then the target's directory
 * is moved instead, as where the parent merges: the parents the target
 * lacks are made (make_parents), and where a directory above merges with
 * nothing at all (opaque, or new), that one and those down to it get new
 * directories (@x->swapped).  Under one pulled up: refused.
 */
static int pull_or_move(struct md *m, struct hu_vdir *d, struct item *x,
			bool merges, struct hu_error *e)
{
	char *found = NULL;
	int rc = reaches_beneath(m, d, x->path, &found, e);

	if (rc > 0 && !merges) {
		x->pull = false;
		rc = under_swapped(m, x->path, &x->swapped, e);
	} else if (rc > 0) {
		hu_error_set(e, ENOTSUP, NULL, "a redirected directory under "
			     "one that merges with nothing in the target, "
			     "and the target's %s that it shows has a "
			     "redirect or is a metacopy file, which may reach "
			     "layers beneath the target: merge those first",
			     found);
		rc = md_prefix(m->up, x->path, NULL, e);
	}
	free(found);
	return rc;
}

/* The path in the target of the upper's directory @path (no redirect of
 * its own): its nearest redirected ancestor's source, and the rest. */
static char *target_path(const struct items *it, size_t upto, const char *path)
{
	const struct item *best = NULL;
	size_t bl = 0;
	char *p;

	for (size_t i = 0; i < upto; i++) {
		const struct item *y = &it->v[i];
		size_t yl = strlen(y->path);

		if (y->kind != HU_WH_REDIRECT || !y->srcpath || yl <= bl ||
		    strncmp(path, y->path, yl) != 0 ||
		    (path[yl] != '/' && path[yl] != '\0'))
			continue;
		best = y;
		bl = yl;
	}
	if (!best)
		return strdup(path);
	p = malloc(strlen(best->srcpath) + strlen(path + bl) + 1);
	if (p)
		sprintf(p, "%s%s", best->srcpath, path + bl);
	return p;
}

/* Which directory of the target redirected directory it->v[k] reaches,
 * by the view, and its path there, by the redirect (checked to be the
 * inode the view found). */
static int resolve(struct md *m, struct items *it, size_t k,
		   struct hu_error *e)
{
	struct item *x = &it->v[k];
	struct hu_vdir *d;
	struct stat st;
	int rc = md_vopen(m->s, x->path, &d, e), fd;

	if (rc <= 0) {
		x->skip = true;
		return rc < 0 ? md_prefix(m->up, NULL, NULL, e) : 0;
	}
	fd = hu_vdir_layer_fd(d, m->ito);
	if (hu_vdir_bottom_layer(d) < m->ito) {
		rc = under_swapped(m, x->path, &x->swapped, e);
		if (rc == 0)
			rc = redirect_to_keep(m, d, x, e);
	} else if (fd >= 0) {
		bool merges;

		rc = parent_facts(m, x->path, &merges, &x->opaque, e);
		x->pull = !merges;
		/* under a directory pulled up: pulled up too */
		for (size_t i = 0; i < k && !x->pull; i++) {
			const struct item *y = &it->v[i];
			size_t yl = strlen(y->path);

			x->pull = y->kind == HU_WH_REDIRECT && y->pull &&
				  strncmp(x->path, y->path, yl) == 0 &&
				  x->path[yl] == '/';
		}
		/* (--keep-upper merges a clone on the target's) */
		if (rc == 0 && x->pull && !m->same_fs && !m->keep)
			rc = md_fail(m->up, x->path, NULL, EXDEV, "a "
				     "redirected directory under one that "
				     "merges with nothing, and the upper "
				     "on another filesystem: not "
				     "supported", e);
		if (rc == 0 && x->pull)
			rc = pull_or_move(m, d, x, merges, e);
	}
	x->skip = fd < 0 && !x->keep;
	if (rc == 0 && fd >= 0 && fstat(fd, &st) < 0)
		rc = md_fail(m->to, x->path, NULL, errno, "cannot stat", e);
	else if (rc == 0 && fd >= 0)
		x->src = st.st_ino;
	hu_vdir_close(d);
	if (rc < 0 || fd < 0)	/* nothing of the target's to move */
		return rc < 0 ? -1 : 0;
	if (x->target[0] == '/') {
		x->srcpath = strdup(x->target + 1);
	} else {
		const char *slash = strrchr(x->path, '/');
		char *up = slash ? strndup(x->path, slash - x->path) : NULL;
		char *tp = up ? target_path(it, k, up) : NULL;

		if (!slash)
			x->srcpath = strdup(x->target);
		else if (tp && (x->srcpath = malloc(strlen(tp) +
						    strlen(x->target) + 2)))
			sprintf(x->srcpath, "%s/%s", tp, x->target);
		free(up);
		free(tp);
	}
	if (!x->srcpath)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (ino_at(m->to->fd, x->srcpath, &st) != x->src)
		return md_fail(m->up, x->path, NULL, ENOTSUP, "the directory "
			       "this redirect reaches is not at its name in "
			       "the target", e);
	return 0;
}

/* Does the view show the target's directory @ino at @path? */
static int shown_at(struct md *m, const char *path, ino_t ino,
		    struct hu_error *e)
{
	struct hu_vdir *d;
	struct stat st;
	int rc = md_vopen(m->s, path, &d, e), fd;

	if (rc <= 0)
		return rc;
	fd = hu_vdir_layer_fd(d, m->ito);
	rc = fd >= 0 && fstat(fd, &st) == 0 && st.st_ino == ino;
	hu_vdir_close(d);
	return rc;
}

/* Is @path the directory named by the first @n bytes of @dir, or below
 * it? */
static bool is_below(const char *path, const char *dir, size_t n)
{
	return strncmp(path, dir, n) == 0 &&
	       (path[n] == '/' || path[n] == '\0');
}

/* A new directory of the target (where it has none to move, and for the
 * upper's directories above one that merge with nothing) replaces what
 * the target holds at its name, hidden there; what a redirected directory
 * pulls up from there (after the new one is made) would be lost:
 * refused.  What the other redirects move from there is staged first. */
static int new_over_pulled(struct md *m, const struct items *it,
			   struct hu_error *e)
{
	for (size_t i = 0; i < it->n; i++) {
		const struct item *x = &it->v[i];
		size_t len = x->swapped ? x->swapped : strlen(x->path);

		if (x->kind != HU_WH_REDIRECT || x->skip ||
		    (x->srcpath && !x->swapped))
			continue;
		for (size_t j = 0; j < it->n; j++) {
			const struct item *y = &it->v[j];

			if (y->kind == HU_WH_REDIRECT && y->pull &&
			    y->srcpath && is_below(y->srcpath, x->path, len))
				return md_fail(m->up, y->path, NULL, ENOTSUP,
					       "a redirected directory under "
					       "one that merges with nothing, "
					       "reaching a directory of the "
					       "target that another one hides: "
					       "not supported", e);
		}
	}
	return 0;
}

/* A directory of the target that the view shows at two places (reached
 * by a redirect and still seen where it was, or through another redirected
 * directory) cannot be moved to one of them: refused.  The kernel's own
 * renames never make one; a stack made by hand can. */
static int shown_twice(struct md *m, const struct items *it,
		       struct hu_error *e)
{
	for (size_t i = 0; i < it->n; i++) {
		const struct item *x = &it->v[i];
		int rc;

		if (x->kind != HU_WH_REDIRECT || !x->srcpath)
			continue;
		rc = strcmp(x->srcpath, x->path) ?
			shown_at(m, x->srcpath, x->src, e) : 0;
		for (size_t j = 0; j < it->n && rc == 0; j++) {
			const struct item *y = &it->v[j];
			size_t yl;
			char *p;

			if (j == i || y->kind != HU_WH_REDIRECT ||
			    !y->srcpath)
				continue;
			yl = strlen(y->srcpath);
			if (strncmp(x->srcpath, y->srcpath, yl) != 0 ||
			    x->srcpath[yl] != '/')
				continue;
			p = malloc(strlen(y->path) + strlen(x->srcpath) + 1);
			if (!p)
				return hu_error_set(e, ENOMEM, NULL,
						    "out of memory");
			sprintf(p, "%s%s", y->path, x->srcpath + yl);
			rc = strcmp(p, x->path) ? shown_at(m, p, x->src, e) : 0;
			free(p);
		}
		if (rc < 0)
			return md_prefix(m->up, NULL, NULL, e);
		if (rc > 0)
			return md_fail(m->up, x->path, NULL, ENOTSUP, "the "
				       "directory this redirect reaches is "
				       "also shown elsewhere, where the kernel "
				       "answers ESTALE (hunion fsck: "
				       "redirectOriginUncovered): not "
				       "supported", e);
	}
	return 0;
}

/* The parents of @path in the target, made where missing.  Where the
 * target holds something else (hidden by the upper's directory, and so
 * what a layer beneath has there), it is replaced, and made opaque where
 * a layer beneath has the name. */
static int make_parents(struct md *m, const char *path, struct hu_error *e)
{
	char *p = strdup(path);
	int rc = 0;

	if (!p)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (char *s = strchr(p, '/'); s && rc == 0; s = strchr(s + 1, '/')) {
		const char *leaf;
		struct stat st;
		int fd, need;
		bool had;

		*s = '\0';
		fd = md_open_parent(m->to->fd, p, &leaf);
		if (fd < 0) {
			rc = md_fail(m->to, p, NULL, errno, "cannot open", e);
		} else if ((had = fstatat(fd, leaf, &st,
					  AT_SYMLINK_NOFOLLOW) == 0) &&
			   S_ISDIR(st.st_mode)) {
			/* there */
		} else if (hu_rmtree(fd, leaf) < 0 ||
			   (hu_wr_mkdirat(fd, leaf, 0700) < 0 &&
			    errno != EEXIST)) {
			rc = md_fail(m->to, p, NULL, errno, "cannot create", e);
		} else {
			char *dir = strndup(p, leaf > p ? leaf - p - 1 : 0);

			/* with nothing there before, the upper's merged
			 * with the layers beneath, and still does */
			need = !had ? 0 :
				dir ? md_below_has(m, dir, leaf, e) : -1;
			if (!dir)
				hu_error_set(e, ENOMEM, NULL, "out of memory");
			if (need > 0 &&
			    hu_marker_set_opaque(&m->tofmt, m->tofmt.format,
						 fd, leaf, true, e) < 0)
				need = -1;
			if (need < 0)
				rc = md_prefix(m->to, dir, NULL, e);
			free(dir);
		}
		if (fd >= 0)
			close(fd);
		*s = '/';
	}
	free(p);
	return rc;
}

static void stage_name(char *buf, size_t i)
{
	snprintf(buf, 48, MD_STAGE "/%zu", i);
}

/* Is @st a whiteout of the overlay format's own kind (a 0/0 device)? */
static bool is_whiteout_dev(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

/*
 * The staging directory in the target's root is never in the view: a
 * whiteout of its name in the upper's root (the kernel's lookup stops
 * there) is made before it and removed after it (stage_unhide()).  A run
 * killed between leaves both: the next one finishes the intent record
 * and removes them, or, killed before the record was written, makes the
 * same staging directory again (the upper is as it was) and does.  Only
 * an overlay upper has redirects, so the whiteout is of its kind (a 0/0
 * device, which needs no privilege).  Another entry of the upper at the
 * name, not made here, is refused.
 */
static int stage_hide(struct md *m, struct hu_error *e)
{
	struct stat st;

	if (fstatat(m->up->fd, MD_STAGE, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return is_whiteout_dev(&st) ? 0 :
			md_fail(m->up, MD_STAGE, NULL, EEXIST, "a name merge "
				"--into uses for its staging directory: "
				"rename it first", e);
	if (errno != ENOENT)
		return md_fail(m->up, MD_STAGE, NULL, errno, "cannot stat", e);
	if (hu_marker_add_whiteout(m->up, HU_FMT_OVERLAY, m->up->fd, MD_STAGE,
				   e) < 0)
		return md_prefix(m->up, NULL, NULL, e);
	return 0;
}

/* The staging directory gone, the whiteout that hid it goes. */
static int stage_unhide(struct md *m, struct hu_error *e)
{
	struct stat st;

	if (fstatat(m->up->fd, MD_STAGE, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !is_whiteout_dev(&st))
		return 0;
	if (hu_wr_unlinkat(m->up->fd, MD_STAGE, 0) < 0)
		return md_fail(m->up, MD_STAGE, NULL, errno, "cannot remove "
			       "the whiteout", e);
	return 0;
}

/* The staging directory made in the target's root, hidden first. */
static int stage_make(struct md *m, struct hu_error *e)
{
	if (stage_hide(m, e) < 0)
		return -1;
	if (hu_wr_mkdirat(m->to->fd, MD_STAGE, 0700) < 0 && errno != EEXIST)
		return md_fail(m->to, MD_STAGE, NULL, errno, "cannot create",
			       e);
	return 0;
}

/* Move the target's directory @ino from @from to @to (below the target's
 * root), whatever hidden entry @to held removed: 1 done, 0 it was not
 * at @from. */
static int move_dir(struct md *m, ino_t ino, const char *from, const char *to,
		    struct hu_error *e)
{
	const char *sleaf, *dleaf;
	struct stat st;
	int sfd, dfd, rc = 0;

	if (ino_at(m->to->fd, from, &st) != ino)
		return 0;
	sfd = md_open_parent(m->to->fd, from, &sleaf);
	dfd = sfd < 0 ? -1 : md_open_parent(m->to->fd, to, &dleaf);
	if (dfd < 0 || hu_rmtree(dfd, dleaf) < 0 ||
	    hu_wr_renameat2(sfd, sleaf, dfd, dleaf, 0) < 0)
		rc = md_fail(m->to, from, NULL, errno, "cannot move the "
			     "redirected directory", e);
	if (sfd >= 0)
		close(sfd);
	if (dfd >= 0)
		close(dfd);
	return rc < 0 ? -1 : 1;
}

/*
 * Directory @fd of the target is to hold a redirected directory: marked
 * impure first, as the kernel marks the upper directory a merged
 * directory is renamed into (dir.c, ovl_rename()).  Without the mark the
 * kernel's readdir gives such an entry the inode number of its upper
 * directory while stat gives the one of the directory it merges with
 * (fsck: impureMissing).  A mark more is harmless: readdir only looks
 * the entries up.
 */
static int mark_impure(const struct md *m, int fd, struct hu_error *e)
{
	char attr[64];

	hu_marker_xattr(HU_FMT_OVERLAY, m->tofmt.userxattr, "impure", attr,
			sizeof(attr));
	if (hu_wr_setxattr_at(fd, NULL, attr, "y", 1, 0) < 0)
		return hu_error_set(e, errno, NULL, "cannot mark its parent "
				    "directory impure (%s)", attr);
	return 0;
}

/* The moved directory's marker: the redirect by which it still merges
 * with layers beneath the target (in the target's namespace), or opaque,
 * where it merges with nothing beneath and one there has its name. */
static int mark_moved(struct md *m, const struct md_move *mv,
		      struct hu_error *e)
{
	const char *leaf;
	char attr[64];
	int fd = md_open_parent(m->to->fd, mv->dst, &leaf), rc = 0;

	hu_marker_xattr(HU_FMT_OVERLAY, m->tofmt.userxattr, "redirect", attr,
			sizeof(attr));
	if (fd < 0)
		rc = md_fail(m->to, mv->dst, NULL, errno, "cannot open", e);
	else if (strcmp(mv->marker, MD_MARK_OPAQUE) == 0)
		rc = hu_marker_set_opaque(&m->tofmt, m->tofmt.format, fd, leaf,
					  true, e) < 0 ?
			md_prefix(m->to, mv->dst, NULL, e) : 0;
	else if (mark_impure(m, fd, e) < 0)
		rc = md_prefix(m->to, mv->dst, NULL, e);
	else if (hu_wr_setxattr_at(fd, leaf, attr, mv->marker,
				   strlen(mv->marker), 0) < 0)
		rc = md_fail(m->to, mv->dst, NULL, errno, "cannot set the "
			     "redirect", e);
	if (fd >= 0)
		close(fd);
	if (rc == 0)
		m->st->markers++;
	return rc;
}

static size_t depth(const char *p)
{
	size_t n = 0;

	for (; *p; p++)
		n += *p == '/';
	return n;
}

/*
 * The recorded steps: every redirected directory of the target moved into
 * the staging directory, deepest first (so no move changes the path of
 * another still to come), then from there to its new name, parents
 * first; then the upper's redirects removed, and the staging directory.
 * Each part is skipped when done: a re-run after a kill anywhere
 * finishes it.
 */
static int finish_intent(struct md *m, const struct md_intent *in,
			 struct hu_error *e)
{
	char stage[48], attr[64];
	size_t *order = malloc((in->n ? in->n : 1) * sizeof(*order));
	int rc = 0;

	if (!order)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < in->n; i++)
		order[i] = i;
	for (size_t i = 1; i < in->n; i++)	/* insertion sort, stable */
		for (size_t j = i; j > 0 && depth(in->v[order[j]].src) >
			     depth(in->v[order[j - 1]].src); j--) {
			size_t t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	rc = stage_make(m, e);
	for (size_t i = 0; i < in->n && rc == 0; i++) {
		const struct md_move *mv = &in->v[order[i]];

		stage_name(stage, order[i]);
		if (strcmp(mv->src, stage) == 0)	/* a new directory */
			md_step(m, "mkdir", mv->dst, NULL);
		else
			md_step(m, "redirect", mv->src, NULL);
		/* (a dry run made no staging directory to move into) */
		if (strcmp(mv->src, mv->dst) != 0 && strcmp(mv->src, stage) &&
		    !hu_wr_dry_run() &&
		    move_dir(m, mv->ino, mv->src, stage, e) < 0)
			rc = -1;
	}
	for (size_t i = 0; i < in->n && rc == 0 && !hu_wr_dry_run(); i++) {
		const struct md_move *mv = &in->v[i];
		struct stat st;

		stage_name(stage, i);
		if (strcmp(mv->src, mv->dst) == 0) {
			if (*mv->marker)	/* its redirect a new one */
				rc = mark_moved(m, mv, e);
			continue;
		}
		rc = make_parents(m, mv->dst, e);
		if (rc == 0 && move_dir(m, mv->ino, stage, mv->dst, e) < 0)
			rc = -1;
		if (rc == 0 && ino_at(m->to->fd, mv->dst, &st) != mv->ino)
			rc = md_fail(m->to, mv->dst, NULL, ENOENT, "the "
				     "redirected directory is lost: neither "
				     "where it was nor where it goes", e);
		if (rc == 0 && *mv->marker)
			rc = mark_moved(m, mv, e);
	}
	hu_marker_xattr(HU_FMT_OVERLAY, m->up->userxattr, "redirect", attr,
			sizeof(attr));
	for (size_t i = 0; i < in->n && rc == 0; i++) {
		const char *leaf;
		int ufd = md_open_parent(m->up->fd, in->v[i].dst, &leaf);

		stage_name(stage, i);
		if (ufd >= 0 && hu_wr_removexattr_at(ufd, leaf, attr) < 0 &&
		    errno != ENODATA && errno != ENOENT)
			rc = md_fail(m->up, in->v[i].dst, NULL, errno,
				     "cannot remove the redirect", e);
		/* a new directory: the upper's merges with it now, and what
		 * the upper's hid is gone (or hidden by its marker) */
		else if (ufd >= 0 && strcmp(in->v[i].src, stage) == 0 &&
			 hu_marker_set_opaque(m->up, HU_FMT_OVERLAY, ufd, leaf,
					      false, e) < 0 && errno != ENOENT)
			rc = md_prefix(m->up, in->v[i].dst, NULL, e);
		if (ufd >= 0)
			close(ufd);
	}
	if (rc == 0 && hu_wr_unlinkat(m->to->fd, MD_STAGE, AT_REMOVEDIR) < 0 &&
	    errno != ENOENT)
		rc = md_fail(m->to, MD_STAGE, NULL, errno, "cannot remove", e);
	if (rc == 0)
		rc = stage_unhide(m, e);
	if (rc == 0)
		rc = md_intent_clear(m, e);
	if (rc == 0)
		m->st->prepared += in->n;
	free(order);
	return rc;
}

/* A new directory made for entry @i of @in, in the staging directory:
 * moved into place like the others.  It is made before the intent record
 * is written (an earlier run's is taken again), so the record holds its
 * inode. */
static int stage_new(struct md *m, struct md_intent *in, size_t i,
		     struct hu_error *e)
{
	char stage[48];
	struct stat st;

	stage_name(stage, i);
	if (stage_make(m, e) < 0)
		return -1;
	if (hu_wr_mkdirat(m->to->fd, stage, 0700) < 0 && errno != EEXIST)
		return md_fail(m->to, stage, NULL, errno, "cannot create", e);
	in->v[i].ino = hu_wr_dry_run() ? (ino_t)i + 1 :
		ino_at(m->to->fd, stage, &st);
	in->v[i].src = strdup(stage);
	return in->v[i].src ? 0 : hu_error_set(e, ENOMEM, NULL,
						"out of memory");
}

/* An entry of @in: the first @len bytes of @path name a directory that
 * gets a new one in the target (once), made opaque where a layer beneath
 * has one there. */
static int add_new(struct md *m, struct md_intent *in, const char *path,
		   size_t len, struct hu_error *e)
{
	struct md_move *mv = &in->v[in->n];
	bool merges, below;

	for (size_t i = 0; i < in->n; i++)
		if (strlen(in->v[i].dst) == len &&
		    !strncmp(in->v[i].dst, path, len))
			return 0;	/* another's ancestor too */
	*mv = (struct md_move){ .dst = strndup(path, len) };
	if (!mv->dst)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	in->n++;
	if (parent_facts(m, mv->dst, &merges, &below, e) < 0)
		return -1;
	mv->marker = strdup(below ? MD_MARK_OPAQUE : "");
	if (!mv->marker)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	return stage_new(m, in, in->n - 1, e);
}

/*
 * All redirected directories at once, written down first.  One that
 * merges with layers beneath the target and under a directory that
 * merges with nothing (opaque, or new) brings new directories for that
 * one and those down to it (add_new): the upper's then merge with them,
 * and phase 2 merges them rather than moving their trees in whole,
 * which would drop the redirect.
 */
static int redirects(struct md *m, const struct items *it, struct hu_error *e)
{
	struct md_intent in = { 0 };
	size_t cap = 0;
	int rc = 0;

	for (size_t i = 0; i < it->n; i++)
		cap += 1 + depth(it->v[i].path);
	in.v = calloc(cap ? cap : 1, sizeof(*in.v));
	if (!in.v)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < it->n && rc == 0; i++) {
		const struct item *x = &it->v[i];
		const char *p = x->path + x->swapped;
		struct md_move *mv = &in.v[in.n];

		if (x->kind != HU_WH_REDIRECT || x->skip || x->pull)
			continue;
		for (; x->swapped && p && rc == 0; p = strchr(p + 1, '/'))
			rc = add_new(m, &in, x->path, p - x->path, e);
		if (rc < 0)
			break;
		mv = &in.v[in.n++];
		*mv = (struct md_move){
			.ino = x->src, .dst = strdup(x->path),
			.src = x->srcpath ? strdup(x->srcpath) : NULL,
			.marker = strdup(x->keep ? x->keep :
					 x->opaque ? MD_MARK_OPAQUE : "") };
		if (!mv->dst || !mv->marker)
			rc = hu_error_set(e, ENOMEM, NULL, "out of memory");
		else if (!x->srcpath)	/* nothing of the target's there */
			rc = stage_new(m, &in, in.n - 1, e);
		else if (!mv->src)
			rc = hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	if (rc == 0 && in.n)
		rc = md_intent_write(m, &in, e);
	if (rc == 0 && in.n)
		rc = finish_intent(m, &in, e);
	md_intent_free(&in);
	for (size_t i = 0; i < it->n && rc == 0; i++)
		if (it->v[i].kind == HU_WH_REDIRECT && it->v[i].pull)
			rc = pull_up(m, &it->v[i], e);
	return rc;
}

/*
 * Metacopy file @name of upper directory @dirfd (lstat @st) gets its data
 * @datafd written into its own inode (so its other names, its owner and
 * its xattrs stay), its times put back, then loses its metacopy mark
 * (and the redirect to its data).  While the mark is there the view reads
 * the data beneath and ignores these bytes: a run killed meanwhile left
 * nothing the view shows, and the next writes them again.
 */
static int fill_in(struct md *m, int dirfd, const char *name,
		   const struct stat *st, int datafd, struct hu_error *e)
{
	struct timespec ts[2];
	struct stat data;
	char attr[64];
	int fd = openat(dirfd, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC), rc;

	(void)st;
	if (fd < 0)
		return hu_error_set(e, errno, name, "cannot open for writing");
	/* its times, recorded before the writes change them */
	rc = md_times_get(m, fd, NULL, true, ts, NULL, e);
	if (rc == 0)
		rc = fstat(datafd, &data) < 0 ?
		hu_error_set(e, errno, name, "cannot stat its data") :
		hu_copy_data(&m->cs, datafd, &data, fd, e);
	if (rc == 0 && hu_wr_ftruncate(fd, data.st_size) < 0)
		rc = hu_error_set(e, errno, name, "cannot set the size");
	if (rc == 0 && (hu_wr_futimens(fd, ts) < 0 || hu_wr_fsync(fd) < 0))
		rc = hu_error_set(e, errno, name, "cannot write");
	if (rc == 0)
		rc = md_times_clear(m, fd, e);
	close(fd);
	if (rc < 0 && !e->path)
		hu_error_prefix(e, name);	/* from hu_copy_data */
	if (rc < 0)
		return -1;
	for (int i = 0; i < 2 && rc == 0; i++) {
		hu_marker_xattr(HU_FMT_OVERLAY, m->up->userxattr,
				i ? "redirect" : "metacopy", attr, sizeof(attr));
		if (hu_wr_removexattr_at(dirfd, name, attr) < 0 &&
		    errno != ENODATA)
			rc = hu_error_set(e, errno, name, "cannot remove %s",
					  attr);
	}
	return rc;
}

/* Metacopy file @path: its data written into it. */
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
	    fd < 0) {
		rc = -1;	/* the view's error names the layer and path */
		goto out;
	}
	if (rc == 1 && fd >= 0 && !own) {
		struct timespec ts[2];

		/* the directory's times before the rename changes them */
		if (md_times_get(m, ent.dirfd, NULL, true, ts, NULL, e) < 0) {
			rc = md_prefix(m->up, dir, NULL, e);
			goto out;
		}
		md_step(m, "data", dir, leaf);
		rc = fill_in(m, ent.dirfd, leaf, &ent.st, fd, e);
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
	/* detection listed every xattr of the upper and found none of
	 * these: nothing to search for */
	if (m->up->refs == HU_REFS_NONE)
		return 0;
	if (hu_wh_list(m->up, collect, &it, e) < 0) {
		items_free(&it);
		return -1;
	}
	for (size_t i = 0; i < it.n && rc == 0; i++)
		if (it.v[i].kind == HU_WH_REDIRECT)
			rc = resolve(m, &it, i, e);
	if (rc == 0)
		rc = shown_twice(m, &it, e);
	if (rc == 0)
		rc = new_over_pulled(m, &it, e);
	/* --keep-upper: what is refused is refused above, before anything
	 * is changed.  A redirected directory's move changes the target
	 * under the upper (which then shows another view), and the data a
	 * metacopy file's redirect names may be replaced in the target
	 * before the file is copied: both go through a clone. */
	for (size_t i = 0; i < it.n && rc == 0 && m->keep; i++)
		if (it.v[i].kind == HU_WH_REDIRECT ||
		    (it.v[i].kind == HU_WH_METACOPY && it.file_redirect))
			rc = 1;
	if (m->keep) {
		items_free(&it);
		return rc;
	}
	/* Metacopy files first: the data a redirect of theirs names may lie
	 * in a directory of the target that a redirected directory moves
	 * (each fill-in keeps the view). */
	for (size_t i = 0; i < it.n && rc == 0; i++)
		if (it.v[i].kind == HU_WH_METACOPY)
			rc = materialize(m, it.v[i].path, e);
	if (rc == 0)
		rc = redirects(m, &it, e);
	items_free(&it);
	return rc;
}
