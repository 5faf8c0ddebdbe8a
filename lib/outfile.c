/* SPDX-License-Identifier: MIT */
/*
 * Output files that appear whole or not at all: written as a hidden
 * temporary file beside the final name (".NAME.hunion-XXXXXX"), renamed
 * over it when complete, removed on failure.  "-" is standard output,
 * which can only be written as it goes.
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

/* Open the directory of @path into f->dirfd and keep its last component
 * in f->base; refuse a name that is not a regular file already. */
static int open_parent(struct hu_outfile *f, const char *path,
		       struct hu_error *e)
{
	char *a = strdup(path), *b = strdup(path);
	const char *dir, *name;
	struct stat st;
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
	if (fstatat(f->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode)) {
			hu_error_set(e, EISDIR, path, "cannot write");
			goto out;
		}
		if (!S_ISREG(st.st_mode)) {
			hu_error_set(e, 0, path, "exists and is not a regular "
				     "file");
			goto out;
		}
	} else if (errno != ENOENT) {
		hu_error_set(e, errno, path, "cannot check the output");
		goto out;
	}
	f->base = strdup(name);
	rc = f->base ? 0 : hu_error_set(e, ENOMEM, path, "out of memory");
out:
	free(a);
	free(b);
	return rc;
}

static int create_file(int dirfd, const char *name)
{
	return hu_wr_create(dirfd, name, 0666);
}

static int make_temp(struct hu_outfile *f, struct hu_error *e)
{
	f->fd = hu_make_temp(f->dirfd, f->base, create_file, &f->tmp);
	return f->fd < 0 ? hu_error_set(e, errno, f->name, "cannot create") : 0;
}

int hu_outfile_open(struct hu_outfile *f, const char *path,
		    const struct hu_stack *s, struct hu_error *e)
{
	memset(f, 0, sizeof(*f));
	f->fd = f->dirfd = -1;
	f->name = path;
	if (!strcmp(path, "-")) {
		f->fd = STDOUT_FILENO;
		return 0;
	}
	if (open_parent(f, path, e) < 0 ||
	    hu_check_outside_layers(f->dirfd, s ? s->layers : NULL,
				    s ? s->n : 0, path, e) < 0 ||
	    make_temp(f, e) < 0) {
		hu_outfile_abort(f);
		return -1;
	}
	return 0;
}

int hu_outfile_write(struct hu_outfile *f, const void *buf, size_t len,
		     struct hu_error *e)
{
	const char *p = buf;

	while (len) {
		ssize_t n = hu_wr_write(f->fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return hu_error_set(e, n < 0 ? errno : EIO, f->name,
					    "cannot write");
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int hu_outfile_commit(struct hu_outfile *f, struct hu_error *e)
{
	int rc = 0;

	if (!f->tmp)		/* standard output */
		return 0;
	/* A full disk may only show at close (NFS, some FUSE). */
	if (close(f->fd) < 0)
		rc = hu_error_set(e, errno, f->name, "cannot write");
	f->fd = -1;
	if (rc == 0 &&
	    hu_wr_renameat2(f->dirfd, f->tmp, f->dirfd, f->base, 0) < 0)
		rc = hu_error_set(e, errno, f->name, "cannot move the new "
				  "file into place");
	if (rc < 0) {
		hu_outfile_abort(f);
		return -1;
	}
	free(f->tmp);
	f->tmp = NULL;
	hu_outfile_abort(f);
	return 0;
}

void hu_outfile_abort(struct hu_outfile *f)
{
	if (f->tmp) {
		if (f->fd >= 0)
			close(f->fd);
		(void)hu_wr_unlinkat(f->dirfd, f->tmp, 0);
	}
	if (f->dirfd >= 0)
		close(f->dirfd);
	free(f->tmp);
	free(f->base);
	f->tmp = f->base = NULL;
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
