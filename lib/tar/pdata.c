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
 * A hard-linked file's bytes lie with the name the tarball wrote first;
 * the view meets them at the first name it shows, later when an upper
 * layer hid or replaced that one.  So the bytes of hard-linked files the
 * stream passes without handing them over are kept (an anonymous memfd,
 * no file under TMPDIR), STASH_MAX in all, until asked for.  Any other
 * file whose bytes lie behind the position reached (a stash full, a
 * tarball out of order) starts the stream again from the start: correct,
 * and rare where the order was checked.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "tar/pdata.h"
#include "tar/tarlayer.h"

#define STASH_MAX (64u << 20)

/* Where a hard-linked file's bytes lie in the stream. */
struct linked {
	uint64_t off, len;
};

/* Bytes of a hard-linked file kept: @got of its @len, at @at in the
 * stash. */
struct stashed {
	uint64_t off, len, got, at;
};

struct hu_pstream {
	int fd;
	const struct hu_oci_image *img;	/* NULL: a tarball file */
	size_t layer;
	struct tar_src *src;
	const unsigned char *chunk;	/* the bytes handed out last */
	size_t len, at;			/* their count, and those taken */
	uint64_t pos;			/* the stream offset of chunk[at] */
	unsigned restarts;
	struct linked *links;		/* sorted by offset */
	size_t nlinks, next_link;	/* the first not passed yet */
	struct stashed *stash;		/* sorted by offset */
	size_t nstash;
	int stash_fd;			/* -1: none made yet */
	uint64_t stash_len;
	uint64_t stashed_to;		/* passed once: never kept again */
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

static int linked_cmp(const void *a, const void *b)
{
	const struct linked *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Where the bytes of @x's hard-linked files lie (one entry an inode,
 * sparse ones left out), sorted. */
static int find_links(struct hu_pstream *ps, const struct hu_pindex *x)
{
	size_t n = hu_pindex_nodes(x), k = 0, cap = 0;

	for (size_t i = 0; i < n; i++) {
		struct hu_pdata d;
		struct stat st;

		hu_pindex_stat(x, (hu_pnode)i, &st);
		if (!S_ISREG(st.st_mode) || st.st_nlink < 2 ||
		    st.st_size == 0 || hu_pindex_data(x, (hu_pnode)i, &d) < 0 ||
		    d.seg)
			continue;
		if (k == cap) {
			size_t c = cap ? 2 * cap : 64;
			struct linked *v = realloc(ps->links, c * sizeof(*v));

			if (!v)
				return -1;
			ps->links = v;
			cap = c;
		}
		ps->links[k++] = (struct linked){ d.off, (uint64_t)st.st_size };
	}
	if (k)
		qsort(ps->links, k, sizeof(*ps->links), linked_cmp);
	/* the names of one inode share its bytes: one entry */
	ps->nlinks = 0;
	for (size_t i = 0; i < k; i++)
		if (!ps->nlinks || ps->links[ps->nlinks - 1].off !=
				   ps->links[i].off)
			ps->links[ps->nlinks++] = ps->links[i];
	return 0;
}

int hu_pstream_open(struct hu_pstream **out, int fd,
		    const struct hu_oci_image *img, size_t layer,
		    const struct hu_pindex *x, struct hu_error *e)
{
	struct hu_pstream *ps = calloc(1, sizeof(*ps));

	*out = NULL;
	if (!ps)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	ps->stash_fd = -1;
	if (x && find_links(ps, x) < 0) {
		free(ps->links);
		free(ps);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	ps->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (ps->fd < 0) {
		hu_error_set(e, errno, NULL, "cannot open the tarball again");
		free(ps->links);
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
	if (ps->stash_fd >= 0)
		close(ps->stash_fd);
	free(ps->links);
	free(ps->stash);
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

static int stash_fail(struct hu_error *e)
{
	return hu_error_set(e, errno, NULL, "cannot keep a hard-linked "
			    "file's bytes");
}

/* Keep what of the @n bytes at @p (the stream at ps->pos, skipped) belongs
 * to a hard-linked file, while the stash has room for its whole. */
static int stash_skipped(struct hu_pstream *ps, const unsigned char *p,
			 size_t n, struct hu_error *e)
{
	uint64_t from = ps->pos, to = ps->pos + n;

	while (ps->next_link < ps->nlinks &&
	       ps->links[ps->next_link].off + ps->links[ps->next_link].len <=
	       from)
		ps->next_link++;
	for (size_t i = ps->next_link; i < ps->nlinks &&
					ps->links[i].off < to; i++) {
		const struct linked *l = &ps->links[i];
		uint64_t a = l->off > from ? l->off : from;
		uint64_t b = l->off + l->len < to ? l->off + l->len : to;
		struct stashed *s = ps->nstash ? &ps->stash[ps->nstash - 1] :
					NULL;

		if (a == l->off && l->off < ps->stashed_to)
			continue;	/* passed before a restart */
		if (a == l->off) {
			/* its first bytes: kept whole, or not at all */
			if (ps->stash_len + l->len > STASH_MAX)
				continue;
			if (ps->stash_fd < 0) {
				ps->stash_fd = memfd_create("hunion-links",
							    MFD_CLOEXEC);
				if (ps->stash_fd < 0)
					return stash_fail(e);
			}
			s = realloc(ps->stash, (ps->nstash + 1) * sizeof(*s));
			if (!s)
				return hu_error_set(e, ENOMEM, NULL,
						    "out of memory");
			ps->stash = s;
			s = &s[ps->nstash++];
			*s = (struct stashed){ l->off, l->len, 0,
					       ps->stash_len };
			ps->stash_len += l->len;
		} else if (!s || s->off != l->off || s->got != a - l->off) {
			continue;
		}
		for (uint64_t k = a; k < b;) {
			ssize_t w = pwrite(ps->stash_fd, p + (k - from),
					   (size_t)(b - k),
					   (off_t)(s->at + s->got));

			if (w < 0)
				return stash_fail(e);
			s->got += (uint64_t)w;
			k += (uint64_t)w;
		}
	}
	if (to > ps->stashed_to)
		ps->stashed_to = to;
	return 0;
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
		if (n > to - ps->pos)
			n = (size_t)(to - ps->pos);
		if (ps->nlinks && stash_skipped(ps, p, n, e) < 0)
			return -1;
		took(ps, n);
	}
	return 0;
}

/* The bytes of a hard-linked file at stream offset @off, @size of them,
 * kept whole in the stash: NULL when they are not. */
static const struct stashed *stashed_at(const struct hu_pstream *ps,
					uint64_t off, uint64_t size)
{
	size_t lo = 0, hi = ps->nstash;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ps->stash[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == ps->nstash || ps->stash[lo].off != off ||
	    ps->stash[lo].len != size || ps->stash[lo].got != size)
		return NULL;
	return &ps->stash[lo];
}

static int from_stash(const struct hu_pstream *ps, const struct stashed *s,
		      hu_pstream_put put, void *ctx, struct hu_error *e)
{
	unsigned char buf[16 << 10];

	for (uint64_t k = 0; k < s->len;) {
		size_t want = s->len - k < sizeof(buf) ?
			      (size_t)(s->len - k) : sizeof(buf);
		ssize_t r = pread(ps->stash_fd, buf, want, (off_t)(s->at + k));

		if (r <= 0) {
			if (r == 0)
				errno = EIO;
			return stash_fail(e);
		}
		if (put(ctx, buf, (size_t)r, e) < 0)
			return -1;
		k += (uint64_t)r;
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
	const struct stashed *s;

	if (d->off < ps->pos && !d->seg &&
	    (s = stashed_at(ps, d->off, size)))
		return from_stash(ps, s, put, ctx, e);
	if (seek_forward(ps, d->off, e) < 0)
		return -1;
	if (!d->seg)
		return pass(ps, size, put, ctx, e);
	for (size_t i = 0; i < d->nseg; i++) {
		const struct hu_pseg *g = &d->seg[i];

		if (g->file_off < done || g->len > size - g->file_off)
			return hu_error_set(e, EIO, NULL, "a sparse map out of "
					    "order");
		if (zeros(g->file_off - done, put, ctx, e) < 0 ||
		    pass(ps, g->len, put, ctx, e) < 0)
			return -1;
		done = g->file_off + g->len;
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
