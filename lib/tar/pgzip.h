/* SPDX-License-Identifier: MIT */
/*
 * gzip on every core (pgzip.c): one gzip member, deflated in fixed blocks
 * by worker threads, whose bytes depend on the input and the level alone,
 * never on the number of workers, the machine or how the input was cut
 * into calls.  An input of one block (1 MiB) or less gives the bytes of
 * one zlib deflate stream, as a single-threaded gzip writer does.
 */
#ifndef HUNION_PGZIP_H
#define HUNION_PGZIP_H

#include <stddef.h>

#include "hunion.h"

struct hu_pgzip;

/* Where the compressed bytes go, in order, from the thread that calls
 * hu_pgzip_write() or hu_pgzip_finish(). */
typedef int hu_pgzip_out_fn(void *arg, const unsigned char *p, size_t len,
			    struct hu_error *e);

/* Start a member at zlib @level (0: zlib's default, 6) on @threads
 * workers (0: HUNION_GZIP_THREADS when set, for tests, else the online
 * cores; at most 16 either way). */
int hu_pgzip_open(struct hu_pgzip **g, int level, int threads,
		  hu_pgzip_out_fn *out, void *arg, struct hu_error *e);
/* Feed @len bytes.  After a failure every later call fails too. */
int hu_pgzip_write(struct hu_pgzip *g, const unsigned char *p, size_t len,
		   struct hu_error *e);
/* Compress what is left and give out the rest of the member (the last
 * block, the trailer). */
int hu_pgzip_finish(struct hu_pgzip *g, struct hu_error *e);
/* Stop the workers (dropping what they have not done) and free @g. */
void hu_pgzip_free(struct hu_pgzip *g);
/* The workers @g runs on. */
int hu_pgzip_workers(const struct hu_pgzip *g);

#endif
