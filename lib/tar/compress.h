/* SPDX-License-Identifier: MIT */
/*
 * The byte pipeline under the tar writer: sha256 of what comes in (the
 * uncompressed tar: the OCI DiffID), then none, gzip (zlib, on every
 * core: pgzip.c), zstd (libzstd, multi-threaded), xz or bzip2, then
 * sha256 and a count of what goes out, written to a file descriptor in
 * large, complete writes through the write wrapper.
 */
#ifndef HUNION_COMPRESS_H
#define HUNION_COMPRESS_H

#include <stddef.h>

#include "hunion.h"

struct hu_zsink;

/* Start a pipeline into @fd (which stays the caller's).  @level 0: the
 * compressor's default; @threads: the workers of gzip, zstd or xz, 0 for
 * every online core (gzip: HUNION_GZIP_THREADS when set, for tests; at
 * most 16); @digests: the sha256 of the input and of the output, for
 * hu_zsink_close() (without them its digests are empty).  The bytes
 * written to @fd are counted into @bytes->written as they go (NULL: not
 * counted). */
int hu_zsink_open(struct hu_zsink **z, int fd, enum hu_compress c, int level,
		  int threads, bool digests, struct hu_progress_bytes *bytes,
		  struct hu_error *e);
/* Feed @len bytes.  After a failure every later call fails too. */
int hu_zsink_write(struct hu_zsink *z, const void *buf, size_t len,
		   struct hu_error *e);
/* Room to fill in place, to save a copy: *@p points at *@room >= @min
 * free bytes (@min <= 1 MiB) of the chunk being filled.  A following
 * hu_zsink_write() of bytes placed there, from *@p on, takes them as
 * they lie. */
int hu_zsink_reserve(struct hu_zsink *z, size_t min, void **p, size_t *room,
		     struct hu_error *e);
/* End the compressed stream, write what is left, fill @d.  Frees @z
 * either way. */
int hu_zsink_close(struct hu_zsink *z, struct hu_digests *d,
		   struct hu_error *e);
/* Drop the pipeline without finishing it.  Frees @z. */
void hu_zsink_abort(struct hu_zsink *z);

#endif
