/* SPDX-License-Identifier: MIT */
/*
 * Output files that appear whole or not at all: written as a hidden
 * temporary file beside the final name (".NAME.hunion-XXXXXX"), renamed
 * over it when complete, removed on failure.  "-" is standard output,
 * which can only be written as it goes.  A writer holds the output's lock
 * (outlock.c) from before its temporary exists until it is gone.  A pair
 * (a tarball and its descriptor) is renamed in together or not at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* Refuse to write @path (whose stat is @st) over the file of a tarball
 * layer of @s: the input would be lost. */
static int check_not_input(const char *path, const struct stat *st,
			   const struct hu_stack *s, struct hu_error *e)
{
	for (size_t i = 0; s && i < s->n; i++) {
		const struct hu_layer *l = &s->layers[i];

		if ((l->unpacked || l->pindex) &&
		    l->file_dev == st->st_dev &&
		    l->file_ino == st->st_ino)
			return hu_error_set(e, 0, path, "is the layer %s: "
					    "refusing to write over an input",
					    l->path);
	}
	return 0;
}

/* Check what is at @name of @f's directory: the rule of outexist.c,
 * and not an input. */
static int check_existing(struct hu_outfile *f, const char *name,
			  const struct hu_stack *s, struct hu_error *e)
{
	struct stat lst, st;
	int rc;

	/* a symlink to an input says so; any symlink is refused */
	if (fstatat(f->dirfd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(lst.st_mode) && fstatat(f->dirfd, name, &st, 0) == 0 &&
	    check_not_input(f->name, &st, s, e) < 0)
		return -1;
	rc = hu_out_existing(f->dirfd, name, f->name, HU_OUT_FILE, &lst, e);
	return rc > 0 ? check_not_input(f->name, &lst, s, e) : rc;
}

/* Open the directory of f->name into f->dirfd and keep its last
 * component in f->base; refuse what may not be replaced (outexist.c), or
 * an input. */
static int open_parent(struct hu_outfile *f, const struct hu_stack *s,
		       struct hu_error *e)
{
	const char *path = f->name;
	char *a = strdup(path), *b = strdup(path);
	const char *dir, *name;
	int rc = -1;

	if (!a || !b) {
		hu_error_set(e, ENOMEM, path, "out of memory");
		goto out;
	}
	dir = dirname(a);
	name = basename(b);
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..") ||
	    !strcmp(name, "/") || path[strlen(path) - 1] == '/') {
		hu_error_set(e, EISDIR, path, "not a file name");
		goto out;
	}
	f->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f->dirfd < 0) {
		hu_error_set(e, errno, dir, "cannot open the output's "
			     "directory");
		goto out;
	}
	if (check_existing(f, name, s, e) < 0)
		goto out;
	f->base = strdup(name);
	rc = f->base ? 0 : hu_error_set(e, ENOMEM, path, "out of memory");
out:
	free(a);
	free(b);
	return rc;
}

/* Everything but the lock and the temporary: nothing is made yet. */
static int prepare(struct hu_outfile *f, const char *path,
		   const struct hu_stack *s, struct hu_error *e)
{
	struct stat st;

	memset(f, 0, sizeof(*f));
	f->fd = f->dirfd = f->lock.fd = -1;
	f->name = path;
	if (!strcmp(path, "-")) {
		f->fd = STDOUT_FILENO;
		/* "-o - base.tar up >>base.tar" */
		if (fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode))
			return check_not_input("standard output", &st, s, e);
		return 0;
	}
	if (open_parent(f, s, e) < 0)
		return -1;
	return hu_check_outside_layers(f->dirfd, s ? s->layers : NULL,
				       s ? s->n : 0, path, e);
}

static int create_file(int dirfd, const char *name, void *ctx)
{
	return hu_wr_create(dirfd, name, 0666);
}

/* Wait for the output's lock, then make the temporary. */
static int begin(struct hu_outfile *f, struct hu_error *e)
{
	if (f->dirfd < 0)	/* standard output */
		return 0;
	if (hu_outlock_take(&f->lock, f->dirfd, f->base, f->name, e) < 0)
		return -1;
	f->fd = hu_make_temp(f->dirfd, f->base, create_file, NULL, &f->tmp);
	return f->fd < 0 ? hu_error_set(e, errno, f->name, "cannot create") : 0;
}

int hu_outfile_open(struct hu_outfile *f, const char *path,
		    const struct hu_stack *s, struct hu_error *e)
{
	if (prepare(f, path, s, e) < 0 || begin(f, e) < 0) {
		hu_outfile_abort(f);
		return -1;
	}
	return 0;
}

/* The same output: one directory and name, or one inode. */
static bool same_output(const struct hu_outfile *a, const struct hu_outfile *b)
{
	struct stat da, db, fa, fb;

	if (a->dirfd < 0 || b->dirfd < 0 || fstat(a->dirfd, &da) < 0 ||
	    fstat(b->dirfd, &db) < 0)
		return false;
	if (da.st_dev == db.st_dev && da.st_ino == db.st_ino &&
	    !strcmp(a->base, b->base))
		return true;
	return fstatat(a->dirfd, a->base, &fa, AT_SYMLINK_NOFOLLOW) == 0 &&
	       fstatat(b->dirfd, b->base, &fb, AT_SYMLINK_NOFOLLOW) == 0 &&
	       fa.st_dev == fb.st_dev && fa.st_ino == fb.st_ino;
}

/* Lock in one order, whichever process takes two locks: by directory,
 * then by name.  Else two runs could each wait for the other. */
static bool locks_first(const struct hu_outfile *a, const struct hu_outfile *b)
{
	struct stat da, db;

	if (a->dirfd < 0 || b->dirfd < 0 || fstat(a->dirfd, &da) < 0 ||
	    fstat(b->dirfd, &db) < 0)
		return true;
	if (da.st_dev != db.st_dev)
		return da.st_dev < db.st_dev;
	if (da.st_ino != db.st_ino)
		return da.st_ino < db.st_ino;
	return strcmp(a->base, b->base) < 0;
}

int hu_outfile_open2(struct hu_outfile f[2], const char *const paths[2],
		     const struct hu_stack *s, struct hu_error *e)
{
	int first;

	memset(&f[1], 0, sizeof(f[1]));
	f[1].fd = f[1].dirfd = f[1].lock.fd = -1;
	if (prepare(&f[0], paths[0], s, e) < 0 ||
	    prepare(&f[1], paths[1], s, e) < 0)
		goto fail;
	if (same_output(&f[0], &f[1])) {
		hu_error_set(e, 0, paths[1], "is the same file as %s",
			     paths[0]);
		goto fail;
	}
	first = locks_first(&f[0], &f[1]) ? 0 : 1;
	if (begin(&f[first], e) < 0 || begin(&f[!first], e) < 0)
		goto fail;
	return 0;
fail:
	hu_outfile_abort(&f[1]);
	hu_outfile_abort(&f[0]);
	return -1;
}

int hu_outfile_write(struct hu_outfile *f, const void *buf, size_t len,
		     struct hu_error *e)
{
	const char *p = buf;

	while (len) {
		ssize_t n = hu_wr_write(f->fd, p, len);

		if (n < 0 && hu_eintr_retry())
			continue;
		if (n <= 0)
			return hu_error_set(e, n < 0 ? errno : EIO, f->name,
					    "cannot write");
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Close the temporary: a full disk may only show then (NFS, some FUSE). */
static int close_temp(struct hu_outfile *f, struct hu_error *e)
{
	int rc = close(f->fd);

	f->fd = -1;
	return rc < 0 ? hu_error_set(e, errno, f->name, "cannot write") : 0;
}

static int rename_in(struct hu_outfile *f, struct hu_error *e)
{
	if (hu_wr_renameat2(f->dirfd, f->tmp, f->dirfd, f->base, 0) < 0)
		return hu_error_set(e, errno, f->name, "cannot move the new "
				    "file into place");
	free(f->tmp);
	f->tmp = NULL;
	return 0;
}

int hu_outfile_commit(struct hu_outfile *f, struct hu_error *e)
{
	if (!f->tmp)		/* standard output */
		return 0;
	if (close_temp(f, e) < 0 || rename_in(f, e) < 0) {
		hu_outfile_abort(f);
		return -1;
	}
	hu_outfile_abort(f);
	return 0;
}

/* ---- a pair ---------------------------------------------------------------- */

static int link_backup(int dirfd, const char *name, void *base)
{
	return hu_wr_linkat(dirfd, base, dirfd, name);
}

static int move_backup(int dirfd, const char *name, void *base)
{
	return hu_wr_renameat2(dirfd, base, dirfd, name, RENAME_NOREPLACE);
}

/* Keep the old file of @f, if any, under a temporary name until both
 * new files are in: a second name of it, or where the filesystem has no
 * hard links, the file itself moved aside (its name is then missing
 * until the new file is renamed in). */
static int backup(struct hu_outfile *f, struct hu_error *e)
{
	struct stat st;

	if (fstatat(f->dirfd, f->base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : hu_error_set(e, errno, f->name,
				"cannot check the output");
	if (hu_make_temp(f->dirfd, f->base, link_backup, f->base,
			 &f->bak) >= 0)
		return 0;
	f->bak_moved = errno == EPERM || errno == EOPNOTSUPP ||
		       errno == EMLINK;
	if (f->bak_moved && hu_make_temp(f->dirfd, f->base, move_backup,
					 f->base, &f->bak) >= 0)
		return 0;
	return hu_error_set(e, errno, f->name, "cannot keep the old file "
			    "until the new one is in place");
}

/* After a failed commit: the old file of @f back in place, or, when
 * there was none, the new one (@renamed in) removed. */
static void restore(struct hu_outfile *f, bool renamed, struct hu_error *e)
{
	if (f->bak && (renamed || f->bak_moved)) {
		if (hu_wr_renameat2(f->dirfd, f->bak, f->dirfd, f->base,
				    0) < 0) {
			hu_error_set(e, errno, f->name, "cannot put the old "
				     "file back: it is %s beside it", f->bak);
			return;		/* kept */
		}
	} else if (f->bak) {
		(void)hu_wr_unlinkat(f->dirfd, f->bak, 0);
	} else if (renamed) {
		(void)hu_wr_unlinkat(f->dirfd, f->base, 0);
	}
	free(f->bak);
	f->bak = NULL;
}

int hu_outfile_commit2(struct hu_outfile f[2], struct hu_error *e)
{
	int rc = 0, in = 0;

	if (!f[0].tmp || !f[1].tmp)	/* one is standard output */
		return hu_outfile_commit(&f[0], e) < 0 ||
		       hu_outfile_commit(&f[1], e) < 0 ? -1 : 0;
	for (int i = 0; i < 2 && rc == 0; i++)
		rc = close_temp(&f[i], e);
	for (int i = 0; i < 2 && rc == 0; i++)
		rc = backup(&f[i], e);
	while (rc == 0 && in < 2 && (rc = rename_in(&f[in], e)) == 0)
		in++;
	for (int i = 0; i < 2; i++) {
		if (rc < 0)
			restore(&f[i], i < in, e);
		else if (f[i].bak)
			(void)hu_wr_unlinkat(f[i].dirfd, f[i].bak, 0);
		hu_outfile_abort(&f[i]);
	}
	return rc;
}

void hu_outfile_abort(struct hu_outfile *f)
{
	if (f->tmp) {
		if (f->fd >= 0)
			close(f->fd);
		(void)hu_wr_unlinkat(f->dirfd, f->tmp, 0);
	}
	if (f->lock.name)
		hu_outlock_drop(&f->lock, f->dirfd);
	if (f->dirfd >= 0)
		close(f->dirfd);
	free(f->tmp);
	free(f->base);
	free(f->bak);
	f->tmp = f->base = f->bak = NULL;
	f->fd = f->dirfd = -1;
}

/* 16 MiB: large enough for the disk to get long requests, small enough
 * that what is in flight stays a few dozen MiB. */
#define WB_WINDOW ((off_t)16 << 20)

void hu_writebehind_init(struct hu_writebehind *w, int fd)
{
	struct stat st;
	off_t at;

	w->fd = -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	at = lseek(fd, 0, SEEK_CUR);
	if (at < 0)
		return;
	w->fd = fd;
	w->started = w->dropped = w->end = at;
}

int hu_writebehind_wrote(struct hu_writebehind *w, size_t len)
{
	const unsigned int wait = SYNC_FILE_RANGE_WAIT_BEFORE |
		SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;

	if (w->fd < 0)
		return 0;
	w->end += (off_t)len;
	if (w->end - w->started < WB_WINDOW)
		return 0;
	/* the window before the last one: on disk by now, mostly */
	if (w->started - w->dropped >= WB_WINDOW) {
		if (hu_wr_sync_range(w->fd, w->dropped,
				     w->started - w->dropped, wait) < 0)
			goto failed;
		(void)posix_fadvise(w->fd, w->dropped, w->started - w->dropped,
				    POSIX_FADV_DONTNEED);
		w->dropped = w->started;
	}
	if (hu_wr_sync_range(w->fd, w->started, w->end - w->started,
			     SYNC_FILE_RANGE_WRITE) < 0)
		goto failed;
	w->started = w->end;
	return 0;
failed:
	if (errno == EIO || errno == ENOSPC)
		return -1;
	w->fd = -1;		/* not supported here: plain writes */
	return 0;
}
