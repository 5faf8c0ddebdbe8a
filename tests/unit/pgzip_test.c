/* SPDX-License-Identifier: MIT */
/* gzip on every core (pgzip.c, through the byte pipeline of compress.c):
 * the same bytes whatever the number of workers and however the input is
 * cut into calls; up to one block, the bytes of one zlib deflate stream;
 * one gzip member that zlib, gzip and python read back to the input. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "tar/compress.h"
#include "tar/pgzip.h"
#include "testutil.h"

#define BLOCK ((size_t)1 << 20)	/* pgzip.c's */

static void teardown(void)
{
	unsetenv("HUNION_GZIP_THREADS");
	tu_cleanup();
}

TestSuite(pgzip, .fini = teardown);

/* ---- helpers ------------------------------------------------------------ */

/* @len bytes: text of few words (compressible), or xorshift noise. */
static unsigned char *input(size_t len, bool noise)
{
	static const char *const words[] = { "usr", "lib", "share", "bin",
					     "etc", "hunion", "layer", "tar" };
	unsigned char *b = malloc(len ? len : 1);
	uint64_t x = 88172645463325252u;

	cr_assert_not_null(b);
	for (size_t i = 0; i < len;) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (noise) {
			b[i++] = (unsigned char)(x >> 24);
			continue;
		}
		for (const char *w = words[x % 8]; *w && i < len; w++)
			b[i++] = (unsigned char)*w;
		if (i < len)
			b[i++] = x & 0x100 ? '/' : '\n';
	}
	return b;
}

static unsigned char *slurp(const char *rel, size_t *len)
{
	int fd = open(tu_path(rel), O_RDONLY);
	struct stat st;
	unsigned char *b;

	cr_assert(fd >= 0 && fstat(fd, &st) == 0);
	b = malloc(st.st_size + 1);
	cr_assert_not_null(b);
	cr_assert_eq(read(fd, b, st.st_size), st.st_size);
	close(fd);
	*len = st.st_size;
	return b;
}

/* Feed @in to a gzip pipeline on @threads workers into file @rel: in one
 * write, or (@pieces) in pieces of odd sizes, every other one placed
 * through hu_zsink_reserve().  Returns the file's bytes. */
static unsigned char *gzip_to(const char *rel, const unsigned char *in,
			      size_t len, int level, int threads, bool pieces,
			      struct hu_digests *d, size_t *outlen)
{
	static const size_t sizes[] = { 1, 4093, 65543, BLOCK, 3, 777777 };
	struct hu_error e = { 0 };
	struct hu_zsink *z;
	int fd = open(tu_path(rel), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	size_t off = 0;

	cr_assert(fd >= 0);
	cr_assert_eq(hu_zsink_open(&z, fd, HU_COMP_GZIP, level, threads, true,
				   NULL, &e), 0, "%s", e.msg);
	for (size_t k = 0; off < len; k++) {
		size_t n = pieces ? sizes[k % 6] : len - off;
		void *p;
		size_t room;

		if (n > len - off)
			n = len - off;
		if (pieces && k % 2) {
			cr_assert_eq(hu_zsink_reserve(z, 1, &p, &room, &e), 0);
			if (n > room)
				n = room;
			memcpy(p, in + off, n);
			cr_assert_eq(hu_zsink_write(z, p, n, &e), 0);
		} else {
			cr_assert_eq(hu_zsink_write(z, in + off, n, &e), 0);
		}
		off += n;
	}
	cr_assert_eq(hu_zsink_close(z, d, &e), 0, "%s", e.msg);
	close(fd);
	return slurp(rel, outlen);
}

/* zlib reads @gz back to @in, as one member with nothing after it. */
static void inflates_to(const unsigned char *gz, size_t gzlen,
			const unsigned char *in, size_t len)
{
	unsigned char *out = malloc(len + 1);
	z_stream z = { 0 };

	cr_assert_not_null(out);
	cr_assert_eq(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (unsigned char *)gz;
	z.avail_in = (uInt)gzlen;
	z.next_out = out;
	z.avail_out = (uInt)len + 1;
	cr_assert_eq(inflate(&z, Z_FINISH), Z_STREAM_END);
	cr_assert_eq(z.avail_in, 0, "one member, nothing after it");
	cr_assert_eq(z.total_out, len);
	cr_assert(len == 0 || memcmp(out, in, len) == 0);
	inflateEnd(&z);
	free(out);
}

/* The single-threaded writer's bytes: one deflate stream in a gzip
 * wrapper whose header names nothing, OS 255. */
static unsigned char *one_stream(const unsigned char *in, size_t len,
				 int level, size_t *outlen)
{
	gz_header h = { .os = 255 };
	z_stream z = { 0 };
	size_t cap = compressBound(len) + 64;
	unsigned char *out = malloc(cap);

	cr_assert_not_null(out);
	cr_assert_eq(deflateInit2(&z, level ? level : Z_DEFAULT_COMPRESSION,
				  Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY),
		     Z_OK);
	cr_assert_eq(deflateSetHeader(&z, &h), Z_OK);
	z.next_in = (unsigned char *)in;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
	*outlen = z.total_out;
	deflateEnd(&z);
	return out;
}

static void write_file(const char *rel, const unsigned char *b, size_t len)
{
	int fd = open(tu_path(rel), O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, b, len), (ssize_t)len);
	close(fd);
}

/* ---- the same bytes ------------------------------------------------------ */

/* Equal bytes from 1, 2 and 7 workers, in one write or in odd pieces;
 * the digests are the files'; zlib reads them back. */
static void same_bytes_for(size_t len, bool noise)
{
	unsigned char *in = input(len, noise), *ref, *got;
	struct hu_digests d1, d;
	size_t reflen, gotlen;
	const struct {
		int threads;
		bool pieces;
	} runs[] = { { 2, false }, { 2, true }, { 7, false }, { 7, true },
		     { 1, true } };

	ref = gzip_to("ref.gz", in, len, 0, 1, false, &d1, &reflen);
	inflates_to(ref, reflen, in, len);
	cr_assert_eq(d1.size, reflen);
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		got = gzip_to("got.gz", in, len, 0, runs[i].threads,
			      runs[i].pieces, &d, &gotlen);
		cr_assert_eq(gotlen, reflen, "%zu bytes, %d workers%s", len,
			     runs[i].threads, runs[i].pieces ? ", pieces" :
			     "");
		cr_assert_eq(memcmp(got, ref, reflen), 0, "%zu bytes, %d "
			     "workers%s", len, runs[i].threads,
			     runs[i].pieces ? ", pieces" : "");
		cr_assert_str_eq(d.digest, d1.digest);
		cr_assert_str_eq(d.diff_id, d1.diff_id);
		free(got);
	}
	free(ref);
	free(in);
}

Test(pgzip, empty_input_same_bytes_for_any_workers)
{
	same_bytes_for(0, false);
}

Test(pgzip, one_byte_same_bytes_for_any_workers)
{
	same_bytes_for(1, false);
}

Test(pgzip, exactly_one_block_same_bytes_for_any_workers)
{
	same_bytes_for(BLOCK, false);
}

Test(pgzip, one_block_and_a_byte_same_bytes_for_any_workers)
{
	same_bytes_for(BLOCK + 1, false);
}

Test(pgzip, many_blocks_of_text_same_bytes_for_any_workers)
{
	same_bytes_for(5 * BLOCK + 12345, false);
}

Test(pgzip, many_blocks_of_noise_same_bytes_for_any_workers)
{
	same_bytes_for(3 * BLOCK + 777, true);
}

/* ---- one block is one zlib stream ------------------------------------- */

/* Up to one block, at any level, the bytes are those of one deflate
 * stream, as the single-threaded writer made: small outputs (and the
 * digests the tests print of them) do not change. */
Test(pgzip, up_to_one_block_is_the_single_stream)
{
	const size_t lens[] = { 0, 1, 100000, BLOCK };
	const int levels[] = { 0, 1, 9 };

	for (size_t i = 0; i < 4; i++) {
		unsigned char *in = input(lens[i], false);

		for (size_t k = 0; k < 3; k++) {
			struct hu_digests d;
			size_t wantlen, gotlen;
			unsigned char *want = one_stream(in, lens[i],
							 levels[k], &wantlen);
			unsigned char *got = gzip_to("o.gz", in, lens[i],
						     levels[k], 2, true, &d,
						     &gotlen);

			cr_assert_eq(gotlen, wantlen, "%zu bytes, level %d",
				     lens[i], levels[k]);
			cr_assert_eq(memcmp(got, want, wantlen), 0,
				     "%zu bytes, level %d", lens[i],
				     levels[k]);
			free(got);
			free(want);
		}
		free(in);
	}
}

/* Past one block, the dictionary keeps matches across the cuts: a cut
 * costs a few bytes (an early end of a Huffman block, the sync marker),
 * not the window a fresh stream would start without.  The input repeats
 * 20000 bytes of noise: every block but the first is one long match when
 * it may reach back into the previous block, 20000 bytes of literals at
 * its start when it may not. */
Test(pgzip, the_cuts_cost_little)
{
	size_t len = 6 * BLOCK, wantlen, gotlen;
	unsigned char *in = input(len, true);
	struct hu_digests d;
	unsigned char *want, *got;

	for (size_t i = 20000; i < len; i++)
		in[i] = in[i - 20000];
	want = one_stream(in, len, 0, &wantlen);
	got = gzip_to("o.gz", in, len, 0, 2, false, &d, &gotlen);
	cr_assert_lt(gotlen, wantlen + 5 * 64, "%zu against %zu", gotlen,
		     wantlen);
	inflates_to(got, gotlen, in, len);
	free(got);
	free(want);
	free(in);
}

/* ---- readers ------------------------------------------------------------ */

/* gzip and python's gzip module read a many-block member to the input;
 * gzip -l sees one member of the input's size. */
Test(pgzip, gzip_and_python_read_it_back)
{
	size_t len = 3 * BLOCK + 4321, gzlen;
	unsigned char *in = input(len, false);
	struct hu_digests d;
	unsigned char *gz = gzip_to("o.gz", in, len, 0, 2, true, &d, &gzlen);
	char cmd[8192];
	const char *dir = tu_path("");

	write_file("in", in, len);
	snprintf(cmd, sizeof(cmd), "cd '%s' && gzip -t o.gz && "
		 "gzip -dc o.gz | cmp -s - in", dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd), "cd '%s' && python3 -c 'import gzip, sys; "
		 "sys.exit(gzip.open(\"o.gz\").read() != "
		 "open(\"in\", \"rb\").read())'", dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	free(gz);
	free(in);
}

/* ---- the number of workers --------------------------------------------- */

static int discard(void *arg, const unsigned char *p, size_t len,
		   struct hu_error *e)
{
	return 0;
}

static int workers(int threads)
{
	struct hu_error e = { 0 };
	struct hu_pgzip *g;
	int n;

	cr_assert_eq(hu_pgzip_open(&g, 0, threads, discard, NULL, &e), 0);
	n = hu_pgzip_workers(g);
	hu_pgzip_free(g);
	return n;
}

Test(pgzip, workers_as_asked_env_for_tests_at_most_16)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	cr_assert_eq(workers(7), 7);
	cr_assert_eq(workers(1000), 16);
	cr_assert_eq(workers(0), cores > 16 ? 16 : cores);
	setenv("HUNION_GZIP_THREADS", "3", 1);
	cr_assert_eq(workers(0), 3);
	cr_assert_eq(workers(2), 2, "an explicit count wins");
	setenv("HUNION_GZIP_THREADS", "0", 1);
	cr_assert_eq(workers(0), cores > 16 ? 16 : cores);
}
