/* SPDX-License-Identifier: MIT */
/*
 * The tar writer shared by flatten and diff: libarchive writes the pax
 * format into our own write callback, which feeds the compress pipeline
 * (compress.c: digests, gzip or zstd, large writes).
 *
 * What goes into an entry, and only that, so equal inputs give equal
 * bytes: the path as bytes, the mode, numeric uid and gid with empty user
 * and group names, the mtime (clamped if asked), the size, the symlink
 * target or device numbers, and the public xattrs sorted by name as
 * SCHILY.xattr.* records.  Never atime, ctime or birth time.
 *
 * libarchive's "restricted" pax writer drops a sub-second mtime unless the
 * entry needs a pax header for some other reason; the full pax writer is
 * used instead.  With no atime or ctime set it differs from the
 * restricted one only there: an entry gets a pax header when its name or
 * link target is long or not ASCII, an id is large, it has xattrs, or its
 * mtime has a fraction of a second.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tar/compress.h"
#include "internal.h"
#include "layer/ldir.h"
#include "layer/lxattr.h"
#include "tar/archive_dl.h"
#include "tar/paxxattr.h"

#define DATA_BUF (64u << 10)	/* symlink targets */
#define READ_MIN (256u << 10)	/* smallest read of file data */

struct hu_tarout {
	struct archive *a;
	struct archive_entry *ent;	/* reused for every entry */
	struct hu_zsink *z;
	struct hu_tarout_opts o;
	struct hu_error sink_err;	/* why the write callback failed */
	bool sink_failed;
	bool dropping;			/* aborted: write nothing more */
	char *data;			/* DATA_BUF bytes */
	struct hu_xattrs xattrs;	/* the entry's, read */
	locale_t c_locale;		/* libarchive's name conversions run in
					 * it, whatever the process's locale */
	bool capture;			/* on_write keeps the bytes in cap */
	struct hu_paxbuf cap, fixed;	/* a header with xattrs, as written
					 * by libarchive and as rewritten */
	/* The layer of the entry being written, when it comes from the
	 * view (its directories reached through layer/ldir.h: an index
	 * layer has no fds); NULL: the file system itself. */
	struct hu_layer *src;
};

static la_ssize_t on_write(struct archive *a, void *ctx, const void *buf,
			   size_t len)
{
	struct hu_tarout *t = ctx;

	if (t->dropping) {
		archive_set_error(a, ECANCELED, "aborted");
		return -1;
	}
	if (t->capture) {
		if (hu_paxbuf_add(&t->cap, buf, len) < 0) {
			archive_set_error(a, ENOMEM, "out of memory");
			return -1;
		}
		return (la_ssize_t)len;
	}
	if (hu_zsink_write(t->z, buf, len, &t->sink_err) < 0) {
		t->sink_failed = true;
		archive_set_error(a, t->sink_err.err ? t->sink_err.err : EIO,
				  "%s", t->sink_err.msg);
		return -1;
	}
	return (la_ssize_t)len;
}

/* A libarchive failure: the output's own error when the write callback
 * failed (no path: the caller names its output), else libarchive's word
 * about entry @path. */
static int tfail(struct hu_tarout *t, const char *path, struct hu_error *e)
{
	if (t->sink_failed)
		return hu_error_set(e, t->sink_err.err, NULL, "%s",
				    t->sink_err.msg);
	return hu_error_set(e, archive_errno(t->a) > 0 ?
			    archive_errno(t->a) : 0, path, "cannot archive: %s",
			    archive_error_string(t->a) ?
			    archive_error_string(t->a) : "unknown error");
}

int hu_tarout_open(struct hu_tarout **out, int fd,
		   const struct hu_tarout_opts *o, struct hu_error *e)
{
	struct hu_tarout *t;

	*out = NULL;
	if (hu_la_need(e) < 0)
		return -1;
	t = calloc(1, sizeof(*t));
	if (!t)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	t->o = *o;
	t->data = malloc(DATA_BUF);
	t->a = archive_write_new();
	t->ent = archive_entry_new();
	if (!t->data || !t->a || !t->ent) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto fail;
	}
	t->c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
	if (!t->c_locale) {
		hu_error_set(e, errno, NULL, "cannot make the C locale");
		goto fail;
	}
	if (hu_zsink_open(&t->z, fd, o->compress, o->level, o->threads,
			  !o->no_digests, o->bytes, e) < 0)
		goto fail;
	if (archive_write_set_format_pax(t->a) != ARCHIVE_OK ||
	    /* No blocking: libarchive hands headers and the caller's data
	     * buffers straight to the callback (no copy); the pipeline
	     * gathers small pieces.  The archive ends with its two zero
	     * records, unpadded. */
	    archive_write_set_bytes_per_block(t->a, 0) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(t->a, 1) != ARCHIVE_OK) {
		tfail(t, NULL, e);
		goto fail;
	}
	/* Only the SCHILY.xattr.* records (libarchive >= 3.6 knows the
	 * option; older ones also write LIBARCHIVE.xattr.*). */
	(void)archive_write_set_format_option(t->a, "pax", "xattrheader",
					      "SCHILY");
	if (archive_write_open2(t->a, t, NULL, on_write, NULL, NULL) !=
	    ARCHIVE_OK) {
		tfail(t, NULL, e);
		goto fail;
	}
	*out = t;
	return 0;
fail:
	hu_tarout_abort(t);
	return -1;
}

static void set_mtime(struct hu_tarout *t, const struct timespec *ts)
{
	int64_t sec = ts->tv_sec;
	long nsec = ts->tv_nsec;

	hu_clamp_mtime(t->o.clamp_mtime, t->o.mtime_max, &sec, &nsec);
	archive_entry_set_mtime(t->ent, (time_t)sec, nsec);
}

/* Start the reused entry: path, type and mode, owner, mtime; and unset
 * what an earlier entry may have set.  Unlike archive_entry_clear(), this
 * keeps the entry's string buffers: no free and malloc of each per entry. */
static void entry_start(struct hu_tarout *t, const char *path,
			const struct stat *st)
{
	struct archive_entry *ent = t->ent;

	archive_entry_copy_pathname(ent, *path ? path : ".");
	archive_entry_copy_symlink(ent, NULL);
	archive_entry_copy_hardlink(ent, NULL);
	archive_entry_unset_size(ent);
	archive_entry_set_rdev(ent, 0);
	archive_entry_xattr_clear(ent);
	archive_entry_set_mode(ent, st->st_mode);
	archive_entry_set_uid(ent, st->st_uid);
	archive_entry_set_gid(ent, st->st_gid);
	set_mtime(t, &st->st_mtim);
}

/*
 * Write t->ent's header.  Names are bytes: in the C locale libarchive
 * writes an ASCII name as is and any other in a pax record marked
 * hdrcharset=BINARY, so the bytes never depend on the caller's locale.
 * libarchive URL-encodes xattr names (paxxattr.c): a header with xattrs is
 * kept back as libarchive writes it (with no blocking, all of it within
 * this call, and its size nowhere else) and goes out with its names in
 * GNU tar's form.
 */
static int write_header(struct hu_tarout *t, const char *path,
			struct hu_error *e)
{
	locale_t old = uselocale(t->c_locale);
	int r;

	t->cap.len = 0;
	t->capture = archive_entry_xattr_count(t->ent) > 0;
	r = archive_write_header(t->a, t->ent);
	uselocale(old);
	if (!t->capture || r < ARCHIVE_WARN) {
		t->capture = false;
		return r < ARCHIVE_WARN ? tfail(t, path, e) : 0;
	}
	t->capture = false;
	if (hu_pax_fix_xattr_keys(t->cap.p, t->cap.len, &t->fixed) < 0)
		return hu_error_set(e, errno, path, errno == ENOMEM ?
				    "out of memory" : "cannot rewrite the "
				    "xattr names of libarchive's header");
	if (hu_zsink_write(t->z, t->fixed.p, t->fixed.len, &t->sink_err) < 0) {
		t->sink_failed = true;
		return tfail(t, path, e);
	}
	return 0;
}

/* Add the public xattrs of the source entry to t->ent, sorted by name.
 * @names: the entry's xattr names when already read, else NULL. */
static int add_xattrs(struct hu_tarout *t, int dirfd, const char *name,
		      const char *names, size_t names_len, const char *path,
		      struct hu_error *e)
{
	if (hu_xattrs_read(&t->xattrs, t->src, dirfd, name, names, names_len,
			   path, e) < 0)
		return -1;
	/* libarchive writes an entry's xattrs last added first: add them
	 * in reverse to have the records sorted by name. */
	for (size_t i = t->xattrs.n; i-- > 0;)
		archive_entry_xattr_add_entry(t->ent, t->xattrs.v[i].name,
					      t->xattrs.v[i].value,
					      t->xattrs.v[i].size);
	return 0;
}

static int add_symlink(struct hu_tarout *t, int dirfd, const char *name,
		       const struct stat *st, const char *path,
		       struct hu_error *e)
{
	size_t size = (size_t)st->st_size + 1;
	char *target = size <= DATA_BUF ? t->data : malloc(size);
	ssize_t n;

	if (!target)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	n = t->src ? hu_ldir_readlink(t->src, dirfd, name, target, size) :
		     readlinkat(dirfd, name ? name : "", target, size);
	if (n < 0 || (size_t)n >= size) {
		if (target != t->data)
			free(target);
		return hu_error_set(e, n < 0 ? errno : EAGAIN, path,
				    "cannot read symlink");
	}
	target[n] = '\0';
	archive_entry_copy_symlink(t->ent, target);
	if (target != t->data)
		free(target);
	return 0;
}

/* Write @size bytes of @fd as the entry's data.  They are read straight
 * into the pipeline's buffer, and libarchive (which does not buffer
 * here) hands that same buffer back to on_write: no copy. */
static int add_data(struct hu_tarout *t, int fd, int64_t size,
		    const char *path, struct hu_error *e)
{
	while (size > 0) {
		size_t room, want;
		ssize_t n;
		void *buf;

		if (hu_zsink_reserve(t->z, READ_MIN, &buf, &room,
				     &t->sink_err) < 0) {
			t->sink_failed = true;
			return tfail(t, path, e);
		}
		want = size < (int64_t)room ? (size_t)size : room;
		n = read(fd, buf, want);
		if (n < 0 && hu_eintr_retry())
			continue;
		if (n < 0)
			return hu_error_set(e, errno, path, "cannot read");
		if (n == 0)
			return hu_error_shrank(e, path);
		if (archive_write_data(t->a, buf, (size_t)n) != n)
			return tfail(t, path, e);
		hu_progress_bytes_add(t->o.bytes, (uint64_t)n, 0);
		size -= n;
	}
	return 0;
}

/* The view's bytes of an entry of an index layer, read forward from its
 * tarball (hu_ldir_copy_data) into the pipeline's buffer. */
struct stream_to {
	struct hu_tarout *t;
	const char *path;
	bool sink_failed;	/* the error is the output's, named so */
};

static int put_stream(void *ctx, const void *p, size_t n, struct hu_error *e)
{
	struct stream_to *to = ctx;
	struct hu_tarout *t = to->t;

	while (n > 0) {
		size_t room, take;
		void *buf;

		if (hu_zsink_reserve(t->z, READ_MIN, &buf, &room,
				     &t->sink_err) < 0) {
			t->sink_failed = to->sink_failed = true;
			return tfail(t, to->path, e);
		}
		take = n < room ? n : room;
		memcpy(buf, p, take);
		if (archive_write_data(t->a, buf, take) != (la_ssize_t)take) {
			to->sink_failed = true;
			return tfail(t, to->path, e);
		}
		hu_progress_bytes_add(t->o.bytes, (uint64_t)take, 0);
		p = (const char *)p + take;
		n -= take;
	}
	return 0;
}

static int add_stream(struct hu_tarout *t, int dirfd, const char *name,
		      int64_t size, const char *path, struct hu_error *e)
{
	struct stream_to to = { t, path, false };

	if (hu_ldir_copy_data(t->src, dirfd, name, (uint64_t)size,
			      put_stream, &to, e) < 0) {
		/* The tarball's bytes are the layer's, not the entry's:
		 * named by the layer, whole */
		if (!to.sink_failed) {
			free(e->path);
			e->path = strdup(t->src->path);
			e->whole = true;
		}
		return -1;
	}
	return 0;
}

/*
 * In a tarball every reader of OCI layers takes an entry named .wh.NAME
 * for a whiteout of NAME (.wh..wh..opq for an opaque marker), whatever
 * its type.  A layer of another format may hold a real file of that name;
 * written as it is, it would delete NAME beneath and vanish itself.  It
 * cannot be said in a tarball, so it is refused (umoci refuses it too).
 * The markers hunion means are written by marker(), not through here.
 */
static int check_name(const char *path, struct hu_error *e)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (!hu_oci_is_marker(base))
		return 0;
	return hu_error_set(e, 0, path, "cannot be archived: in a tarball "
			    "layer a name beginning with \"%s\" is a "
			    "whiteout", HU_OCI_WH_PREFIX);
}

/* @datafd: a regular file's bytes (-1 for an empty one), @own when it is
 * the entry itself, whose xattrs it then reaches without a lookup. */
static int entry(struct hu_tarout *t, const char *path, const struct stat *st,
		 int dirfd, const char *name, int datafd, bool own,
		 const char *xnames, size_t xnames_len, struct hu_error *e)
{
	mode_t type = st->st_mode & S_IFMT;

	if (type == S_IFSOCK)
		return hu_error_set(e, ENOTSUP, path,
				    "a tar archive cannot hold a socket");
	if (check_name(path, e) < 0)
		return -1;
	entry_start(t, path, st);
	if (type == S_IFREG)
		archive_entry_set_size(t->ent, st->st_size);
	else if (type == S_IFLNK &&
		 add_symlink(t, dirfd, name, st, path, e) < 0)
		return -1;
	if (type == S_IFCHR || type == S_IFBLK) {
		archive_entry_set_rdevmajor(t->ent, major(st->st_rdev));
		archive_entry_set_rdevminor(t->ent, minor(st->st_rdev));
	}
	if (own ? add_xattrs(t, datafd, NULL, xnames, xnames_len, path, e) :
		  add_xattrs(t, dirfd, name, xnames, xnames_len, path, e))
		return -1;
	if (write_header(t, path, e) < 0)
		return -1;
	if (type == S_IFREG && st->st_size > 0 && datafd < 0 && t->src &&
	    hu_ldir_indexed(t->src)) {
		if (add_stream(t, dirfd, name, st->st_size, path, e) < 0)
			return -1;
	} else if (type == S_IFREG && st->st_size > 0 &&
		   add_data(t, datafd, st->st_size, path, e) < 0)
		return -1;
	if (archive_write_finish_entry(t->a) < ARCHIVE_WARN)
		return tfail(t, path, e);
	return 0;
}

int hu_tarout_entry(struct hu_tarout *t, const char *path,
		    const struct stat *st, int dirfd, const char *name,
		    int datafd, struct hu_error *e)
{
	struct stat dst;
	bool own = datafd >= 0 && fstat(datafd, &dst) == 0 &&
		   dst.st_ino == st->st_ino && dst.st_dev == st->st_dev;

	return entry(t, path, st, dirfd, name, datafd, own, NULL, 0, e);
}

int hu_tarout_layer_dir(struct hu_tarout *t, const char *path,
			const struct stat *st, struct hu_layer *l, int dir,
			struct hu_error *e)
{
	int rc;

	t->src = l;
	rc = entry(t, path, st, dir, NULL, -1, false, NULL, 0, e);
	t->src = NULL;
	return rc;
}

int hu_tarout_ventry(struct hu_tarout *t, const char *path,
		     struct hu_vdir *d, const struct hu_ventry *ent,
		     struct hu_error *e)
{
	int datafd = -1, rc;
	bool own = false;

	t->src = hu_vdir_layer(d, ent);
	/* An empty file has no bytes to read, and its xattrs are reached
	 * by name: no open and close for it, unless it is a metacopy file,
	 * whose data must be found beneath.  An index layer's bytes are
	 * read from its tarball as they are written (add_stream). */
	if (S_ISREG(ent->st.st_mode) && !hu_ldir_indexed(t->src) &&
	    (ent->st.st_size > 0 || hu_vdir_may_be_metacopy(d, ent))) {
		datafd = hu_vdir_open_data(d, ent, &own, e);
		if (datafd < 0) {
			e->whole = true;	/* the view named the layer */
			return -1;
		}
	}
	rc = entry(t, path, &ent->st, ent->dirfd, ent->name, datafd, own,
		   ent->xattr_names, ent->xattr_names_len, e);
	if (datafd >= 0)
		close(datafd);
	t->src = NULL;
	return rc;
}

int hu_tarout_hardlink(struct hu_tarout *t, const char *path,
		       const char *target, const struct stat *st,
		       struct hu_error *e)
{
	if (check_name(path, e) < 0)
		return -1;
	entry_start(t, path, st);
	archive_entry_copy_hardlink(t->ent, target);
	if (write_header(t, path, e) < 0)
		return -1;
	if (archive_write_finish_entry(t->a) < ARCHIVE_WARN)
		return tfail(t, path, e);
	return 0;
}

/* An OCI marker @path (taken over): a regular empty file, mode 0, owner
 * 0:0, mtime 0. */
static int marker(struct hu_tarout *t, char *path, struct hu_error *e)
{
	struct stat st = { .st_mode = S_IFREG };
	int rc = 0;

	if (!path)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	entry_start(t, path, &st);
	archive_entry_set_mtime(t->ent, 0, 0);
	archive_entry_set_size(t->ent, 0);
	if (write_header(t, path, e) < 0)
		rc = -1;
	else if (archive_write_finish_entry(t->a) < ARCHIVE_WARN)
		rc = tfail(t, path, e);
	free(path);
	return rc;
}

int hu_tarout_whiteout(struct hu_tarout *t, const char *dir, const char *name,
		       struct hu_error *e)
{
	return marker(t, hu_oci_whiteout_path(dir, name), e);
}

int hu_tarout_opaque(struct hu_tarout *t, const char *dir, struct hu_error *e)
{
	return marker(t, hu_oci_opaque_path(dir), e);
}

int hu_tarout_close(struct hu_tarout *t, struct hu_digests *d,
		    struct hu_error *e)
{
	struct hu_zsink *z = t->z;
	int rc = 0;

	/* The end-of-archive blocks go through the callback. */
	if (archive_write_close(t->a) != ARCHIVE_OK)
		rc = tfail(t, NULL, e);
	t->z = NULL;
	if (rc == 0)
		rc = hu_zsink_close(z, d, e);
	else
		hu_zsink_abort(z);
	hu_tarout_abort(t);
	return rc;
}

void hu_tarout_abort(struct hu_tarout *t)
{
	if (!t)
		return;
	/* Freeing an open archive closes it: no end-of-archive blocks may
	 * reach the output then, or a reader of a failed stream (-o -)
	 * would take it for a complete one. */
	t->dropping = true;
	if (t->a)
		archive_write_free(t->a);
	hu_zsink_abort(t->z);
	if (t->ent)
		archive_entry_free(t->ent);
	hu_error_clear(&t->sink_err);
	if (t->c_locale)
		freelocale(t->c_locale);
	hu_paxbuf_free(&t->cap);
	hu_paxbuf_free(&t->fixed);
	free(t->data);
	hu_xattrs_free(&t->xattrs);
	free(t);
}
