/* SPDX-License-Identifier: MIT */
/*
 * A tarball layer's file data, read forward from its decompressed stream
 * (pdata.c), for a layer read from its path index (pindex.h).
 */
#ifndef HUNION_PDATA_H
#define HUNION_PDATA_H

#include <stdint.h>

#include "hunion.h"
#include "tar/pindex.h"

struct hu_pstream;

/* Where a file's bytes go: 0, or -1 with @e set. */
typedef int (*hu_pstream_put)(void *ctx, const void *p, size_t n,
			      struct hu_error *e);

/* Read the tarball @fd (dup'd; from its start), an image's layer @layer
 * when @img, verified as it is read.  @x, its index (or NULL), says where
 * its hard-linked files' bytes lie: those passed without being asked for
 * are kept for a later ask (pdata.c).  Errors have no path: the caller
 * names the layer. */
int hu_pstream_open(struct hu_pstream **ps, int fd,
		    const struct hu_oci_image *img, size_t layer,
		    const struct hu_pindex *x, struct hu_error *e);
/* The @size bytes of the file whose data is @d, to @put: holes of a
 * sparse file as zeros.  Bytes behind the position reached start the
 * stream again (hu_pstream_restarts()). */
int hu_pstream_copy(struct hu_pstream *ps, const struct hu_pdata *d,
		    uint64_t size, hu_pstream_put put, void *ctx,
		    struct hu_error *e);
/* Read the rest: the digests checked, a stream cut short found. */
int hu_pstream_finish(struct hu_pstream *ps, struct hu_error *e);
unsigned hu_pstream_restarts(const struct hu_pstream *ps);
void hu_pstream_free(struct hu_pstream *ps);

/* Are the bytes of @x's regular files in the stream in the order the view
 * walks them (each directory's names sorted, depth first)?  Then a
 * reader in that order reads the stream once. */
bool hu_pindex_in_order(const struct hu_pindex *x);

#endif /* HUNION_PDATA_H */
