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

#include "common/pool.h"
#include "output/treeout.h"

/* ---- errors ------------------------------------------------------------ */

/* "OUT/@dir/@name": @dir is the current directory's path, or the one a
 * file job kept, since the walk has moved on when a worker fails. */
static int prefix_in(const struct hu_treeout *t, const char *dir,
		     const char *name, struct hu_error *e)
{
	hu_error_prefix(e, name);
	hu_error_prefix(e, dir);
	hu_error_prefix(e, t->out);
	return -1;
}

static int fail_in(const struct hu_treeout *t, const char *dir,
		   const char *name, int err, const char *what,
		   struct hu_error *e)
{
	hu_error_set(e, err, NULL, "%s", what);
	return prefix_in(t, dir, name, e);
}

int hu_treeout_prefix(struct hu_treeout *t, const char *name,
		      struct hu_error *e)
{
	return prefix_in(t, t->path.s, name, e);
}

int hu_treeout_fail(struct hu_treeout *t, const char *name, int err,
		    const char *what, struct hu_error *e)
{
	return fail_in(t, t->path.s, name, err, what, e);
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

/* Owner, mode, xattrs and times of a directory or regular file @fd,
 * "@dir/@name" below OUT, which we created with mode @made (umask
 * applied) and so owned by our euid and egid. */
static int meta_fd(const struct hu_treeout *t, const char *dir,
		   const char *name, int src, int fd, const struct stat *st,
		   mode_t made, struct hu_error *e)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };
	bool chown = t->as_root &&
		     (st->st_uid != t->uid || st->st_gid != t->gid);

	/* chown first: it clears setuid/setgid and file capabilities.
	 * Most entries already have the right owner and mode: skip the
	 * calls then, a third of the syscalls of a small file. */
	if (chown && hu_wr_fchownat(fd, "", st->st_uid, st->st_gid,
				    AT_EMPTY_PATH) < 0)
		return fail_in(t, dir, name, errno, "cannot set owner", e);
	if ((chown || made != (st->st_mode & 07777)) &&
	    hu_wr_fchmod(fd, st->st_mode & 07777) < 0)
		return fail_in(t, dir, name, errno, "cannot set mode", e);
	if (hu_copy_xattrs(src, NULL, fd, NULL, e) < 0)
		return prefix_in(t, dir, name, e);
	if (hu_wr_futimens(fd, ts) < 0)
		return fail_in(t, dir, name, errno, "cannot set times", e);
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
	/* (mode_t)-1: always chmod a directory, which may have inherited
	 * a setgid bit from OUT's parent. */
	if (meta_fd(t, t->path.s, "", src, hu_treeout_fd(t), st, (mode_t)-1,
		    e) < 0)
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

	if (hu_linkmap_first(&t->links, st, t->path.s, name, &first) < 0)
		return hu_treeout_fail(t, name, ENOMEM, "out of memory", e);
	if (!first)
		return 0;
	if (hu_linkat_path(t->fds[0], first, hu_treeout_fd(t), name) < 0)
		return hu_treeout_fail(t, name, errno,
				       "cannot create hard link", e);
	return 1;
}

/* A regular file whose bytes and metadata are still to be written: the
 * one job of the worker pool.  It owns its fds and strings. */
struct file_job {
	struct hu_pool_job job;
	const struct hu_treeout *t;
	int src, xsrc, dst;
	struct stat data, meta;
	mode_t made;		/* the mode dst was created with */
	char *dir, *name;
};

static void file_job_free(struct hu_pool_job *j)
{
	struct file_job *f = (struct file_job *)j;

	close(f->dst);
	if (f->xsrc != f->src)
		close(f->xsrc);
	close(f->src);
	free(f->dir);
	free(f->name);
	free(f);
}

static int file_job_run(struct hu_pool_job *j, struct hu_error *e)
{
	struct file_job *f = (struct file_job *)j;
	int rc = -1;

	if (hu_copy_data((struct hu_copy_state *)&f->t->cs, f->src, &f->data,
			 f->dst, e) < 0)
		prefix_in(f->t, f->dir, f->name, e);
	else
		rc = meta_fd(f->t, f->dir, f->name, f->xsrc, f->dst, &f->meta,
			     f->made, e);
	file_job_free(j);
	return rc;
}

int hu_treeout_file(struct hu_treeout *t, const char *name, int src,
		    const struct stat *data, int xsrc,
		    const struct stat *meta, struct hu_error *e)
{
	struct file_job *f = calloc(1, sizeof(*f));

	if (!f) {
		if (xsrc != src)
			close(xsrc);
		close(src);
		return hu_treeout_fail(t, name, ENOMEM, "out of memory", e);
	}
	*f = (struct file_job){ .job = { file_job_run, file_job_free, NULL },
				.t = t, .src = src, .xsrc = xsrc, .dst = -1,
				.data = *data, .meta = *meta };
	/* The final permissions at once (we write through the fd); the
	 * setuid/setgid/sticky bits only after chown and the data, which
	 * would clear them. */
	f->made = meta->st_mode & 0777 & ~t->umask;
	f->dst = hu_wr_create(hu_treeout_fd(t), name, f->made);
	if (f->dst < 0) {
		int err = errno;

		file_job_free(&f->job);
		return hu_treeout_fail(t, name, err, "cannot create", e);
	}
	f->dir = strdup(t->path.s ? t->path.s : "");
	f->name = strdup(name);
	if (!f->dir || !f->name) {
		file_job_free(&f->job);
		return hu_treeout_fail(t, name, ENOMEM, "out of memory", e);
	}
	if (!t->pool)
		return file_job_run(&f->job, e);
	return hu_pool_submit(t->pool, &f->job, e);
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

/* Refuse an existing OUT (@st) that is the root of one of @layers: an
 * empty layer may be replaced by the rule, never while read. */
static int check_not_layer(const struct hu_treeout *t, const struct stat *st,
			   const struct hu_layer *layers, size_t n,
			   struct hu_error *e)
{
	for (size_t i = 0; i < n; i++)
		if (st->st_dev == layers[i].dev && st->st_ino == layers[i].ino)
			return hu_error_set(e, 0, t->out, "is the layer %s: "
					    "refusing to write over an input",
					    layers[i].path);
	return 0;
}

/* Open OUT's parent and keep OUT's last component; OUT must not exist,
 * or be an empty directory (outexist.c), which the new tree replaces. */
static int open_parent(struct hu_treeout *t, const struct hu_layer *layers,
		       size_t n, struct hu_error *e)
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
	t->replace = hu_out_existing(t->parentfd, name, t->out, HU_OUT_TREE,
				     &st, e);
	if (t->replace < 0 || (t->replace &&
			       check_not_layer(t, &st, layers, n, e) < 0))
		goto out;
	if (!(t->base = strdup(name)))
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
				  .as_root = geteuid() == 0,
				  .uid = geteuid(), .gid = getegid() };
	/* Read the umask without changing it for long: no threads yet. */
	t->umask = umask(0);
	umask(t->umask);
	/* fds[0] stays -1 when nothing is begun (a dry run) */
	t->fds = malloc(t->cap * sizeof(*t->fds));
	if (!t->fds)
		return hu_error_set(e, ENOMEM, out, "out of memory");
	t->fds[0] = -1;
	if (open_parent(t, layers, n, e) < 0)
		return -1;
	return hu_check_outside_layers(t->parentfd, layers, n, out, e);
}

/* The root of the new tree exists: in a setgid parent it took the
 * parent's group, and so will everything created below it. */
static int begun(struct hu_treeout *t, struct hu_error *e)
{
	struct stat st;

	if (fstat(t->fds[0], &st) < 0)
		return hu_error_set(e, errno, t->out, "%s", t->words->no_open);
	if (st.st_mode & S_ISGID)
		t->gid = st.st_gid;
	return hu_pool_start(&t->pool, hu_pool_default_threads(), e);
}

static int make_dir(int dirfd, const char *name, void *ctx)
{
	return hu_wr_mkdirat(dirfd, name, 0700);
}

int hu_treeout_begin(struct hu_treeout *t, struct hu_error *e)
{
	if (hu_outlock_take(&t->lock, t->parentfd, t->base, t->out, e) < 0)
		return -1;
	if (hu_make_temp(t->parentfd, t->base, make_dir, NULL, &t->tmp) < 0)
		return hu_error_set(e, errno, t->out, "%s",
				    t->words->no_create);
	t->fds[0] = hu_open_dir_at(t->parentfd, t->tmp);
	if (t->fds[0] < 0)
		return hu_error_set(e, errno, t->out, "%s", t->words->no_open);
	return begun(t, e);
}

int hu_treeout_end(struct hu_treeout *t, int rc, struct hu_error *e)
{
	/* Every file written (or dropped) before the tree is judged. */
	if (t->pool && hu_pool_finish(t->pool, rc < 0 ? NULL : e) < 0)
		rc = -1;
	t->pool = NULL;
	while (t->fds && t->depth > 0)
		pop_dir(t);
	if (t->fds && t->fds[0] >= 0)
		close(t->fds[0]);
	if (rc == 0 && t->tmp &&
	    hu_wr_renameat2(t->parentfd, t->tmp, t->parentfd, t->base,
			    t->replace ? 0 : RENAME_NOREPLACE) < 0)
		rc = hu_error_set(e, errno, t->out, "%s", t->words->no_move);
	if (rc < 0 && t->tmp)
		(void)hu_rmtree(t->parentfd, t->tmp);
	hu_outlock_drop(&t->lock, t->parentfd);
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
