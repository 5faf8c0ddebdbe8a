/* SPDX-License-Identifier: MIT */
/*
 * A tarball layer's file data, read forward.  A layer read from its path
 * index (pindex.h) has no files to open: each file's bytes are where the
 * index says in the tarball's decompressed stream.  The stream is read
 * once, from the start, as every read of a tarball is (tarsrc.c: an
 * image layer's digests and compression checked as it passes); a reader
 * that asks for files in the order their bytes lie (the view's order, for
 * a tarball written in it: hu_pindex_in_order()) takes each one's bytes
 * as they pass and skips the rest.  Nothing is kept: the bytes go from
 * the decompressor's buffer to the caller's.
 *
 * A file whose bytes lie behind the position reached (a hard link whose
 * first name the view hides, say) starts the stream again from the
 * start: correct, and rare where the order was checked.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "tar/pdata.h"
#include "tar/tarlayer.h"

struct hu_pstream {
	int fd;
	const struct hu_oci_image *img;	/* NULL: a tarball file */
	size_t layer;
	struct tar_src *src;
	const unsigned char *chunk;	/* the bytes handed out last */
	size_t len, at;			/* their count, and those taken */
	uint64_t pos;			/* the stream offset of chunk[at] */
	unsigned restarts;
};

static int src_fail(const struct hu_pstream *ps, struct hu_error *e)
{
	const char *why = ps->src ? tar_src_error(ps->src) : NULL;

	/* (tarsrc.c's message says why, a system error's text too) */
	return hu_error_set(e, 0, NULL, "%s",
			    why && *why ? why : "cannot read the tarball");
}

static int start(struct hu_pstream *ps, struct hu_error *e)
{
	const struct hu_oci_image *img = ps->img;
	size_t k = ps->layer;

	ps->src = tar_src_open(ps->fd);
	if (!ps->src)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (img && tar_src_verify(ps->src, img->layers[k].digest,
				  img->layers[k].size, img->diff_ids[k],
				  tar_comp_of_layer(img, k)) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	ps->chunk = NULL;
	ps->len = ps->at = 0;
	ps->pos = 0;
	return 0;
}

int hu_pstream_open(struct hu_pstream **out, int fd,
		    const struct hu_oci_image *img, size_t layer,
		    struct hu_error *e)
{
	struct hu_pstream *ps = calloc(1, sizeof(*ps));

	*out = NULL;
	if (!ps)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	ps->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (ps->fd < 0) {
		hu_error_set(e, errno, NULL, "cannot open the tarball again");
		free(ps);
		return -1;
	}
	ps->img = img;
	ps->layer = layer;
	if (start(ps, e) < 0) {
		hu_pstream_free(ps);
		return -1;
	}
	*out = ps;
	return 0;
}

void hu_pstream_free(struct hu_pstream *ps)
{
	if (!ps)
		return;
	tar_src_free(ps->src);
	close(ps->fd);
	free(ps);
}

unsigned hu_pstream_restarts(const struct hu_pstream *ps)
{
	return ps->restarts;
}

/* The next bytes at the position reached: 1 with *@p and *@n, 0 at the
 * end of the stream, -1 on an error. */
static int more(struct hu_pstream *ps, const unsigned char **p, size_t *n,
		struct hu_error *e)
{
	if (ps->at == ps->len) {
		const void *buf;
		ssize_t got = tar_src_read(ps->src, &buf);

		if (got < 0)
			return src_fail(ps, e);
		if (got == 0)
			return 0;
		ps->chunk = buf;
		ps->len = (size_t)got;
		ps->at = 0;
	}
	*p = ps->chunk + ps->at;
	*n = ps->len - ps->at;
	return 1;
}

static void took(struct hu_pstream *ps, size_t n)
{
	ps->at += n;
	ps->pos += n;
}

static int cut_short(struct hu_error *e)
{
	return hu_error_set(e, EIO, NULL, "the tarball ends inside a file's "
			    "data");
}

/* Move to stream offset @to, from the start again when it lies behind. */
static int seek_forward(struct hu_pstream *ps, uint64_t to,
			struct hu_error *e)
{
	if (to < ps->pos) {
		tar_src_free(ps->src);
		ps->src = NULL;
		ps->restarts++;
		if (start(ps, e) < 0)
			return -1;
	}
	while (ps->pos < to) {
		const unsigned char *p = NULL;
		size_t n = 0;
		int r = more(ps, &p, &n, e);

		if (r <= 0)
			return r < 0 ? -1 : cut_short(e);
		took(ps, n < to - ps->pos ? n : (size_t)(to - ps->pos));
	}
	return 0;
}

/* @len bytes from the position reached to @put. */
static int pass(struct hu_pstream *ps, uint64_t len, hu_pstream_put put,
		void *ctx, struct hu_error *e)
{
	while (len > 0) {
		const unsigned char *p = NULL;
		size_t n = 0;
		int r = more(ps, &p, &n, e);

		if (r <= 0)
			return r < 0 ? -1 : cut_short(e);
		if (n > len)
			n = (size_t)len;
		if (put(ctx, p, n, e) < 0)
			return -1;
		took(ps, n);
		len -= n;
	}
	return 0;
}

static int zeros(uint64_t len, hu_pstream_put put, void *ctx,
		 struct hu_error *e)
{
	static const unsigned char zero[64 << 10];

	while (len > 0) {
		size_t n = len < sizeof(zero) ? (size_t)len : sizeof(zero);

		if (put(ctx, zero, n, e) < 0)
			return -1;
		len -= n;
	}
	return 0;
}

int hu_pstream_copy(struct hu_pstream *ps, const struct hu_pdata *d,
		    uint64_t size, hu_pstream_put put, void *ctx,
		    struct hu_error *e)
{
	uint64_t done = 0;

	if (seek_forward(ps, d->off, e) < 0)
		return -1;
	if (!d->seg)
		return pass(ps, size, put, ctx, e);
	for (size_t i = 0; i < d->nseg; i++) {
		const struct hu_pseg *s = &d->seg[i];

		if (s->file_off < done || s->len > size - s->file_off)
			return hu_error_set(e, EIO, NULL, "a sparse map out of "
					    "order");
		if (zeros(s->file_off - done, put, ctx, e) < 0 ||
		    pass(ps, s->len, put, ctx, e) < 0)
			return -1;
		done = s->file_off + s->len;
	}
	return zeros(size - done, put, ctx, e);
}

int hu_pstream_finish(struct hu_pstream *ps, struct hu_error *e)
{
	if (tar_src_verify_end(ps->src) < 0 || tar_src_drain(ps->src) < 0)
		return src_fail(ps, e);
	return 0;
}

/* One directory of the walk below: its node and the next child to visit. */
struct frame {
	hu_pnode dir;
	size_t next;
};

bool hu_pindex_in_order(const struct hu_pindex *x)
{
	struct frame *f = malloc(16 * sizeof(*f));
	size_t n = 0, cap = 16;
	uint64_t last = 0;
	bool in_order = true;

	if (!f)
		return false;
	f[n++] = (struct frame){ .dir = HU_PNODE_ROOT };
	while (n && in_order) {
		struct frame *top = &f[n - 1];
		struct hu_pdata d;
		struct stat st;
		hu_pnode c;

		if (top->next == hu_pindex_nchildren(x, top->dir)) {
			n--;
			continue;
		}
		c = hu_pindex_child(x, top->dir, top->next++);
		hu_pindex_stat(x, c, &st);
		if (S_ISDIR(st.st_mode)) {
			if (n == cap) {
				struct frame *g = realloc(f, 2 * cap *
							  sizeof(*f));

				if (!g) {
					in_order = false;
					break;
				}
				f = g;
				cap *= 2;
			}
			f[n++] = (struct frame){ .dir = c };
			continue;
		}
		/* (a hard link's bytes go with the name the view meets
		 * first, which the uppers decide: not counted) */
		if (!S_ISREG(st.st_mode) || st.st_size == 0 ||
		    st.st_nlink > 1 || hu_pindex_data(x, c, &d) < 0)
			continue;
		in_order = d.off >= last;
		last = d.off;
	}
	free(f);
	return in_order;
}
