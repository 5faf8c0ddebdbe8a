/* SPDX-License-Identifier: MIT */
/*
 * A regular file's bytes into the EROFS image: copied once, from its fd
 * (copy_file_range where the kernel can, else read and write) or through
 * its read callback; a sparse file becomes chunk-based, its holes left
 * out of the image.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "common/pool.h"
#include "erofs/erofs_fs.h"

#define MAP_MAX		16384u	/* block map entries we aim at: 64 KiB */
#define CFR_MAX		(1u << 30)

static bool cfr_unsupported(int err)
{
	return err == EXDEV || err == EINVAL || err == ENOSYS ||
	       err == EOPNOTSUPP || err == ETXTBSY || err == EBADF;
}

static int shrank(struct hu_error *e)
{
	return hu_error_set(e, EIO, NULL,
			    "the file got shorter while it was read");
}

/* copy_file_range() as far as it goes; the rest is left in *@len. */
static int copy_kernel(struct hu_erofs *w, int fd, uint64_t *from,
		       uint64_t *to, uint64_t *len, struct hu_error *e)
{
	while (*len) {
		loff_t in = (loff_t)*from, out = (loff_t)*to;
		size_t want = *len < CFR_MAX ? (size_t)*len : CFR_MAX;
		ssize_t n = copy_file_range(fd, &in, w->fd, &out, want, 0);

		if (n < 0 && hu_eintr_retry())
			continue;
		if (n < 0 && cfr_unsupported(errno)) {
			w->no_cfr = true;
			return 0;
		}
		if (n < 0) {
			w->failed = true;
			return hu_error_set(e, errno, NULL,
					    "cannot copy the file's data");
		}
		if (n == 0)
			return shrank(e);
		*from += (uint64_t)n;
		*to += (uint64_t)n;
		*len -= (uint64_t)n;
	}
	return 0;
}

int hu_erofs_pread_all(int fd, void *buf, size_t len, uint64_t off,
		    struct hu_error *e)
{
	char *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0 && hu_eintr_retry())
			continue;
		if (n < 0)
			return hu_error_set(e, errno, NULL,
					    "cannot read the file's data");
		if (n == 0)
			return shrank(e);
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int hu_erofs_copy_fd(struct hu_erofs *w, int fd, uint64_t from, uint64_t to,
		  uint64_t len, struct hu_error *e)
{
	/* The UUID hash must see every byte, so no kernel copy then. */
	if (!w->no_cfr && !w->hash &&
	    copy_kernel(w, fd, &from, &to, &len, e) < 0)
		return -1;
	while (len) {
		size_t n = len < IO_BUF ? (size_t)len : IO_BUF;

		if (hu_erofs_pread_all(fd, w->buf, n, from, e) < 0 ||
		    hu_erofs_write(w, w->buf, n, to, e) < 0)
			return -1;
		from += n;
		to += n;
		len -= n;
	}
	return 0;
}

/* ---- large files copied beside the walk --------------------------------- */

/* A file's full blocks from EROFS_SMALL on are copied by a worker: the
 * kernel's copy of them then overlaps the walk's reading of the next
 * entries (as the tar writer's pipeline overlaps them).  Their place in
 * the image is allocated before, so the bytes never depend on timing. */

struct copy_job {
	struct hu_pool_job job;
	int src, dst;
	uint64_t to, len;
	char *path;		/* for errors */
};

static void copy_job_drop(struct hu_pool_job *j)
{
	struct copy_job *c = (struct copy_job *)j;

	close(c->src);
	free(c->path);
	free(c);
}

/* One step of the worker's copy, by read and write through @buf: -1
 * with @e, *@src_err when the source failed. */
static int copy_by_hand(struct copy_job *c, uint8_t *buf, size_t n,
			uint64_t from, uint64_t to, bool *src_err,
			struct hu_error *e)
{
	*src_err = true;
	if (hu_erofs_pread_all(c->src, buf, n, from, e) < 0)
		return -1;
	*src_err = false;
	if (hu_erofs_pwrite_all(c->dst, buf, n, to) < 0)
		return hu_error_set(e, errno, NULL,
				    "cannot write the EROFS image");
	return 0;
}

/* The worker's copy: the kernel's, else read and write through a buffer
 * of its own (nothing of the writer's is touched from here).  A failure
 * of the source names the file; one of the image names nothing (the
 * caller names its output). */
static int copy_job_run(struct hu_pool_job *j, struct hu_error *e)
{
	struct copy_job *c = (struct copy_job *)j;
	uint64_t from = 0, to = c->to, len = c->len;
	bool src_err = false, by_hand = false;
	uint8_t *buf = NULL;
	int rc = 0;

	while (len && rc == 0) {
		loff_t in = (loff_t)from, out = (loff_t)to;
		size_t n = len < CFR_MAX ? (size_t)len : CFR_MAX;
		ssize_t got = by_hand ? 0 :
			copy_file_range(c->src, &in, c->dst, &out, n, 0);

		if (!by_hand && got < 0 && hu_eintr_retry())
			continue;
		if (!by_hand && got < 0 && !cfr_unsupported(errno)) {
			src_err = errno != ENOSPC && errno != EDQUOT;
			rc = hu_error_set(e, errno, NULL,
					  "cannot copy the file's data");
			break;
		}
		if (!by_hand && got == 0) {
			src_err = true;
			rc = shrank(e);
			break;
		}
		if (!by_hand && got < 0) {
			by_hand = true;
			buf = malloc(IO_BUF);
			if (!buf)
				rc = hu_error_set(e, ENOMEM, NULL,
						  "out of memory");
			continue;
		}
		if (by_hand) {
			n = n < IO_BUF ? n : IO_BUF;
			rc = copy_by_hand(c, buf, n, from, to, &src_err, e);
			got = (ssize_t)n;
		}
		from += (uint64_t)got;
		to += (uint64_t)got;
		len -= (uint64_t)got;
	}
	if (rc < 0 && src_err) {
		free(e->path);
		e->path = strdup(c->path);
		e->whole = true;
	}
	free(buf);
	copy_job_drop(j);
	return rc;
}

/* The walk's thread is the critical path (it opens and reads every
 * file); the lister takes a core's share too.  One copier per core
 * beyond the first: on 2 cores three copiers took the walk's core and
 * the image came 20% later than with one. */
int hu_erofs_copies_start(struct hu_erofs *w, struct hu_error *e)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	if (w->hash)
		return 0;
	return hu_pool_start(&w->pool, cores > 2 ? (unsigned)cores - 1 : 1,
			     e);
}

int hu_erofs_copies_done(struct hu_erofs *w, struct hu_error *e)
{
	struct hu_pool *p = w->pool;

	w->pool = NULL;
	if (p && hu_pool_finish(p, e) < 0) {
		w->failed = true;
		return -1;
	}
	return 0;
}

int hu_erofs_copy_blocks(struct hu_erofs *w, const struct hu_erofs_data *d,
			 uint64_t to, uint64_t len, struct hu_error *e)
{
	struct copy_job *c;

	if (!w->pool || len < EROFS_SMALL || !d->path)
		return hu_erofs_copy_fd(w, d->fd, 0, to, len, e);
	c = calloc(1, sizeof(*c));
	if (!c || !(c->path = hu_path_join(d->layer, d->path))) {
		free(c);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	c->src = fcntl(d->fd, F_DUPFD_CLOEXEC, 0);
	if (c->src < 0) {
		free(c->path);
		free(c);
		return hu_error_set(e, errno, NULL, "cannot keep the file open");
	}
	*c = (struct copy_job){ .job = { .run = copy_job_run,
					 .drop = copy_job_drop },
				.src = c->src, .dst = w->fd, .to = to,
				.len = len, .path = c->path };
	if (hu_pool_submit(w->pool, &c->job, e) < 0) {
		w->failed = true;
		return -1;
	}
	return 0;
}

int hu_erofs_data_flush(struct hu_erofs *w, struct hu_error *e)
{
	size_t n = w->dlen;

	w->dlen = 0;
	return n ? hu_erofs_write(w, w->dbuf, n, w->dpos, e) : 0;
}

int hu_erofs_read_small(struct hu_erofs *w, const struct hu_erofs_data *d,
			uint64_t to, uint64_t blocks, uint8_t *tail,
			size_t rest, struct hu_error *e)
{
	size_t span = (size_t)((blocks + w->blksz - 1) & ~(uint64_t)(w->blksz - 1));
	uint8_t *p;

	if (!blocks)
		return hu_erofs_pread_all(d->fd, tail, rest, 0, e);
	if (w->dlen && (w->dpos + w->dlen != to ||
			w->dlen + span + rest > IO_BUF) &&
	    hu_erofs_data_flush(w, e) < 0)
		return -1;
	if (!w->dlen)
		w->dpos = to;
	p = w->dbuf + w->dlen;
	if (hu_erofs_pread_all(d->fd, p, (size_t)blocks + rest, 0, e) < 0)
		return -1;
	if (rest)
		memcpy(tail, p + blocks, rest);
	/* the last block's padding, where the tail was read */
	memset(p + blocks, 0, span - (size_t)blocks);
	w->dlen += span;
	return 0;
}

/* Where pushed bytes go: the first @blocks to the image at @to, batched
 * in w->buf, the rest (the inline tail) to @tail. */
struct feed_sink {
	struct hu_erofs *w;
	uint64_t to, blocks, got, size;
	size_t held;		/* bytes in w->buf not yet written */
	uint8_t *tail;
};

static int sink_flush(struct feed_sink *s, struct hu_error *e)
{
	uint64_t at = s->to + (s->got < s->blocks ? s->got : s->blocks) -
		      s->held;

	if (!s->held)
		return 0;
	if (hu_erofs_write(s->w, s->w->buf, s->held, at, e) < 0)
		return -1;
	s->held = 0;
	return 0;
}

static int sink_put(void *ctx, const void *p, size_t n, struct hu_error *e)
{
	struct feed_sink *s = ctx;
	const uint8_t *b = p;

	if (n > s->size - s->got)
		return hu_error_set(e, EIO, NULL,
				    "the file got longer while it was read");
	while (n && s->got < s->blocks) {
		uint64_t left = s->blocks - s->got;
		size_t k = IO_BUF - s->held;

		if (k > n)
			k = n;
		if (k > left)
			k = (size_t)left;
		memcpy(s->w->buf + s->held, b, k);
		s->held += k;
		s->got += k;
		b += k;
		n -= k;
		if (s->held == IO_BUF && sink_flush(s, e) < 0)
			return -1;
	}
	if (n) {
		memcpy(s->tail + (s->got - s->blocks), b, n);
		s->got += n;
	}
	return 0;
}

int hu_erofs_feed(struct hu_erofs *w, const struct hu_erofs_data *d,
	       uint64_t to, uint64_t blocks, uint8_t *tail,
	       struct hu_error *e)
{
	struct feed_sink s = {
		.w = w, .to = to, .blocks = blocks, .size = d->size,
		.tail = tail,
	};

	if (d->feed(d->ctx, sink_put, &s, e) < 0 || sink_flush(&s, e) < 0)
		return -1;
	if (s.got < s.size)
		return shrank(e);
	return 0;
}

/* The next data extent of @fd at or after @pos, cut at @size: [*@d,
 * *@h); *@d == @size when there is none. */
static int next_data(int fd, uint64_t pos, uint64_t size, uint64_t *d,
		     uint64_t *h, struct hu_error *e)
{
	off_t o = lseek(fd, (off_t)pos, SEEK_DATA);

	if (o < 0 && errno == ENXIO) {
		*d = *h = size;
		return 0;
	}
	if (o < 0)
		return hu_error_set(e, errno, NULL, "cannot find the file's data");
	*d = (uint64_t)o < size ? (uint64_t)o : size;
	o = lseek(fd, o, SEEK_HOLE);
	if (o < 0)
		return hu_error_set(e, errno, NULL, "cannot find the file's holes");
	*h = (uint64_t)o < size ? (uint64_t)o : size;
	return 0;
}

/*
 * Is the file of @d sparse enough for a chunk-based layout: is a whole
 * chunk of it a hole?  Then *@map (malloc'd, *@nchunks entries) says
 * which chunks hold data (1) and which are holes (0).  The chunk is the
 * smallest power of two blocks keeping the map within MAP_MAX entries.
 */
int hu_erofs_sparse_map(struct hu_erofs *w, const struct hu_erofs_data *d,
		     unsigned *chunkbits, uint32_t **map, uint64_t *nchunks,
		     struct hu_error *e)
{
	uint64_t n, holes = 0, pos = 0, dat, hole;
	unsigned cb = 0, shift;
	off_t first;
	uint32_t *m;

	*map = NULL;
	if (d->fd < 0 || d->no_holes || d->size <= w->blksz)
		return 0;
	first = lseek(d->fd, 0, SEEK_HOLE);
	if (first < 0 || (uint64_t)first >= d->size)
		return 0;	/* no hole, or no way to tell */
	for (;;) {
		shift = w->blkbits + cb;
		n = ((d->size - 1) >> shift) + 1;
		if (n <= MAP_MAX || cb == 31 || shift >= 62)
			break;
		cb++;
	}
	m = calloc(n, sizeof(*m));
	if (!m)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	while (pos < d->size) {
		if (next_data(d->fd, pos, d->size, &dat, &hole, e) < 0) {
			free(m);
			return -1;
		}
		if (dat >= hole)
			break;
		for (uint64_t c = dat >> shift; c <= (hole - 1) >> shift; c++)
			m[c] = 1;
		pos = hole;
	}
	for (uint64_t c = 0; c < n; c++)
		holes += !m[c];
	if (!holes) {
		free(m);
		return 0;
	}
	*chunkbits = cb;
	*map = m;
	*nchunks = n;
	return 0;
}

/*
 * Give each data chunk of @map its blocks, in order, and copy the file's
 * data extents there: a hole inside a data chunk is left unwritten (it
 * reads as zeros), a hole chunk gets EROFS_NULL_ADDR.
 */
int hu_erofs_sparse_copy(struct hu_erofs *w, const struct hu_erofs_data *d,
		      unsigned chunkbits, uint32_t *map, uint64_t nchunks,
		      struct hu_error *e)
{
	unsigned shift = w->blkbits + chunkbits;
	uint64_t pos = 0, dat, hole;

	for (uint64_t c = 0; c < nchunks; c++) {
		uint64_t start = c << shift, len = d->size - start;

		if (len > (1ull << shift))
			len = 1ull << shift;
		if (!map[c])
			map[c] = EROFS_NULL_ADDR;
		else if (hu_erofs_alloc_blocks(w, len, &map[c], e) < 0)
			return -1;
	}
	while (pos < d->size) {
		if (next_data(d->fd, pos, d->size, &dat, &hole, e) < 0)
			return -1;
		if (dat >= hole)
			break;
		for (uint64_t o = dat; o < hole;) {
			uint64_t c = o >> shift;
			uint64_t cend = (c + 1) << shift;
			uint64_t len = (hole < cend ? hole : cend) - o;

			if (map[c] == EROFS_NULL_ADDR)
				return hu_error_set(e, EIO, NULL,
						    "the file changed while it was read");
			if (hu_erofs_copy_fd(w, d->fd, o,
					  ((uint64_t)map[c] << w->blkbits) +
						  (o - (c << shift)),
					  len, e) < 0)
				return -1;
			o += len;
		}
		pos = hole;
	}
	return 0;
}
