/* SPDX-License-Identifier: MIT */
/*
 * gzip on every core, the way pigz does it, with bytes that depend on the
 * input and the level alone.
 *
 * The input is cut into blocks of exactly BLOCK bytes of the stream (the
 * cuts fall where they fall whatever the calls were), and each block is
 * deflated by a worker as a raw deflate stream of its own: with the
 * previous block's last 32 KiB (deflate's whole window) as its dictionary
 * (deflateSetDictionary), so matches reach back across the cut as they
 * would in one stream, and ended with Z_SYNC_FLUSH, which ends the deflate
 * block and pads to a byte with an empty stored block, so the blocks'
 * bytes concatenate into one deflate stream.  The last block is ended
 * with Z_FINISH instead (its final bit).  Around them: one gzip header
 * (no name, no time, XFL as zlib sets it, OS 255) and one trailer (the
 * crc32 of the blocks' crcs combined with crc32_combine, ISIZE): a single
 * gzip member, as pigz writes, that gzip, pigz, zlib, Go's compress/gzip
 * and libarchive read.
 *
 * A block is compressed only once it is known whether another follows
 * (its flush depends on it): a full block waits for the next byte, or for
 * the finish.  So an input of BLOCK bytes or less is one block, finished,
 * with no dictionary: exactly the bytes of one zlib deflate stream of the
 * input, as the single-threaded writer made them.
 *
 * BLOCK is 1 MiB: the byte pipeline's chunk; every input up to 1 MiB (the
 * small layers, and the tests' digests) keeps its single-stream bytes;
 * each cut costs about a dozen bytes (the Huffman block ended early, the
 * 4-byte sync marker) and the hashing of a 32 KiB dictionary (3% of a
 * block's work), and a 2 GB layer still has 2000 blocks to share out.
 *
 * The blocks are a ring of 2 × workers + 1 (about 2 MiB each: input and
 * output): the feeding thread fills the next free one while the workers
 * compress the queued ones, and gives out the compressed ones in order,
 * oldest first, as they complete.  When the ring is full it waits for the
 * oldest: memory stays bounded and the feeder is held back.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "tar/pgzip.h"

#define BLOCK (1u << 20)
#define DICT (1u << 15)		/* deflate's window */
#define MAX_WORKERS 16

struct block {
	unsigned char *in;	/* DICT bytes (the dictionary ends at DICT),
				 * then the block's own */
	size_t dict, len;
	unsigned char *out;	/* the block's deflate bytes */
	size_t out_cap, out_len;
	uLong crc;		/* of the block's own bytes */
	int flush;		/* Z_SYNC_FLUSH, or Z_FINISH: the last */
	bool done;		/* compressed (or dropped): under the mutex */
	bool failed;		/* compressing failed: @err says why */
	int err;
};

struct worker {
	struct hu_pgzip *g;
	pthread_t th;
	z_stream z;
};

struct hu_pgzip {
	int level;
	hu_pgzip_out_fn *out;
	void *arg;
	pthread_mutex_t mu;
	pthread_cond_t work;	/* a block was queued, or stop */
	pthread_cond_t done;	/* a block was compressed */
	struct block *b;
	size_t n;		/* blocks in the ring */
	/* Block numbers, from 0: [head, queued) are queued or compressed
	 * and not given out yet, [taken, queued) not taken by a worker yet;
	 * number @queued is the one being filled (@fill), in slot
	 * queued % n. */
	uint64_t head, taken, queued;
	struct block *fill;
	bool stop, dropping;	/* under the mutex */
	struct worker *w;
	size_t nw;
	bool header_out;
	uLong crc;
	uint64_t isize;
};

/* ---- the workers ------------------------------------------------------ */

/* The block's bytes into room that grows as needed (compressBound()'s
 * room and the sync marker's always suffice: growing is a safety net). */
static int deflate_all(z_stream *z, struct block *b)
{
	for (;;) {
		int zr;

		z->next_out = b->out + b->out_len;
		z->avail_out = (uInt)(b->out_cap - b->out_len);
		zr = deflate(z, b->flush);
		b->out_len = b->out_cap - z->avail_out;
		if (zr == Z_STREAM_ERROR)
			return EIO;
		if (b->flush == Z_FINISH ? zr == Z_STREAM_END :
		    z->avail_in == 0 && z->avail_out != 0)
			return 0;
		if (z->avail_out == 0) {
			unsigned char *p = realloc(b->out, 2 * b->out_cap);

			if (!p)
				return ENOMEM;
			b->out = p;
			b->out_cap *= 2;
		}
	}
}

/* Deflate one block with its dictionary: 0, or an errno. */
static int compress_block(struct worker *w, struct block *b)
{
	z_stream *z = &w->z;

	b->crc = crc32(0L, b->in + DICT, (uInt)b->len);
	b->out_len = 0;
	if (deflateReset(z) != Z_OK)
		return EIO;
	if (b->dict && deflateSetDictionary(z, b->in + DICT - b->dict,
					    (uInt)b->dict) != Z_OK)
		return EIO;
	z->next_in = b->in + DICT;
	z->avail_in = (uInt)b->len;
	return deflate_all(z, b);
}

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	struct hu_pgzip *g = w->g;

	pthread_mutex_lock(&g->mu);
	for (;;) {
		struct block *b;
		bool drop;
		int err = 0;

		while (g->taken == g->queued && !g->stop)
			pthread_cond_wait(&g->work, &g->mu);
		if (g->taken == g->queued)
			break;
		b = &g->b[g->taken++ % g->n];
		drop = g->dropping;
		pthread_mutex_unlock(&g->mu);
		if (!drop)
			err = compress_block(w, b);
		pthread_mutex_lock(&g->mu);
		b->failed = err != 0;
		b->err = err;
		b->done = true;
		pthread_cond_broadcast(&g->done);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

/* ---- the feeding thread ---------------------------------------------- */

/* The gzip header as zlib writes it with deflateSetHeader() of a header
 * that names nothing: no file name, no time, the level's XFL, OS 255
 * ("unknown"), so equal input gives equal bytes. */
static int put_header(struct hu_pgzip *g, struct hu_error *e)
{
	int level = g->level == Z_DEFAULT_COMPRESSION ? 6 : g->level;
	unsigned char h[10] = { 0x1f, 0x8b, Z_DEFLATED, 0, 0, 0, 0, 0,
				level == 9 ? 2 : level < 2 ? 4 : 0, 255 };

	g->header_out = true;
	return g->out(g->arg, h, sizeof(h), e);
}

/* Give out the compressed blocks in order: waiting for each before
 * sequence @upto, then those already done without waiting. */
static int give_out(struct hu_pgzip *g, uint64_t upto, struct hu_error *e)
{
	if (!g->header_out && put_header(g, e) < 0)
		return -1;
	for (;;) {
		struct block *b = &g->b[g->head % g->n];
		bool ready;

		pthread_mutex_lock(&g->mu);
		while (g->head < upto && !b->done)
			pthread_cond_wait(&g->done, &g->mu);
		ready = g->head < g->queued && b->done;
		pthread_mutex_unlock(&g->mu);
		if (!ready)
			return 0;
		if (b->failed)
			return hu_error_set(e, b->err, NULL, "gzip failed");
		if (g->out(g->arg, b->out, b->out_len, e) < 0)
			return -1;
		g->crc = crc32_combine(g->crc, b->crc, (z_off_t)b->len);
		g->head++;
	}
}

/* Queue the block being filled, ended with @flush. */
static void queue_fill(struct hu_pgzip *g, int flush)
{
	g->fill->flush = flush;
	pthread_mutex_lock(&g->mu);
	g->queued++;
	g->fill = NULL;
	pthread_cond_signal(&g->work);
	pthread_mutex_unlock(&g->mu);
}

/* Take the next block to fill, once the ring has room: it starts with the
 * last DICT bytes of @prev (NULL: the first block) as its dictionary. */
static int take_fill(struct hu_pgzip *g, const struct block *prev,
		     struct hu_error *e)
{
	struct block *b;

	if (g->queued - g->head == g->n &&
	    give_out(g, g->queued - g->n + 1, e) < 0)
		return -1;
	b = &g->b[g->queued % g->n];
	pthread_mutex_lock(&g->mu);
	b->done = false;
	pthread_mutex_unlock(&g->mu);
	b->failed = false;
	b->len = 0;
	b->dict = prev ? DICT : 0;	/* a block before another is full */
	if (prev)	/* its last DICT bytes: [len, DICT + len) of in */
		memcpy(b->in, prev->in + prev->len, DICT);
	g->fill = b;
	return 0;
}

int hu_pgzip_write(struct hu_pgzip *g, const unsigned char *p, size_t len,
		   struct hu_error *e)
{
	if (!g->fill)		/* a failure before */
		return hu_error_set(e, EIO, NULL, "gzip failed");
	while (len) {
		struct block *b = g->fill;
		size_t n;

		if (b->len == BLOCK) {	/* full, and more follows */
			queue_fill(g, Z_SYNC_FLUSH);
			if (give_out(g, g->head, e) < 0 ||
			    take_fill(g, b, e) < 0)
				return -1;
			b = g->fill;
		}
		n = BLOCK - b->len < len ? BLOCK - b->len : len;
		memcpy(b->in + DICT + b->len, p, n);
		b->len += n;
		g->isize += n;
		p += n;
		len -= n;
	}
	return 0;
}

int hu_pgzip_finish(struct hu_pgzip *g, struct hu_error *e)
{
	unsigned char t[8];

	if (!g->fill)		/* a failure before */
		return hu_error_set(e, EIO, NULL, "gzip failed");
	queue_fill(g, Z_FINISH);
	if (give_out(g, g->queued, e) < 0)
		return -1;
	for (int i = 0; i < 4; i++) {	/* little-endian, as gzip has it */
		t[i] = (unsigned char)(g->crc >> (8 * i));
		t[4 + i] = (unsigned char)(g->isize >> (8 * i));
	}
	return g->out(g->arg, t, sizeof(t), e);
}

/* ---- start and stop ---------------------------------------------------- */

static size_t worker_count(int threads)
{
	const char *env = getenv("HUNION_GZIP_THREADS");
	long n = threads;

	if (n <= 0 && env && *env)
		n = strtol(env, NULL, 10);
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		return 1;
	return n > MAX_WORKERS ? MAX_WORKERS : (size_t)n;
}

static int alloc_ring(struct hu_pgzip *g, struct hu_error *e)
{
	size_t cap = compressBound(BLOCK) + 64;	/* + the sync marker */

	g->b = calloc(g->n, sizeof(*g->b));
	if (!g->b)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < g->n; i++) {
		g->b[i].in = malloc(DICT + BLOCK);
		g->b[i].out = malloc(cap);
		g->b[i].out_cap = cap;
		if (!g->b[i].in || !g->b[i].out)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	return 0;
}

/* Start @want workers; fewer will do (the bytes are the same), none will
 * not. */
static int start_workers(struct hu_pgzip *g, size_t want, struct hu_error *e)
{
	int err = 0;

	g->w = calloc(want, sizeof(*g->w));
	if (!g->w)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (; g->nw < want; g->nw++) {
		struct worker *w = &g->w[g->nw];
		int zr;

		w->g = g;
		zr = deflateInit2(&w->z, g->level, Z_DEFLATED, -15, 8,
				  Z_DEFAULT_STRATEGY);
		if (zr != Z_OK) {
			err = zr == Z_MEM_ERROR ? ENOMEM : EINVAL;
			break;
		}
		err = pthread_create(&w->th, NULL, worker_run, w);
		if (err) {
			deflateEnd(&w->z);
			break;
		}
	}
	if (g->nw == 0)
		return hu_error_set(e, err, NULL, "gzip: cannot start");
	return 0;
}

int hu_pgzip_open(struct hu_pgzip **out, int level, int threads,
		  hu_pgzip_out_fn *fn, void *arg, struct hu_error *e)
{
	struct hu_pgzip *g = calloc(1, sizeof(*g));
	size_t want = worker_count(threads);

	*out = NULL;
	if (!g)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	g->level = level ? level : Z_DEFAULT_COMPRESSION;
	g->out = fn;
	g->arg = arg;
	g->n = 2 * want + 1;
	g->crc = crc32(0L, NULL, 0);
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->work, NULL);
	pthread_cond_init(&g->done, NULL);
	if (alloc_ring(g, e) < 0 || start_workers(g, want, e) < 0 ||
	    take_fill(g, NULL, e) < 0) {
		hu_pgzip_free(g);
		return -1;
	}
	*out = g;
	return 0;
}

int hu_pgzip_workers(const struct hu_pgzip *g)
{
	return (int)g->nw;
}

void hu_pgzip_free(struct hu_pgzip *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	g->stop = true;
	g->dropping = true;
	pthread_cond_broadcast(&g->work);
	pthread_mutex_unlock(&g->mu);
	for (size_t i = 0; i < g->nw; i++)
		pthread_join(g->w[i].th, NULL);
	for (size_t i = 0; i < g->nw; i++)
		deflateEnd(&g->w[i].z);
	free(g->w);
	for (size_t i = 0; g->b && i < g->n; i++) {
		free(g->b[i].in);
		free(g->b[i].out);
	}
	free(g->b);
	pthread_cond_destroy(&g->done);
	pthread_cond_destroy(&g->work);
	pthread_mutex_destroy(&g->mu);
	free(g);
}
