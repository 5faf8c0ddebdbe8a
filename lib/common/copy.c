/* SPDX-License-Identifier: MIT */
/*
 * Copying an entry's bytes and extended attributes.  Data: a reflink when
 * the filesystem shares extents, else copy_file_range (in-kernel), else
 * read/write; holes are kept by copying only the data segments.  Every
 * way copies the st_size bytes the stat saw, or fails when the file
 * shrank (hu_error_shrank).  Xattrs: one by one through the write
 * wrapper, leaving out the layers' private ones and what /etc/xattr.conf
 * says to skip, as cp does (a raw copy of a layer keeps the private ones
 * too: they are its meaning).
 */
#include <attr/libattr.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
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

static int copy_rw(struct hu_copy_state *cs, int in, int out, off_t off,
		   off_t end, struct hu_error *e)
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
		/* per buffer, not per call: a big file shows as it goes */
		hu_progress_bytes_add(cs->bytes, (uint64_t)n, (uint64_t)n);
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
			hu_progress_bytes_add(cs->bytes, (uint64_t)n,
					      (uint64_t)n);
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
	return copy_rw(cs, in, out, off, end, e);
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

		/* A reflink moves no bytes, but the file now holds them:
		 * counted as copied, as the summary counts them. */
		if (rc == 0)
			hu_progress_bytes_add(cs->bytes, (uint64_t)st->st_size,
					      (uint64_t)st->st_size);
		if (rc <= 0)
			return rc;
		__atomic_store_n(&cs->no_clone, true, __ATOMIC_RELAXED);
	}
	/* Not sparse (st_blocks counts every byte): one range. */
	if ((off_t)st->st_blocks * 512 >= st->st_size)
		return copy_range(cs, in, out, 0, st->st_size, e);
	return copy_sparse(cs, in, st, out, e);
}

/* /etc/xattr.conf is read by libattr at its first question, into a
 * list it keeps without a lock: ask once before the workers do. */
static void xattr_conf_load(void)
{
	(void)attr_copy_action("", NULL);
}

bool hu_xattr_copied(const char *name)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, xattr_conf_load);
	return !hu_xattr_is_private(name) &&
	       attr_copy_action(name, NULL) != ATTR_ACTION_SKIP;
}

/* Read xattr @attr of the source into *@v (@small, or malloc'd when it
 * does not fit).  Returns its length; -1 with errno. */
static ssize_t xattr_read(int sfd, const char *sname, const char *attr,
			  char *small, size_t small_size, char **v)
{
	size_t size = small_size;
	ssize_t n;

	*v = small;
	for (;;) {
		n = hu_lgetxattr_at(sfd, sname, attr, *v, size);
		if (n >= 0 || errno != ERANGE)
			return n;
		/* longer than the buffer: ask its size, which may grow
		 * again before the next read */
		n = hu_lgetxattr_at(sfd, sname, attr, NULL, 0);
		if (n < 0)
			return n;
		if (*v != small)
			free(*v);
		size = n ? (size_t)n : 1;
		*v = malloc(size);
		if (!*v) {
			errno = ENOMEM;
			return -1;
		}
	}
}

static int copy_xattr(int sfd, const char *sname, int dfd, const char *dname,
		      const char *attr, struct hu_error *e)
{
	char small[1024], *v;
	ssize_t n = xattr_read(sfd, sname, attr, small, sizeof(small), &v);
	int rc = 0;

	if (n < 0 && errno != ENODATA)	/* ENODATA: removed meanwhile */
		rc = hu_error_set(e, errno, NULL, "cannot read xattr %s", attr);
	else if (n >= 0 && hu_wr_setxattr_at(dfd, dname, attr, v, n, 0) < 0)
		rc = hu_error_set(e, errno, NULL, "cannot set xattr %s", attr);
	if (v != small)
		free(v);
	return rc;
}

/* Xattrs @names (@len bytes, as hu_xattr_names() lists them) of the
 * source copied: the public ones, and with @private_too the layer's own. */
static int copy_listed(int sfd, const char *sname, int dfd, const char *dname,
		       const char *names, ssize_t len, bool private_too,
		       struct hu_error *e)
{
	int rc = 0;

	for (ssize_t off = 0; off < len && rc == 0;
	     off += strlen(names + off) + 1) {
		const char *attr = names + off;

		if (*attr && (hu_xattr_copied(attr) ||
			      (private_too && hu_xattr_is_private(attr))))
			rc = copy_xattr(sfd, sname, dfd, dname, attr, e);
	}
	return rc;
}

static int copy_xattrs(int sfd, const char *sname, int dfd, const char *dname,
		       bool private_too, struct hu_error *e)
{
	char small[512], *names = small;
	ssize_t len;
	int rc;

	/* Most entries have no xattrs: one short listxattr says so. */
	len = hu_xattr_names(sfd, sname, small, sizeof(small), &names);
	if (len < 0)
		return hu_error_set(e, errno, NULL, "cannot list xattrs");
	rc = copy_listed(sfd, sname, dfd, dname, names, len, private_too, e);
	if (names != small)
		free(names);
	return rc;
}

int hu_copy_xattrs(int sfd, const char *sname, int dfd, const char *dname,
		   struct hu_error *e)
{
	return copy_xattrs(sfd, sname, dfd, dname, false, e);
}

int hu_copy_xattrs_listed(int sfd, const char *sname, int dfd,
			  const char *dname, const char *names, ssize_t len,
			  struct hu_error *e)
{
	return copy_listed(sfd, sname, dfd, dname, names, len, false, e);
}

int hu_copy_xattrs_raw(int sfd, const char *sname, int dfd, const char *dname,
		       struct hu_error *e)
{
	return copy_xattrs(sfd, sname, dfd, dname, true, e);
}
