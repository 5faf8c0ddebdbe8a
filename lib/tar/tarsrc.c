/* SPDX-License-Identifier: MIT */
/*
 * The bytes of a tarball layer, decompressed: plain, gzip or zstd, known
 * by their magic.  libarchive reads only the tar format from here; the
 * decompression is ours so that, once the tar's end-of-archive blocks are
 * read, the rest of the stream can be drained and checked: a gzip member
 * or zstd frame cut short after the last entry is an error too, not only
 * one cut inside an entry.  The tar's own end is checked here too, for
 * every compression: libarchive takes a stream that stops at an entry's
 * boundary for a whole archive, so the reader says where the
 * end-of-archive block must start (tar_src_expect_end) and the bytes
 * passing through tell whether it is there.
 */
#include <archive.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "common/crypto_dl.h"
#include "tar/archive_dl.h"
#include "tar/tarlayer.h"
#include "internal.h"

/* NBUF buffers of output: the one the reader is at, and up to NBUF - 1
 * filled ahead by the producer. */
enum { IN_SIZE = 1 << 17, OUT_SIZE = 1 << 18, NBUF = 4 };

/* Zeros: the end-of-archive block looked for, and the tail synth_tail()
 * gives (at most 511 bytes of padding and two blocks). */
static const unsigned char zeros[1536];

/*
 * Two sides.  The producer reads the file, decompresses it, and counts
 * and hashes the stored bytes; it runs in its own thread (or, when no
 * thread can be started, in the reader's, chunk by chunk), so that the
 * decompression runs beside libarchive's parsing and the writes.  The
 * reader, on the caller's thread, takes its output chunk by chunk, in
 * the same chunks as without a thread: it looks for the end-of-archive
 * block, hashes the decompressed bytes and adds the synthetic tail.
 */
struct tar_src {
	enum tar_comp comp;
	int fd;
	/* The producer's: set up before it starts (tar_src_open,
	 * tar_src_verify), then its own until its last chunk is queued. */
	bool in_eof;
	bool open_unit;		/* inside a gzip member or zstd frame */
	bool done;		/* no more output */
	unsigned char *in;
	size_t in_pos, in_len;
	z_stream z;
	bool z_init;
	ZSTD_DStream *zs;
	EVP_MD_CTX *raw_md;	/* verifying: the stored bytes' sha256 */
	uint64_t raw_size;	/* and count */
	char perr[232];		/* why its last chunk is -1 */
	uint64_t in_read;	/* bytes read from the file */
	struct hu_progress_bytes *count;	/* the run's, or NULL */
	/* The hand-over, under mu: buf[head] and the filled - 1 after it
	 * are chunks (len: their size, 0 at the end, -1 on an error) the
	 * reader has not given back; the producer fills the next. */
	pthread_mutex_t mu;
	pthread_cond_t cv_filled, cv_emptied;
	unsigned char *buf[NBUF];
	ssize_t len[NBUF];
	uint64_t raw_at[NBUF];	/* the stored bytes behind a chunk's end */
	unsigned head, filled;
	bool stop;		/* the reader wants no more */
	/* The reader's. */
	pthread_t thread;
	bool started, threaded, running;
	unsigned holding;	/* 1: buf[head] is the chunk in out */
	const unsigned char *out;	/* the last chunk handed out */
	bool ended;		/* the producer's last chunk was taken */
	ssize_t end_n;		/* and said this: 0, or -1 */
	uint64_t pos;		/* decompressed bytes handed out */
	uint64_t chunk;		/* where the last ones (in out) began */
	uint64_t raw_from, raw_to;	/* the stored bytes behind them */
	uint64_t end_at;	/* where the end-of-archive block must be */
	size_t end_ok;		/* its bytes seen so far, all zero */
	enum { END_PENDING, END_FOUND, END_NOT } end;
	/* An image's layer (tar_src_verify): the decompressed bytes' sha256,
	 * and what the digests and the stored size must be. */
	EVP_MD_CTX *tar_md;
	uint64_t want_size;
	bool synth_done;	/* the real stream ended: its tail given */
	uint64_t real_end;	/* where the real bytes ended */
	size_t synth_left;
	char want_blob[72], want_diff[72];
	char stored_digest[72];	/* the stored bytes' sha256, once taken */
	/* an image's layer: the compression its media type names, which
	 * its bytes must have (umoci refuses a layer where they differ) */
	bool check_comp;
	enum tar_comp want_comp;
	char err[232];
};

const char *tar_comp_name(enum tar_comp c)
{
	return c == TAR_GZIP ? "gzip" : c == TAR_ZSTD ? "zstd" : "tar";
}

const char *tar_comp_label(enum tar_comp c)
{
	return c == TAR_PLAIN ? "uncompressed" : tar_comp_name(c);
}

static enum tar_comp sniff_comp(int fd)
{
	unsigned char b[4];
	ssize_t n = pread(fd, b, sizeof(b), 0);

	if (n == 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f &&
	    b[3] == 0xfd)
		return TAR_ZSTD;
	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return TAR_GZIP;
	return TAR_PLAIN;
}

enum tar_comp tar_comp_sniff(int fd)
{
	return sniff_comp(fd);
}

struct tar_src *tar_src_open(int fd)
{
	struct tar_src *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv_filled, NULL);
	pthread_cond_init(&s->cv_emptied, NULL);
	s->fd = fd;
	s->comp = sniff_comp(fd);
	s->in = malloc(IN_SIZE);
	if (!s->in)
		goto fail;
	for (int i = 0; i < NBUF; i++)
		if (!(s->buf[i] = malloc(OUT_SIZE)))
			goto fail;
	s->out = s->buf[0];
	if (s->comp == TAR_GZIP) {
		if (inflateInit2(&s->z, 15 + 16) != Z_OK)
			goto fail;
		s->z_init = true;
	} else if (s->comp == TAR_ZSTD) {
		s->zs = ZSTD_createDStream();
		if (!s->zs || ZSTD_isError(ZSTD_initDStream(s->zs)))
			goto fail;
	}
	if (lseek(fd, 0, SEEK_SET) < 0 && errno != ESPIPE)
		goto fail;
	return s;
fail:
	tar_src_free(s);
	return NULL;
}

/* Tell the producer to stop (it may be waiting for a free buffer) and
 * wait for it: after this, everything is the reader's. */
static void stop_producer(struct tar_src *s)
{
	if (!s->running)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_signal(&s->cv_emptied);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	s->running = false;
}

void tar_src_free(struct tar_src *s)
{
	if (!s)
		return;
	stop_producer(s);
	if (s->z_init)
		inflateEnd(&s->z);
	ZSTD_freeDStream(s->zs);
	if (s->raw_md)		/* only a verified layer loads libcrypto */
		EVP_MD_CTX_free(s->raw_md);
	if (s->tar_md)
		EVP_MD_CTX_free(s->tar_md);
	free(s->in);
	for (int i = 0; i < NBUF; i++)
		free(s->buf[i]);
	pthread_cond_destroy(&s->cv_emptied);
	pthread_cond_destroy(&s->cv_filled);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

enum tar_comp tar_src_comp(const struct tar_src *s)
{
	return s->comp;
}

/* Of the stored bytes, how many are behind the decompressed position
 * @pos: those behind the chunk @pos is in, and of those behind the chunk
 * its share.  Only the chunk last handed out is known: a @pos before it
 * (libarchive keeps a copy of a header cut between two chunks) counts
 * as its start, never more than the consumer took. */
uint64_t tar_src_bytes_done(const struct tar_src *s, uint64_t pos)
{
	double share;

	if (pos <= s->chunk || s->pos <= s->chunk)
		return s->raw_from;
	if (pos >= s->pos)
		return s->raw_to;
	share = (double)(pos - s->chunk) / (double)(s->pos - s->chunk);
	return s->raw_from + (uint64_t)(share * (double)(s->raw_to -
							  s->raw_from));
}

void tar_src_count_into(struct tar_src *s, struct hu_progress_bytes *b)
{
	s->count = b;
}

const char *tar_src_error(const struct tar_src *s)
{
	return s->err;
}

/* ---- the producer: the file's bytes, decompressed ---- */

/* @n stored bytes read into @p: counted and hashed when verifying. */
static void raw_took(struct tar_src *s, const void *p, size_t n)
{
	s->in_read += n;
	/* the run's count beside this tarball's (its percent): one add
	 * more per chunk read, no thread more */
	hu_progress_bytes_add(s->count, n, 0);
	if (!s->raw_md || n == 0)
		return;
	s->raw_size += n;
	(void)EVP_DigestUpdate(s->raw_md, p, n);
}

/* Why a read failed: "interrupted" when a signal asked the run to stop
 * (the call is not tried again then), else errno's text. */
static const char *read_failure(void)
{
	return errno == EINTR && hu_interrupted() ? "interrupted" :
						    strerror(errno);
}

/* Refill the input buffer once it is used up.  -1 on a read error. */
static int refill(struct tar_src *s)
{
	ssize_t n;

	if (s->in_pos < s->in_len || s->in_eof)
		return 0;
	do
		n = read(s->fd, s->in, IN_SIZE);
	while (n < 0 && hu_eintr_retry());
	if (n < 0) {
		snprintf(s->perr, sizeof(s->perr), "cannot read: %s",
			 read_failure());
		return -1;
	}
	raw_took(s, s->in, (size_t)n);
	s->in_pos = 0;
	s->in_len = (size_t)n;
	s->in_eof = n == 0;
	return 0;
}

static ssize_t truncated(struct tar_src *s)
{
	snprintf(s->perr, sizeof(s->perr), "truncated %s data",
		 tar_comp_name(s->comp));
	return -1;
}

/* At least @n bytes from in_pos on, unless the input ends first. */
static int peek(struct tar_src *s, size_t n)
{
	while (s->in_len - s->in_pos < n && !s->in_eof) {
		ssize_t r;

		memmove(s->in, s->in + s->in_pos, s->in_len - s->in_pos);
		s->in_len -= s->in_pos;
		s->in_pos = 0;
		do
			r = read(s->fd, s->in + s->in_len, IN_SIZE - s->in_len);
		while (r < 0 && hu_eintr_retry());
		if (r < 0) {
			snprintf(s->perr, sizeof(s->perr), "cannot read: %s",
				 read_failure());
			return -1;
		}
		raw_took(s, s->in + s->in_len, (size_t)r);
		s->in_len += (size_t)r;
		s->in_eof = r == 0;
	}
	return 0;
}

static bool unit_magic(enum tar_comp c, const unsigned char *b, size_t n)
{
	if (c == TAR_GZIP)
		return n >= 2 && b[0] == 0x1f && b[1] == 0x8b;
	/* A zstd frame, or a skippable one (magic 0x184D2A5?). */
	return n >= 4 && ((b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f &&
			   b[3] == 0xfd) ||
			  ((b[0] & 0xf0) == 0x50 && b[1] == 0x2a &&
			   b[2] == 0x4d && b[3] == 0x18));
}

/*
 * Between gzip members or zstd frames, one rule for both: the stream
 * ends, or another member or frame begins; zero bytes in between are
 * padding (gzip(1) and Python's gzip skip them), anything else is
 * refused (zstd(1), Go's and Python's readers refuse it, gzip(1) warns
 * and exits 2).  1 at the end, 0 at a member or frame, -1 otherwise.
 */
static int next_unit(struct tar_src *s)
{
	for (;;) {
		if (refill(s) < 0)
			return -1;
		if (s->in_pos == s->in_len)
			return 1;
		while (s->in_pos < s->in_len && !s->in[s->in_pos])
			s->in_pos++;
		if (s->in_pos < s->in_len)
			break;
	}
	if (peek(s, 4) < 0)
		return -1;
	if (unit_magic(s->comp, s->in + s->in_pos, s->in_len - s->in_pos))
		return 0;
	snprintf(s->perr, sizeof(s->perr), "data after the end of the %s "
		 "stream", tar_comp_name(s->comp));
	return -1;
}

static ssize_t read_gzip(struct tar_src *s, unsigned char *out)
{
	s->z.next_out = out;
	s->z.avail_out = OUT_SIZE;
	while (s->z.avail_out == OUT_SIZE) {
		int r;

		if (!s->open_unit) {
			r = next_unit(s);
			if (r < 0)
				return -1;
			if (r > 0) {
				s->done = true;
				break;
			}
			s->open_unit = true;
		}
		if (refill(s) < 0)
			return -1;
		if (s->in_pos == s->in_len)
			return truncated(s);
		s->z.next_in = s->in + s->in_pos;
		s->z.avail_in = (uInt)(s->in_len - s->in_pos);
		r = inflate(&s->z, Z_NO_FLUSH);
		s->in_pos = s->in_len - s->z.avail_in;
		if (r == Z_STREAM_END) {
			s->open_unit = false;
			if (inflateReset(&s->z) != Z_OK)
				r = Z_STREAM_ERROR;
			else
				continue;
		}
		if (r != Z_OK && r != Z_BUF_ERROR) {
			snprintf(s->perr, sizeof(s->perr), "corrupt gzip data: %s",
				 s->z.msg ? s->z.msg : "inflate failed");
			return -1;
		}
	}
	return (ssize_t)(OUT_SIZE - s->z.avail_out);
}

static ssize_t read_zstd(struct tar_src *s, unsigned char *buf)
{
	ZSTD_outBuffer out = { buf, OUT_SIZE, 0 };

	while (out.pos == 0) {
		ZSTD_inBuffer in;
		size_t r;

		if (!s->open_unit) {
			int u = next_unit(s);

			if (u < 0)
				return -1;
			if (u > 0) {
				s->done = true;
				break;
			}
		}
		if (refill(s) < 0)
			return -1;
		in = (ZSTD_inBuffer){ s->in, s->in_len, s->in_pos };
		r = ZSTD_decompressStream(s->zs, &out, &in);
		s->in_pos = in.pos;
		if (ZSTD_isError(r)) {
			snprintf(s->perr, sizeof(s->perr), "corrupt zstd data: %s",
				 ZSTD_getErrorName(r));
			return -1;
		}
		s->open_unit = r != 0;
		/* Input all used, no output, more wanted: the end came
		 * inside a frame. */
		if (s->in_eof && s->in_pos == s->in_len && out.pos == 0 &&
		    s->open_unit)
			return truncated(s);
	}
	return (ssize_t)out.pos;
}

static ssize_t read_plain(struct tar_src *s, unsigned char *out)
{
	ssize_t n;

	do
		n = read(s->fd, out, OUT_SIZE);
	while (n < 0 && hu_eintr_retry());
	if (n < 0)
		snprintf(s->perr, sizeof(s->perr), "cannot read: %s",
			 read_failure());
	if (n > 0)
		raw_took(s, out, (size_t)n);
	s->done = n == 0;
	return n;
}

/* The next chunk into buf[@i]: its size, 0 at the end, -1 with perr
 * set; raw_at[@i], the stored bytes the decompressor has used so far
 * (not those read ahead into in). */
static ssize_t produce(struct tar_src *s, unsigned i)
{
	ssize_t n = 0;

	if (s->check_comp && s->comp != s->want_comp) {
		snprintf(s->perr, sizeof(s->perr), "its media type says %s, "
			 "its bytes are %s", tar_comp_label(s->want_comp),
			 tar_comp_label(s->comp));
		return -1;
	}
	if (!s->done)
		n = s->comp == TAR_GZIP ? read_gzip(s, s->buf[i]) :
		    s->comp == TAR_ZSTD ? read_zstd(s, s->buf[i]) :
		    read_plain(s, s->buf[i]);
	s->raw_at[i] = s->in_read - (s->in_len - s->in_pos);
	return n;
}

static void *producer(void *arg)
{
	struct tar_src *s = arg;
	ssize_t n;

	do {
		unsigned i;

		pthread_mutex_lock(&s->mu);
		while (s->filled == NBUF && !s->stop)
			pthread_cond_wait(&s->cv_emptied, &s->mu);
		if (s->stop) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		i = (s->head + s->filled) % NBUF;
		pthread_mutex_unlock(&s->mu);
		/* buf[i] is neither queued nor the reader's */
		n = produce(s, i);
		pthread_mutex_lock(&s->mu);
		s->len[i] = n;
		s->filled++;
		pthread_cond_signal(&s->cv_filled);
		pthread_mutex_unlock(&s->mu);
	} while (n > 0);
	return NULL;
}

/* ---- the reader ---- */

/*
 * The next chunk of the producer's, in s->out: its size, 0 at the end,
 * -1 with s->err set.  The reader keeps its last chunk with data until
 * it takes the next one with data, so tar_src_expect_end can look at it
 * again even after the end.  Without a thread (none could be started)
 * the reader produces each chunk itself, the same chunks.
 */
static ssize_t next_chunk(struct tar_src *s)
{
	unsigned i;
	ssize_t n;

	if (s->ended)
		return s->end_n;
	if (!s->started) {
		s->started = true;
		s->threaded = s->running =
			pthread_create(&s->thread, NULL, producer, s) == 0;
	}
	if (s->threaded) {
		pthread_mutex_lock(&s->mu);
		while (s->filled == s->holding)
			pthread_cond_wait(&s->cv_filled, &s->mu);
		i = (s->head + s->holding) % NBUF;
		n = s->len[i];
		if (n > 0 && s->holding) {
			s->filled--;	/* the last chunk back */
			pthread_cond_signal(&s->cv_emptied);
		}
		if (n > 0)
			s->head = i;
		pthread_mutex_unlock(&s->mu);
	} else {
		i = (s->head + s->holding) % NBUF;
		n = produce(s, i);
		if (n > 0)
			s->head = i;
	}
	if (n > 0) {
		s->holding = 1;
		s->out = s->buf[i];
		s->raw_from = s->raw_to;
		s->raw_to = s->raw_at[i];
		return n;
	}
	/* The producer's last chunk: it is done, and its error, count and
	 * digest are the reader's once it is joined. */
	stop_producer(s);
	s->ended = true;
	s->end_n = n;
	if (n < 0)
		memcpy(s->err, s->perr, sizeof(s->err));
	return n;
}

/* Look for the end-of-archive block in the @n bytes of out, which begin
 * at offset s->chunk of the stream. */
static void look_for_end(struct tar_src *s, size_t n)
{
	uint64_t from = s->end_at + s->end_ok, to = s->end_at + 512;

	if (s->end != END_PENDING || from >= s->chunk + n)
		return;
	if (from < s->chunk) {
		/* Handed out before the last read: the reader asks as soon
		 * as it has taken in its last entry, so this cannot be. */
		s->end = END_FOUND;
		return;
	}
	if (to > s->chunk + n)
		to = s->chunk + n;
	if (memcmp(s->out + (from - s->chunk), zeros, to - from) != 0) {
		s->end = END_NOT;
		return;
	}
	s->end_ok += to - from;
	if (s->end_ok == 512)
		s->end = END_FOUND;
}

/*
 * umoci 0.4.7 (Debian's) writes layer tarballs that stop after the last
 * entry's data: no padding, no end-of-archive blocks; Go's reader takes
 * them.  A verified image layer is the image author's bytes, not a cut
 * download (its size and digests say so), so its stream is given that
 * tail as zeros, which no digest counts; an entry whose data reaches
 * into them is still refused (tar_src_real_end).  The zeros are our
 * own, not a buffer of the producer's.
 */
static ssize_t synth_tail(struct tar_src *s)
{
	size_t n;

	if (!s->synth_done) {
		s->synth_done = true;
		s->real_end = s->pos;
		s->synth_left = (512 - s->pos % 512) % 512 + 1024;
	}
	n = s->synth_left < sizeof(zeros) ? s->synth_left : sizeof(zeros);
	s->out = zeros;
	s->raw_from = s->raw_to;	/* no stored bytes behind them */
	s->synth_left -= n;
	return (ssize_t)n;
}

ssize_t tar_src_read(struct tar_src *s, const void **buf)
{
	bool synth = false;
	ssize_t n = next_chunk(s);

	if (n == 0 && s->tar_md && (!s->synth_done || s->synth_left)) {
		n = synth_tail(s);
		synth = true;
	}
	*buf = s->out;
	if (n > 0) {
		s->chunk = s->pos;
		s->pos += (uint64_t)n;
		look_for_end(s, (size_t)n);
		if (s->tar_md && !synth)
			(void)EVP_DigestUpdate(s->tar_md, s->out, (size_t)n);
	}
	return n;
}

uint64_t tar_src_real_end(const struct tar_src *s)
{
	return s->synth_done ? s->real_end : UINT64_MAX;
}

void tar_src_expect_end(struct tar_src *s, uint64_t at)
{
	s->end_at = at;
	s->end_ok = 0;
	s->end = END_PENDING;
	if (s->pos > s->chunk)
		look_for_end(s, (size_t)(s->pos - s->chunk));
}

bool tar_src_end_found(const struct tar_src *s)
{
	return s->end == END_FOUND;
}

int tar_src_drain(struct tar_src *s)
{
	const void *buf;
	ssize_t n;

	/* a plain tar's bytes after its end matter only to a digest */
	if (s->comp == TAR_PLAIN && !s->tar_md && !s->raw_md)
		return 0;
	while ((n = tar_src_read(s, &buf)) > 0)
		;
	return n < 0 ? -1 : 0;
}

int tar_src_verify(struct tar_src *s, const char *blob, uint64_t size,
		   const char *diff_id, enum tar_comp comp)
{
	s->check_comp = true;
	s->want_comp = comp;
	s->raw_md = EVP_MD_CTX_new();
	s->tar_md = EVP_MD_CTX_new();
	if (!s->raw_md || !s->tar_md ||
	    !EVP_DigestInit_ex(s->raw_md, EVP_sha256(), NULL) ||
	    !EVP_DigestInit_ex(s->tar_md, EVP_sha256(), NULL))
		return -1;
	snprintf(s->want_blob, sizeof(s->want_blob), "%s", blob);
	snprintf(s->want_diff, sizeof(s->want_diff), "%s", diff_id);
	s->want_size = size;
	/* from the start: nothing was read yet (tar_src_open seeks to 0),
	 * and the producer starts at the first read */
	return 0;
}

static void digest_text(EVP_MD_CTX *md, char out[72])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	EVP_DigestFinal_ex(md, d, &n);
	memcpy(out, "sha256:", 8);
	for (unsigned int i = 0; i < n && i < 32; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
}

int tar_src_hash_stored(struct tar_src *s)
{
	s->raw_md = EVP_MD_CTX_new();
	if (!s->raw_md || !EVP_DigestInit_ex(s->raw_md, EVP_sha256(), NULL))
		return -1;
	return 0;
}

int tar_src_stored_digest(struct tar_src *s, char out[72])
{
	if (s->stored_digest[0]) {
		memcpy(out, s->stored_digest, sizeof(s->stored_digest));
		return 0;
	}
	if (!s->raw_md)
		return -1;
	digest_text(s->raw_md, s->stored_digest);
	memcpy(out, s->stored_digest, sizeof(s->stored_digest));
	return 0;
}

uint64_t tar_src_pos(const struct tar_src *s)
{
	return s->pos;
}

int tar_src_verify_end(struct tar_src *s)
{
	char got[72];

	if (!s->tar_md)
		return 0;
	/* read to the end: the producer is joined, its count and digest
	 * are ours to read */
	if (tar_src_drain(s) < 0)
		return -1;
	if (s->raw_size != s->want_size) {
		snprintf(s->err, sizeof(s->err), "%llu bytes read, its "
			 "descriptor says %llu",
			 (unsigned long long)s->raw_size,
			 (unsigned long long)s->want_size);
		return -1;
	}
	digest_text(s->raw_md, got);
	memcpy(s->stored_digest, got, sizeof(got));
	if (strcmp(got, s->want_blob) != 0) {
		snprintf(s->err, sizeof(s->err), "its content has digest "
			 "%.71s", got);
		return -1;
	}
	digest_text(s->tar_md, got);
	if (strcmp(got, s->want_diff) != 0) {
		snprintf(s->err, sizeof(s->err), "uncompressed: "
			 "%.71s, the config's diff_id %.71s", got,
			 s->want_diff);
		return -1;
	}
	return 0;
}

/* ---- libarchive reading the tar format from here ---- */

static la_ssize_t src_read(struct archive *a, void *ctx, const void **buf)
{
	struct tar_src *src = ctx;
	ssize_t n = tar_src_read(src, buf);

	if (n < 0)
		archive_set_error(a, 0, "%s", tar_src_error(src));
	return n;
}

int tar_src_archive_open(struct tar_src *s, struct archive *a)
{
	int r;

	/* Decompression is ours; libarchive reads the tar format. */
	if ((r = archive_read_support_filter_none(a)) != ARCHIVE_OK ||
	    (r = archive_read_support_format_tar(a)) != ARCHIVE_OK)
		return r;
	r = archive_read_open(a, s, NULL, src_read, NULL);
	if (r == ARCHIVE_OK)
		tar_src_expect_end(s, 0);	/* an empty archive */
	return r;
}

int tar_src_entry_skip(struct tar_src *s, struct archive *a)
{
	int r = archive_read_data_skip(a);

	if (r >= ARCHIVE_WARN)
		tar_src_expect_end(s, (uint64_t)archive_filter_bytes(a, 0));
	return r;
}

int tar_src_archive_end(struct tar_src *s, struct archive *a)
{
	/* The rest of the stream must be whole too. */
	if (tar_src_drain(s) < 0) {
		archive_set_error(a, 0, "%s", tar_src_error(s));
		return -1;
	}
	if (tar_src_end_found(s))
		return 0;
	archive_set_error(a, 0, "no end-of-archive block");
	return -1;
}
