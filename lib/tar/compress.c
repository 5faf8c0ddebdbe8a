/* SPDX-License-Identifier: MIT */
/*
 * The byte pipeline under the tar writer: hash the input, compress it
 * (gzip, zstd; xz and bzip2 for plain tarballs),
 * hash and count the output, write it out in large complete writes.
 *
 * All of that runs in threads of their own: the caller (reading files,
 * formatting tar headers) only copies bytes into one of a few 1 MiB
 * chunks and hands full ones over to the pipeline thread (hashing the
 * input, compressing with libzstd's own workers, or gzip's: pgzip.c),
 * which hands the compressed bytes to a writer thread (hashing the
 * output, writing).
 * Reading, hashing, compressing and writing overlap, and a write that
 * waits on the disk (dirty pages being flushed) stops none of the rest.
 *
 * gzip runs on every core (pgzip.c), as pigz does: the tar stream is cut
 * into blocks of 1 MiB, each deflated by a worker with the previous
 * block's last 32 KiB as its dictionary and ended with Z_SYNC_FLUSH (a
 * byte boundary, so the blocks' bytes concatenate into one deflate
 * stream), the last one with Z_FINISH; one gzip header and one trailer
 * (the crc32s combined, ISIZE) around them make a single member; the
 * pipeline thread gives the blocks out in order.  The cuts fall every
 * 1 MiB of the stream, whatever the chunks the caller handed over.
 *
 * Same input, same bytes: gzip gets a header with no name, no time and
 * OS 255 ("unknown"), and its blocks do not depend on how many workers
 * there are (up to one block, the bytes are those of the single zlib
 * stream written before gzip had workers); zstd always runs with at least
 * one worker thread, and libzstd's multi-threaded output does not depend
 * on how many there are; xz runs liblzma's multi-threaded encoder, whose
 * blocks have a fixed size (the preset's), so neither do its bytes; bzip2
 * has nothing but the data in its stream.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bzlib.h>
#include <lzma.h>
#include <zstd.h>

#include "tar/compress.h"
#include "tar/pgzip.h"
#include "common/crypto_dl.h"
#include "internal.h"

#define OUT_BUF (1u << 20)
#define NOUT 4			/* compressed buffers: one filling, the rest
				 * queued for the writer */
#define CHUNK (1u << 20)
#define NCHUNKS 8		/* input in flight to the pipeline thread
				 * (16 took 8 MiB more, no faster) */
_Static_assert(NOUT <= NCHUNKS, "a stage holds at most NCHUNKS buffers");

struct hu_zsink;

/*
 * One stage: a thread working through a ring of buffers that the thread
 * before it fills.  Buffers [head, head + count) (mod n) are queued or
 * being worked on, under @mu; the producer fills the next one, its own.
 */
struct stage {
	struct hu_zsink *z;
	int (*work)(struct hu_zsink *z, const unsigned char *p, size_t len,
		    struct hu_error *e);
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	bool on;		/* the thread runs */
	unsigned char *buf[NCHUNKS];
	size_t len[NCHUNKS];
	size_t n, head, count;
	bool done;		/* no more buffers will come */
	bool dropping;		/* aborted: work on nothing more */
	bool failed;		/* the work failed: @err says why */
	struct hu_error err;
};

struct hu_zsink {
	int fd;
	struct hu_writebehind wb;
	enum hu_compress c;
	EVP_MD_CTX *in_md, *out_md;
	struct hu_pgzip *gz;
	ZSTD_CCtx *zc;
	lzma_stream xz;
	bool xz_on;
	bz_stream bz;
	bool bz_on;
	struct stage pipe;	/* the input: hashed, compressed */
	unsigned char *in;	/* the caller's buffer of pipe */
	size_t in_len;
	struct stage writer;	/* compressed output: hashed, written (not
				 * started for uncompressed output) */
	unsigned char *out;	/* the pipeline's buffer of writer */
	size_t out_len;
	uint64_t out_bytes;	/* the writer's (or, uncompressed, the
				 * pipeline's): read once both are done */
	struct hu_progress_bytes *bytes;	/* live count, or NULL */
};

static const char *const media_types[] = {
	[HU_COMP_NONE] = "application/vnd.oci.image.layer.v1.tar",
	[HU_COMP_GZIP] = "application/vnd.oci.image.layer.v1.tar+gzip",
	[HU_COMP_ZSTD] = "application/vnd.oci.image.layer.v1.tar+zstd",
	[HU_COMP_XZ] = "application/x-xz",
	[HU_COMP_BZIP2] = "application/x-bzip2",
};

static const char *const names[] = {
	[HU_COMP_NONE] = "none", [HU_COMP_GZIP] = "gzip",
	[HU_COMP_ZSTD] = "zstd", [HU_COMP_XZ] = "xz",
	[HU_COMP_BZIP2] = "bzip2",
};

/* Write all of @buf to the fd, hashing it on the way. */
static int emit(struct hu_zsink *z, const unsigned char *buf, size_t len,
		struct hu_error *e)
{
	const unsigned char *p = buf;

	/* Uncompressed, the output is the input: one hash does. */
	if (len && z->out_md && z->c != HU_COMP_NONE &&
	    !EVP_DigestUpdate(z->out_md, buf, len))
		return hu_error_set(e, EIO, NULL, "sha256 failed");
	z->out_bytes += len;
	while (len) {
		ssize_t n = hu_wr_write(z->fd, p, len);

		if (n < 0 && hu_eintr_retry())
			continue;
		if (n <= 0)
			return hu_error_set(e, n < 0 ? errno : EIO, NULL,
					    "cannot write");
		if (hu_writebehind_wrote(&z->wb, (size_t)n) < 0)
			return hu_error_set(e, errno, NULL, "cannot write");
		/* what reached the fd, so the last count is the file's
		 * size (out_bytes counts before the write) */
		hu_progress_bytes_add(z->bytes, 0, (uint64_t)n);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- stages ---------------------------------------------------------- */

static int stage_init(struct stage *st, struct hu_zsink *z, size_t n,
		      size_t size,
		      int (*work)(struct hu_zsink *, const unsigned char *,
				  size_t, struct hu_error *))
{
	int rc = 0;

	st->z = z;
	st->work = work;
	st->n = n;
	pthread_mutex_init(&st->mu, NULL);
	pthread_cond_init(&st->cv, NULL);
	for (size_t i = 0; i < n; i++)
		if (!(st->buf[i] = malloc(size)))
			rc = -1;
	return rc;
}

static void *stage_run(void *arg)
{
	struct stage *st = arg;

	pthread_mutex_lock(&st->mu);
	for (;;) {
		size_t i = st->head;
		bool skip;
		int rc = 0;

		while (!st->count && !st->done)
			pthread_cond_wait(&st->cv, &st->mu);
		if (!st->count)
			break;
		skip = st->failed || st->dropping;
		pthread_mutex_unlock(&st->mu);
		if (!skip)
			rc = st->work(st->z, st->buf[i], st->len[i], &st->err);
		pthread_mutex_lock(&st->mu);
		if (rc < 0)
			st->failed = true;
		st->head = (i + 1) % st->n;
		st->count--;
		pthread_cond_broadcast(&st->cv);
	}
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

static int stage_start(struct stage *st, struct hu_error *e)
{
	int rc = pthread_create(&st->th, NULL, stage_run, st);

	if (rc)
		return hu_error_set(e, rc, NULL, "cannot start a thread");
	st->on = true;
	return 0;
}

/* -1 with the stage's own error if it failed. */
static int stage_error(struct stage *st, struct hu_error *e)
{
	bool failed;

	pthread_mutex_lock(&st->mu);
	failed = st->failed;
	pthread_mutex_unlock(&st->mu);
	return failed ? hu_error_set(e, st->err.err, NULL, "%s", st->err.msg) :
			0;
}

/* Queue the producer's buffer with @len bytes (nothing when 0), wait
 * until the next one is free and make it the producer's, in *@own. */
static int stage_put(struct stage *st, size_t len, unsigned char **own,
		     struct hu_error *e)
{
	pthread_mutex_lock(&st->mu);
	if (len) {
		st->len[(st->head + st->count) % st->n] = len;
		st->count++;
		pthread_cond_broadcast(&st->cv);
	}
	while (st->count == st->n && !st->failed)
		pthread_cond_wait(&st->cv, &st->mu);
	*own = st->buf[(st->head + st->count) % st->n];
	pthread_mutex_unlock(&st->mu);
	return stage_error(st, e);
}

/* Let the thread finish what is queued (or, dropping, discard it). */
static void stage_stop(struct stage *st, bool drop)
{
	if (!st->on)
		return;
	pthread_mutex_lock(&st->mu);
	st->done = true;
	st->dropping = st->dropping || drop;
	pthread_cond_broadcast(&st->cv);
	pthread_mutex_unlock(&st->mu);
	pthread_join(st->th, NULL);
	st->on = false;
}

static void stage_free(struct stage *st)
{
	stage_stop(st, true);
	for (size_t i = 0; i < st->n; i++)
		free(st->buf[i]);
	hu_error_clear(&st->err);
	pthread_cond_destroy(&st->cv);
	pthread_mutex_destroy(&st->mu);
}

/* ---- the pipeline -------------------------------------------------------- */

/* Hand the gathered compressed bytes to the writer and take the next
 * free buffer (uncompressed output has no writer thread: write here). */
static int flush_out(struct hu_zsink *z, struct hu_error *e)
{
	size_t len = z->out_len;

	z->out_len = 0;
	if (!z->writer.on)
		return emit(z, z->out, len, e);
	return stage_put(&z->writer, len, &z->out, e);
}

/* Take @len compressed bytes into the output buffers (gzip's blocks come
 * whole from pgzip.c). */
static int put_out(void *arg, const unsigned char *p, size_t len,
		   struct hu_error *e)
{
	struct hu_zsink *z = arg;

	while (len) {
		size_t n = OUT_BUF - z->out_len;

		if (n > len)
			n = len;
		memcpy(z->out + z->out_len, p, n);
		z->out_len += n;
		p += n;
		len -= n;
		if (z->out_len == OUT_BUF && flush_out(z, e) < 0)
			return -1;
	}
	return 0;
}

static int put_zstd(struct hu_zsink *z, const unsigned char *p, size_t len,
		    ZSTD_EndDirective end, struct hu_error *e)
{
	ZSTD_inBuffer in = { p, len, 0 };

	for (;;) {
		ZSTD_outBuffer out = { z->out, OUT_BUF, z->out_len };
		size_t left = ZSTD_compressStream2(z->zc, &out, &in, end);

		if (ZSTD_isError(left))
			return hu_error_set(e, EIO, NULL, "zstd failed: %s",
					    ZSTD_getErrorName(left));
		z->out_len = out.pos;
		if (z->out_len == OUT_BUF && flush_out(z, e) < 0)
			return -1;
		if (end == ZSTD_e_end ? left == 0 : in.pos == in.size)
			return 0;
	}
}

/* Run liblzma over @len bytes with @action (LZMA_RUN, LZMA_FINISH). */
static int put_xz(struct hu_zsink *z, const unsigned char *p, size_t len,
		  lzma_action action, struct hu_error *e)
{
	lzma_ret r;

	z->xz.next_in = p;
	z->xz.avail_in = len;
	for (;;) {
		z->xz.next_out = z->out + z->out_len;
		z->xz.avail_out = OUT_BUF - z->out_len;
		r = lzma_code(&z->xz, action);
		z->out_len = OUT_BUF - z->xz.avail_out;
		if (r != LZMA_OK && r != LZMA_STREAM_END)
			return hu_error_set(e, r == LZMA_MEM_ERROR ? ENOMEM :
					    EIO, NULL, "xz failed (liblzma "
					    "error %d)", (int)r);
		if (z->out_len == OUT_BUF && flush_out(z, e) < 0)
			return -1;
		if (action == LZMA_FINISH ? r == LZMA_STREAM_END :
		    z->xz.avail_in == 0 && z->xz.avail_out != 0)
			return 0;
	}
}

/* Run libbz2 over @len bytes with @action (BZ_RUN, BZ_FINISH). */
static int put_bzip2(struct hu_zsink *z, const unsigned char *p, size_t len,
		     int action, struct hu_error *e)
{
	int r;

	z->bz.next_in = (char *)p;
	z->bz.avail_in = (unsigned int)len;	/* len <= CHUNK */
	for (;;) {
		z->bz.next_out = (char *)z->out + z->out_len;
		z->bz.avail_out = (unsigned int)(OUT_BUF - z->out_len);
		r = BZ2_bzCompress(&z->bz, action);
		z->out_len = OUT_BUF - z->bz.avail_out;
		if (r != BZ_RUN_OK && r != BZ_FINISH_OK && r != BZ_STREAM_END)
			return hu_error_set(e, EIO, NULL, "bzip2 failed "
					    "(libbz2 error %d)", r);
		if (z->out_len == OUT_BUF && flush_out(z, e) < 0)
			return -1;
		if (action == BZ_FINISH ? r == BZ_STREAM_END :
		    z->bz.avail_in == 0 && z->bz.avail_out != 0)
			return 0;
	}
}

/* Hash @len bytes of input and pass them on. */
static int process(struct hu_zsink *z, const unsigned char *p, size_t len,
		   struct hu_error *e)
{
	if (!len)
		return 0;
	if (z->in_md && !EVP_DigestUpdate(z->in_md, p, len))
		return hu_error_set(e, EIO, NULL, "sha256 failed");
	if (z->c == HU_COMP_GZIP)
		return hu_pgzip_write(z->gz, p, len, e);
	if (z->c == HU_COMP_ZSTD)
		return put_zstd(z, p, len, ZSTD_e_continue, e);
	if (z->c == HU_COMP_XZ)
		return put_xz(z, p, len, LZMA_RUN, e);
	if (z->c == HU_COMP_BZIP2)
		return put_bzip2(z, p, len, BZ_RUN, e);
	return emit(z, p, len, e);
}

/* Queue the caller's buffer; wait until the next one is free. */
static int hand_over(struct hu_zsink *z, struct hu_error *e)
{
	size_t len = z->in_len;

	z->in_len = 0;
	return stage_put(&z->pipe, len, &z->in, e);
}

int hu_zsink_write(struct hu_zsink *z, const void *buf, size_t len,
		   struct hu_error *e)
{
	const unsigned char *p = buf;

	while (len) {
		size_t n = CHUNK - z->in_len;

		if (n > len)
			n = len;
		if (p != z->in + z->in_len)	/* not reserved */
			memcpy(z->in + z->in_len, p, n);
		z->in_len += n;
		p += n;
		len -= n;
		if (z->in_len == CHUNK && hand_over(z, e) < 0)
			return -1;
	}
	return 0;
}

int hu_zsink_reserve(struct hu_zsink *z, size_t min, void **p, size_t *room,
		     struct hu_error *e)
{
	if (CHUNK - z->in_len < min && hand_over(z, e) < 0)
		return -1;
	*p = z->in + z->in_len;
	*room = CHUNK - z->in_len;
	return 0;
}

static int online_cores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

static int zstd_setup(struct hu_zsink *z, int level, int threads,
		      struct hu_error *e)
{
	ZSTD_bounds wb = ZSTD_cParam_getBounds(ZSTD_c_nbWorkers);
	size_t r;

	z->zc = ZSTD_createCCtx();
	if (!z->zc)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (threads <= 0)
		threads = online_cores();
	if (!ZSTD_isError(wb.error) && threads > wb.upperBound)
		threads = wb.upperBound;
	r = ZSTD_CCtx_setParameter(z->zc, ZSTD_c_compressionLevel,
				   level ? level : ZSTD_CLEVEL_DEFAULT);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(z->zc, ZSTD_c_checksumFlag, 1);
	if (ZSTD_isError(r))
		return hu_error_set(e, EINVAL, NULL, "zstd: %s",
				    ZSTD_getErrorName(r));
	/* A libzstd built without threads refuses: compress in this
	 * thread then. */
	(void)ZSTD_CCtx_setParameter(z->zc, ZSTD_c_nbWorkers, threads);
	/* Each worker holds a job in and out, and libzstd a few more
	 * queued: its default job, 4 windows (8 MiB up to level 3), took
	 * 70 MiB on two cores, the most of a flatten's memory.  Two
	 * windows cost under 1% of the size (each job starts with the
	 * window before it); above level 3 the windows grow, and the
	 * default stays. */
	if ((level ? level : ZSTD_CLEVEL_DEFAULT) <= 3)
		(void)ZSTD_CCtx_setParameter(z->zc, ZSTD_c_jobSize, 4u << 20);
	return 0;
}

/* liblzma's multi-threaded encoder at @level (0: its default, 6).  Each
 * worker holds a block in and out and an encoder: fewer workers where
 * they would take more than a quarter of the memory. */
static int xz_setup(struct hu_zsink *z, int level, int threads,
		    struct hu_error *e)
{
	lzma_mt mt = { .preset = level ? (uint32_t)level : LZMA_PRESET_DEFAULT,
		       .check = LZMA_CHECK_CRC64 };
	uint64_t budget = lzma_physmem() / 4;
	lzma_ret r;

	mt.threads = threads > 0 ? (uint32_t)threads :
				   (uint32_t)online_cores();
	while (mt.threads > 1 && budget &&
	       lzma_stream_encoder_mt_memusage(&mt) > budget)
		mt.threads--;
	z->xz = (lzma_stream)LZMA_STREAM_INIT;
	r = lzma_stream_encoder_mt(&z->xz, &mt);
	if (r != LZMA_OK)
		return hu_error_set(e, r == LZMA_MEM_ERROR ? ENOMEM : EINVAL,
				    NULL, "xz: cannot start (liblzma error "
				    "%d)", (int)r);
	z->xz_on = true;
	return 0;
}

static int bzip2_setup(struct hu_zsink *z, int level, struct hu_error *e)
{
	int r = BZ2_bzCompressInit(&z->bz, level ? level : 9, 0, 0);

	if (r != BZ_OK)
		return hu_error_set(e, r == BZ_MEM_ERROR ? ENOMEM : EINVAL,
				    NULL, "bzip2: cannot start (libbz2 "
				    "error %d)", r);
	z->bz_on = true;
	return 0;
}

int hu_zsink_open(struct hu_zsink **out, int fd, enum hu_compress c,
		  int level, int threads, bool digests,
		  struct hu_progress_bytes *bytes, struct hu_error *e)
{
	struct hu_zsink *z;
	int rc = -1;

	*out = NULL;
	if (digests && hu_crypto_need(e) < 0)
		return -1;
	z = calloc(1, sizeof(*z));
	if (!z)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	z->fd = fd;
	z->bytes = bytes;
	hu_writebehind_init(&z->wb, fd);
	z->c = c;
	if (stage_init(&z->pipe, z, NCHUNKS, CHUNK, process) < 0 ||
	    stage_init(&z->writer, z, c == HU_COMP_NONE ? 1 : NOUT, OUT_BUF,
		       emit) < 0 ||
	    (digests && (!(z->in_md = EVP_MD_CTX_new()) ||
			 !(z->out_md = EVP_MD_CTX_new())))) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto fail;
	}
	z->in = z->pipe.buf[0];
	z->out = z->writer.buf[0];
	if (digests &&
	    (!EVP_DigestInit_ex(z->in_md, EVP_sha256(), NULL) ||
	     !EVP_DigestInit_ex(z->out_md, EVP_sha256(), NULL))) {
		hu_error_set(e, EIO, NULL, "sha256 is not available");
		goto fail;
	}
	if (c == HU_COMP_GZIP)
		rc = hu_pgzip_open(&z->gz, level, threads, put_out, z, e);
	else if (c == HU_COMP_ZSTD)
		rc = zstd_setup(z, level, threads, e);
	else if (c == HU_COMP_XZ)
		rc = xz_setup(z, level, threads, e);
	else if (c == HU_COMP_BZIP2)
		rc = bzip2_setup(z, level, e);
	else
		rc = 0;
	if (rc == 0 && c != HU_COMP_NONE)
		rc = stage_start(&z->writer, e);
	if (rc == 0)
		rc = stage_start(&z->pipe, e);
	if (rc == 0) {
		*out = z;
		return 0;
	}
fail:
	hu_zsink_abort(z);
	return -1;
}

static void hex_digest(EVP_MD_CTX *md, char *out, size_t len)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	size_t k;

	EVP_DigestFinal_ex(md, d, &n);
	k = (size_t)snprintf(out, len, "sha256:");
	for (unsigned int i = 0; i < n && k + 3 <= len; i++, k += 2)
		snprintf(out + k, len - k, "%02x", d[i]);
}

int hu_zsink_close(struct hu_zsink *z, struct hu_digests *d,
		   struct hu_error *e)
{
	int rc = 0;

	/* The last chunk; once the pipeline thread is done with it, this
	 * thread ends the compressed stream. */
	rc = hand_over(z, e);
	stage_stop(&z->pipe, false);
	if (rc == 0)
		rc = stage_error(&z->pipe, e);
	if (rc == 0 && z->c == HU_COMP_GZIP)
		rc = hu_pgzip_finish(z->gz, e);
	if (rc == 0 && z->c == HU_COMP_ZSTD)
		rc = put_zstd(z, NULL, 0, ZSTD_e_end, e);
	if (rc == 0 && z->c == HU_COMP_XZ)
		rc = put_xz(z, NULL, 0, LZMA_FINISH, e);
	if (rc == 0 && z->c == HU_COMP_BZIP2)
		rc = put_bzip2(z, NULL, 0, BZ_FINISH, e);
	if (rc == 0)
		rc = flush_out(z, e);
	stage_stop(&z->writer, rc < 0);
	if (rc == 0)
		rc = stage_error(&z->writer, e);
	if (rc == 0 && d) {
		memset(d, 0, sizeof(*d));
		/* both hashed or neither (hu_zsink_open's @digests) */
		if (z->in_md) {
			hex_digest(z->in_md, d->diff_id, sizeof(d->diff_id));
			if (z->c == HU_COMP_NONE)
				memcpy(d->digest, d->diff_id,
				       sizeof(d->digest));
			else
				hex_digest(z->out_md, d->digest,
					   sizeof(d->digest));
		}
		d->size = z->out_bytes;
		d->media_type = media_types[z->c];
	}
	hu_zsink_abort(z);
	return rc;
}

void hu_zsink_abort(struct hu_zsink *z)
{
	if (!z)
		return;
	stage_free(&z->pipe);
	stage_free(&z->writer);
	hu_pgzip_free(z->gz);
	ZSTD_freeCCtx(z->zc);
	if (z->xz_on)
		lzma_end(&z->xz);
	if (z->bz_on)
		BZ2_bzCompressEnd(&z->bz);
	/* libcrypto is loaded only where digests were asked for */
	if (z->in_md)
		EVP_MD_CTX_free(z->in_md);
	if (z->out_md)
		EVP_MD_CTX_free(z->out_md);
	free(z);
}

int hu_compress_parse(const char *s, enum hu_compress *out)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(s, names[i])) {
			*out = (enum hu_compress)i;
			return 0;
		}
	}
	return -1;
}

const char *hu_compress_name(enum hu_compress c)
{
	return names[c];
}

bool hu_compress_oci(enum hu_compress c)
{
	return c == HU_COMP_NONE || c == HU_COMP_GZIP || c == HU_COMP_ZSTD;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n > k && !strcmp(s + n - k, suffix);
}

/* Longer suffixes first (".tar.gz" before ".gz"); -1: a compression
 * hunion does not write, so that the name is not taken for plain. */
static const struct {
	const char *suffix;
	int c;
} suffixes[] = {
	{ ".tar", HU_COMP_NONE },
	{ ".tar.gz", HU_COMP_GZIP }, { ".tgz", HU_COMP_GZIP },
	{ ".gz", HU_COMP_GZIP },
	{ ".tar.zst", HU_COMP_ZSTD }, { ".tar.zstd", HU_COMP_ZSTD },
	{ ".tzst", HU_COMP_ZSTD }, { ".zst", HU_COMP_ZSTD },
	{ ".zstd", HU_COMP_ZSTD },
	{ ".tar.xz", HU_COMP_XZ }, { ".txz", HU_COMP_XZ }, { ".xz", HU_COMP_XZ },
	{ ".tar.bz2", HU_COMP_BZIP2 }, { ".tbz2", HU_COMP_BZIP2 },
	{ ".tbz", HU_COMP_BZIP2 }, { ".bz2", HU_COMP_BZIP2 },
	{ ".lz4", -1 }, { ".tlz4", -1 }, { ".lzma", -1 }, { ".tlz", -1 },
	{ ".lz", -1 }, { ".Z", -1 }, { ".taZ", -1 }, { ".lzo", -1 },
	{ ".tzo", -1 }, { ".br", -1 }, { ".sz", -1 }, { ".lrz", -1 },
	{ ".zip", -1 }, { ".7z", -1 },
};

const char hu_compress_suffixes[] =
	".tar, .tar.gz (.tgz), .tar.zst (.tar.zstd, .tzst), .tar.xz (.txz), "
	".tar.bz2 (.tbz2)";

int hu_compress_for_path(const char *path, enum hu_compress *out)
{
	*out = HU_COMP_NONE;
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		if (!ends_with(path, suffixes[i].suffix))
			continue;
		if (suffixes[i].c < 0)
			return -1;
		*out = (enum hu_compress)suffixes[i].c;
		return 1;
	}
	return 0;
}

int hu_compress_levels(enum hu_compress c, int *min, int *max)
{
	if (c == HU_COMP_GZIP) {
		*min = 1;
		*max = 9;
		return 0;
	}
	if (c == HU_COMP_ZSTD) {
		*min = ZSTD_minCLevel();
		*max = ZSTD_maxCLevel();
		return 0;
	}
	if (c == HU_COMP_XZ || c == HU_COMP_BZIP2) {
		*min = 1;	/* 0 means the default */
		*max = 9;
		return 0;
	}
	return -1;
}

size_t hu_descriptor_json(const struct hu_digests *d, char *buf, size_t len)
{
	int n = snprintf(buf, len, "{\"mediaType\":\"%s\",\"digest\":\"%s\","
			 "\"size\":%llu,\"diffID\":\"%s\"}\n", d->media_type,
			 d->digest, (unsigned long long)d->size, d->diff_id);

	return n < 0 ? 0 : (size_t)n;
}
