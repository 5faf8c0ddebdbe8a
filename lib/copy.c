/* SPDX-License-Identifier: MIT */
/*
 * Copying an entry's bytes and extended attributes.  Data: a reflink when
 * the filesystem shares extents, else copy_file_range (in-kernel), else
 * read/write; holes are kept by copying only the data segments.  Every
 * way copies the st_size bytes the stat saw, or fails when the file
 * shrank (hu_error_shrank).  Xattrs: libattr's filtered copy, so
 * /etc/xattr.conf is honoured as cp does.
 */
#include <attr/error_context.h>
#include <attr/libattr.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "internal.h"

/* The errors that mean "this way of copying does not work here". */
static bool unsupported(int err)
{
	return err == EXDEV || err == EOPNOTSUPP || err == EINVAL ||
	       err == ENOTTY || err == ENOSYS || err == EBADF ||
	       err == ETXTBSY || err == EPERM;
}

int hu_error_shrank(struct hu_error *e, const char *path)
{
	return hu_error_set(e, EIO, path,
			    "the file shrank while it was being read");
}

static int copy_rw(int in, int out, off_t off, off_t end, struct hu_error *e)
{
	enum { BUF = 1 << 20 };
	char *buf = malloc(BUF);

	if (!buf)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	while (off < end) {
		size_t want = end - off < BUF ? (size_t)(end - off) : BUF;
		ssize_t n = pread(in, buf, want, off), w;

		if (n < 0) {
			free(buf);
			return hu_error_set(e, errno, NULL, "cannot read");
		}
		if (n == 0) {
			free(buf);
			return hu_error_shrank(e, NULL);
		}
		for (ssize_t done = 0; done < n; done += w) {
			w = hu_wr_pwrite(out, buf + done, n - done,
					 off + done);
			if (w < 0) {
				free(buf);
				return hu_error_set(e, errno, NULL,
						    "cannot write");
			}
		}
		off += n;
	}
	free(buf);
	return 0;
}

/* Copy [off, end) of @in to the same offsets of @out. */
static int copy_range(struct hu_copy_state *cs, int in, int out, off_t off,
		      off_t end, struct hu_error *e)
{
	/* The state is shared by worker threads: relaxed atomics, since a
	 * stale "works" only costs one more failed attempt. */
	while (off < end && !__atomic_load_n(&cs->no_copy_range,
					     __ATOMIC_RELAXED)) {
		off_t in_off = off, out_off = off;
		ssize_t n = hu_wr_copy_range(in, &in_off, out, &out_off,
					     end - off);

		if (n > 0) {
			off += n;
			continue;
		}
		/* The end of the source, or a filesystem that copies
		 * nothing (some pseudo ones): read/write tells which. */
		if (n == 0)
			break;
		if (!unsupported(errno))
			return hu_error_set(e, errno, NULL, "cannot copy data");
		__atomic_store_n(&cs->no_copy_range, true, __ATOMIC_RELAXED);
	}
	return copy_rw(in, out, off, end, e);
}

/* A reflink: atomic (the kernel locks both files), so it cannot tear,
 * but it takes the whole file as it is now, which may not be the size
 * the stat saw.  0 done, -1 failed (@e), 1 this filesystem cannot. */
static int clone_data(int in, const struct stat *st, int out,
		      struct hu_error *e)
{
	struct stat now;

	if (hu_wr_clone(in, out) < 0)
		return unsupported(errno) ? 1 :
			hu_error_set(e, errno, NULL, "cannot clone data");
	if (hu_wr_dry_run())
		return 0;
	if (fstat(out, &now) < 0)
		return hu_error_set(e, errno, NULL, "cannot stat the copy");
	if (now.st_size < st->st_size)
		return hu_error_shrank(e, NULL);
	if (now.st_size > st->st_size && hu_wr_ftruncate(out, st->st_size) < 0)
		return hu_error_set(e, errno, NULL, "cannot set file size");
	return 0;
}

/* A sparse file: only the data segments up to st_size, then the size. */
static int copy_sparse(struct hu_copy_state *cs, int in, const struct stat *st,
		       int out, struct hu_error *e)
{
	off_t data, hole = 0;
	struct stat now;

	while (hole < st->st_size) {
		data = lseek(in, hole, SEEK_DATA);
		if (data < 0 && errno != ENXIO)
			return copy_range(cs, in, out, hole, st->st_size, e);
		if (data < 0 || data >= st->st_size)
			break;		/* only a hole remains */
		hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0 || hole > st->st_size)
			hole = st->st_size;
		if (copy_range(cs, in, out, data, hole, e) < 0)
			return -1;
	}
	/* A hole up to st_size, or the end of a file that shrank: only
	 * its size tells them apart. */
	if (fstat(in, &now) < 0)
		return hu_error_set(e, errno, NULL, "cannot stat");
	if (now.st_size < st->st_size)
		return hu_error_shrank(e, NULL);
	if (hu_wr_ftruncate(out, st->st_size) < 0)
		return hu_error_set(e, errno, NULL, "cannot set file size");
	return 0;
}

int hu_copy_data(struct hu_copy_state *cs, int in, const struct stat *st,
		 int out, struct hu_error *e)
{
	if (st->st_size == 0)
		return 0;
	if (!__atomic_load_n(&cs->no_clone, __ATOMIC_RELAXED)) {
		int rc = clone_data(in, st, out, e);

		if (rc <= 0)
			return rc;
		__atomic_store_n(&cs->no_clone, true, __ATOMIC_RELAXED);
	}
	/* Not sparse (st_blocks counts every byte): one range. */
	if ((off_t)st->st_blocks * 512 >= st->st_size)
		return copy_range(cs, in, out, 0, st->st_size, e);
	return copy_sparse(cs, in, st, out, e);
}

/* libattr reports through a callback: keep the first error and its errno
 * instead of printing. */
struct xattr_ctx {
	struct error_context ctx;
	int err;
	char msg[160];
};

__attribute__((format(printf, 2, 3)))
static void xattr_error(struct error_context *ctx, const char *fmt, ...)
{
	struct xattr_ctx *x = (struct xattr_ctx *)ctx;
	va_list ap;

	if (x->err)
		return;
	x->err = errno ? errno : EIO;
	va_start(ap, fmt);
	vsnprintf(x->msg, sizeof(x->msg), fmt, ap);
	va_end(ap);
}

static const char *xattr_quote(struct error_context *ctx, const char *s)
{
	return s;
}

static void xattr_quote_free(struct error_context *ctx, const char *s)
{
}

static int xattr_check(const char *name, struct error_context *ctx)
{
	if (hu_xattr_is_private(name))
		return 0;
	return attr_copy_action(name, ctx) != ATTR_ACTION_SKIP;
}

int hu_copy_xattrs(int sfd, const char *sname, int dfd, const char *dname,
		   struct hu_error *e)
{
	struct xattr_ctx x = {
		.ctx = { xattr_error, xattr_quote, xattr_quote_free } };
	char sp[HU_FDPATH_MAX], dp[HU_FDPATH_MAX];
	int rc;

	/* Most files have no xattrs: one flistxattr says so, where
	 * libattr would ask twice. */
	if (!sname && !dname) {
		char names[256];
		ssize_t n = flistxattr(sfd, names, sizeof(names));

		if (n == 0 || (n < 0 && errno == ENOTSUP))
			return 0;
	}
	errno = 0;
	if (!sname && !dname)
		rc = attr_copy_fd("", sfd, "", dfd, xattr_check, &x.ctx);
	else
		rc = attr_copy_file(hu_fdpath(sp, sfd, sname),
				    hu_fdpath(dp, dfd, dname), xattr_check,
				    &x.ctx);
	if (rc == 0 && !x.err)
		return 0;
	return hu_error_set(e, x.err ? x.err : errno, NULL,
			    "cannot copy xattrs%s%s", x.msg[0] ? ": " : "",
			    x.msg);
}
