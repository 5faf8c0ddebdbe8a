/* SPDX-License-Identifier: MIT */
/*
 * Writing a new tree beside OUT and renaming it into place: the output
 * side of merge -o and whiteout convert -o (see treeout.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "treeout.h"

/* ---- errors ------------------------------------------------------------ */

int hu_treeout_prefix(struct hu_treeout *t, const char *name,
		      struct hu_error *e)
{
	hu_error_prefix(e, name);
	hu_error_prefix(e, t->path.s);
	hu_error_prefix(e, t->out);
	return -1;
}

int hu_treeout_fail(struct hu_treeout *t, const char *name, int err,
		    const char *what, struct hu_error *e)
{
	hu_error_set(e, err, NULL, "%s", what);
	return hu_treeout_prefix(t, name, e);
}

/* ---- the directory stack ----------------------------------------------- */

static int push_dir(struct hu_treeout *t, int fd, const char *name)
{
	size_t saved;

	if (t->depth + 1 >= t->cap) {
		size_t cap = t->cap * 2;
		int *fds = realloc(t->fds, cap * sizeof(*fds));

		if (!fds)
			return -1;
		t->fds = fds;
		t->cap = cap;
	}
	if (hu_pathbuf_push(&t->path, name, &saved) < 0)
		return -1;
	t->fds[++t->depth] = fd;
	return 0;
}

static void pop_dir(struct hu_treeout *t)
{
	char *slash;

	close(t->fds[t->depth--]);
	slash = t->path.s ? strrchr(t->path.s, '/') : NULL;
	hu_pathbuf_pop(&t->path, slash ? (size_t)(slash - t->path.s) : 0);
}

int hu_treeout_dir(struct hu_treeout *t, const char *name,
		   struct hu_error *e)
{
	int fd;

	/* 0700 until its own metadata is set, after its entries */
	if (hu_wr_mkdirat(hu_treeout_fd(t), name, 0700) < 0)
		return hu_treeout_fail(t, name, errno,
				       "cannot create directory", e);
	fd = hu_open_dir_at(hu_treeout_fd(t), name);
	if (fd < 0)
		return hu_treeout_fail(t, name, errno,
				       "cannot open directory", e);
	if (push_dir(t, fd, name) < 0) {
		close(fd);
		return hu_treeout_fail(t, name, ENOMEM, "out of memory", e);
	}
	return 0;
}

/* ---- metadata ---------------------------------------------------------- */

/* Owner, mode, xattrs and times of a directory or regular file @fd. */
static int meta_fd(struct hu_treeout *t, const char *name, int src, int fd,
		   const struct stat *st, struct hu_error *e)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };

	/* chown first: it clears setuid/setgid and file capabilities. */
	if (t->as_root && hu_wr_fchownat(fd, "", st->st_uid, st->st_gid,
					 AT_EMPTY_PATH) < 0)
		return hu_treeout_fail(t, name, errno, "cannot set owner", e);
	if (hu_wr_fchmod(fd, st->st_mode & 07777) < 0)
		return hu_treeout_fail(t, name, errno, "cannot set mode", e);
	if (hu_copy_xattrs(src, NULL, fd, NULL, e) < 0)
		return hu_treeout_prefix(t, name, e);
	if (hu_wr_futimens(fd, ts) < 0)
		return hu_treeout_fail(t, name, errno, "cannot set times", e);
	return 0;
}

/* The same for @name, never opened (symlink, device, fifo): a symlink
 * has no mode of its own. */
static int meta_at(struct hu_treeout *t, const char *name, int srcdir,
		   const struct stat *st, struct hu_error *e)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };
	int dfd = hu_treeout_fd(t);

	if (t->as_root && hu_wr_fchownat(dfd, name, st->st_uid, st->st_gid,
					 AT_SYMLINK_NOFOLLOW) < 0)
		return hu_treeout_fail(t, name, errno, "cannot set owner", e);
	if (!S_ISLNK(st->st_mode) &&
	    hu_wr_fchmodat(dfd, name, st->st_mode & 07777) < 0)
		return hu_treeout_fail(t, name, errno, "cannot set mode", e);
	if (hu_copy_xattrs(srcdir, name, dfd, name, e) < 0)
		return hu_treeout_prefix(t, name, e);
	if (hu_wr_utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return hu_treeout_fail(t, name, errno, "cannot set times", e);
	return 0;
}

int hu_treeout_dir_done(struct hu_treeout *t, int src, const struct stat *st,
			struct hu_error *e)
{
	if (meta_fd(t, "", src, hu_treeout_fd(t), st, e) < 0)
		return -1;
	if (t->depth > 0)
		pop_dir(t);
	return 0;
}

/* ---- entries ----------------------------------------------------------- */

int hu_treeout_hardlink(struct hu_treeout *t, const char *name,
			const struct stat *st, struct hu_error *e)
{
	const char *first;
	char *p;

	if (S_ISDIR(st->st_mode) || st->st_nlink < 2)
		return 0;
	first = hu_linkmap_get(&t->links, st->st_dev, st->st_ino);
	if (first) {
		if (hu_linkat_path(t->fds[0], first, hu_treeout_fd(t),
				   name) < 0)
			return hu_treeout_fail(t, name, errno,
					       "cannot create hard link", e);
		return 1;
	}
	p = hu_path_join(t->path.s, name);
	if (!p || hu_linkmap_put(&t->links, st->st_dev, st->st_ino, p) < 0) {
		free(p);
		return hu_treeout_fail(t, name, ENOMEM, "out of memory", e);
	}
	return 0;
}

int hu_treeout_file(struct hu_treeout *t, const char *name, int src,
		    const struct stat *data, int xsrc,
		    const struct stat *meta, struct hu_error *e)
{
	int fd, rc = -1;

	/* 0600 until the metadata is set, after the data */
	fd = hu_wr_create(hu_treeout_fd(t), name, 0600);
	if (fd < 0)
		return hu_treeout_fail(t, name, errno, "cannot create", e);
	if (hu_copy_data(&t->cs, src, data, fd, e) < 0)
		hu_treeout_prefix(t, name, e);
	else
		rc = meta_fd(t, name, xsrc, fd, meta, e);
	close(fd);
	return rc;
}

int hu_treeout_symlink(struct hu_treeout *t, const char *name,
		       const char *target, int srcdir, const struct stat *st,
		       struct hu_error *e)
{
	if (hu_wr_symlinkat(target, hu_treeout_fd(t), name) < 0)
		return hu_treeout_fail(t, name, errno,
				       "cannot create symlink", e);
	return meta_at(t, name, srcdir, st, e);
}

int hu_treeout_special(struct hu_treeout *t, const char *name, int srcdir,
		       const struct stat *st, struct hu_error *e)
{
	if (hu_wr_mknodat(hu_treeout_fd(t), name, st->st_mode & S_IFMT,
			  st->st_rdev) < 0)
		return hu_treeout_fail(t, name, errno, "cannot create", e);
	return meta_at(t, name, srcdir, st, e);
}

char *hu_read_symlink(int dirfd, const char *name, const struct stat *st)
{
	size_t size = st->st_size + 1;
	char *target = malloc(size);
	ssize_t n;

	if (!target)
		return NULL;
	n = readlinkat(dirfd, name, target, size);
	if (n < 0 || (size_t)n >= size) {
		/* a longer target than lstat said: it changed under us */
		if (n >= 0)
			errno = EAGAIN;
		free(target);
		return NULL;
	}
	target[n] = '\0';
	return target;
}

/* ---- OUT's lifecycle --------------------------------------------------- */

/* Walk up from @dirfd to the filesystem root, comparing each directory
 * with the layer roots. */
int hu_check_outside_layers(int dirfd, const struct hu_layer *layers,
			    size_t n, const char *out, struct hu_error *e)
{
	struct stat st, up;
	int fd = dup(dirfd), next;

	if (fd < 0)
		return hu_error_set(e, errno, out, "cannot open parent");
	while (fstat(fd, &st) == 0) {
		for (size_t i = 0; i < n; i++) {
			if (st.st_dev == layers[i].dev &&
			    st.st_ino == layers[i].ino) {
				close(fd);
				return hu_error_set(e, 0, out,
					"lies inside layer %s", layers[i].path);
			}
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

/* Open OUT's parent and keep OUT's last component; OUT must not exist. */
static int open_parent(struct hu_treeout *t, struct hu_error *e)
{
	const struct hu_treeout_words *w = t->words;
	char *a = strdup(t->out), *b = strdup(t->out);
	const char *dir, *name;
	struct stat st;
	int rc = -1;

	if (!a || !b) {
		hu_error_set(e, ENOMEM, t->out, "out of memory");
		goto out;
	}
	dir = dirname(a);
	name = basename(b);
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..") ||
	    !strcmp(name, "/")) {
		hu_error_set(e, EINVAL, t->out, "%s", w->bad_name);
		goto out;
	}
	t->parentfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->parentfd < 0) {
		hu_error_set(e, errno, dir, "%s", w->no_parent);
		goto out;
	}
	if (fstatat(t->parentfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		hu_error_set(e, w->exists_err, t->out, "%s", w->exists);
	else if (errno != ENOENT)
		hu_error_set(e, errno, t->out, "%s", w->no_check);
	else if (!(t->base = strdup(name)))
		hu_error_set(e, ENOMEM, t->out, "out of memory");
	else
		rc = 0;
out:
	free(a);
	free(b);
	return rc;
}

int hu_treeout_open(struct hu_treeout *t, const char *out,
		    const struct hu_treeout_words *words,
		    const struct hu_layer *layers, size_t n,
		    struct hu_error *e)
{
	*t = (struct hu_treeout){ .out = out, .words = words,
				  .parentfd = -1, .cap = 32,
				  .as_root = geteuid() == 0 };
	/* fds[0] stays -1 when nothing is begun (a dry run) */
	t->fds = malloc(t->cap * sizeof(*t->fds));
	if (!t->fds)
		return hu_error_set(e, ENOMEM, out, "out of memory");
	t->fds[0] = -1;
	if (open_parent(t, e) < 0)
		return -1;
	return hu_check_outside_layers(t->parentfd, layers, n, out, e);
}

int hu_treeout_begin(struct hu_treeout *t, struct hu_error *e)
{
	size_t len = strlen(t->base) + 32;
	unsigned int seed = (unsigned)getpid() ^ (unsigned)time(NULL);

	t->tmp = malloc(len);
	if (!t->tmp)
		return hu_error_set(e, ENOMEM, t->out, "out of memory");
	for (int tries = 0; tries < 100; tries++) {
		seed = seed * 1103515245u + 12345u;
		snprintf(t->tmp, len, ".%s.hunion-%06x", t->base,
			 seed & 0xffffff);
		if (hu_wr_mkdirat(t->parentfd, t->tmp, 0700) == 0) {
			t->fds[0] = hu_open_dir_at(t->parentfd, t->tmp);
			if (t->fds[0] < 0)
				return hu_error_set(e, errno, t->out, "%s",
						    t->words->no_open);
			return 0;
		}
		if (errno != EEXIST)
			break;
	}
	hu_error_set(e, errno, t->out, "%s", t->words->no_create);
	free(t->tmp);
	t->tmp = NULL;
	return -1;
}

int hu_treeout_end(struct hu_treeout *t, int rc, struct hu_error *e)
{
	while (t->fds && t->depth > 0)
		pop_dir(t);
	if (t->fds && t->fds[0] >= 0)
		close(t->fds[0]);
	if (rc == 0 && t->tmp &&
	    hu_wr_renameat2(t->parentfd, t->tmp, t->parentfd, t->base,
			    RENAME_NOREPLACE) < 0)
		rc = hu_error_set(e, errno, t->out, "%s", t->words->no_move);
	if (rc < 0 && t->tmp)
		(void)hu_rmtree(t->parentfd, t->tmp);
	hu_linkmap_free(&t->links);
	hu_pathbuf_free(&t->path);
	free(t->fds);
	free(t->tmp);
	free(t->base);
	if (t->parentfd >= 0)
		close(t->parentfd);
	*t = (struct hu_treeout){ .parentfd = -1 };
	return rc;
}
