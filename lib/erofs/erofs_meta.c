/* SPDX-License-Identifier: MIT */
/*
 * Where the EROFS writer puts bytes.  Data goes to the end of the image
 * as it comes; metadata (inodes, xattrs, inline tails, block maps, shared
 * xattrs) goes to a region of whole blocks reserved at the end of the
 * image when needed and held in memory until a record no longer fits, so
 * each metadata block is written once, with its neighbours when no data
 * came between them.  What must change after a region was written (a
 * ".." nid, a link count, the root inode) is patched in place.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "erofs/erofs_fs.h"

#define REGION_MAX	(1u << 20)	/* a region grows up to this while
					 * nothing is written after it */
#define REGION_MIN	(64u << 10)	/* a new one is reserved this large,
					 * so that the data of the files
					 * whose inodes fill it comes after
					 * it: one write for many inodes */

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

int hu_erofs_write(struct hu_erofs *w, const void *buf, size_t len,
		uint64_t off, struct hu_error *e)
{
	const char *p = buf;

	if (w->hash) {
		/* The offset too: where bytes go is part of the image. */
		uint64_t o = off;

		if (XXH3_128bits_update(w->hash, &o, sizeof(o)) != XXH_OK ||
		    XXH3_128bits_update(w->hash, buf, len) != XXH_OK)
			return hu_error_set(e, 0, NULL, "hashing failed");
	}
	if (hu_erofs_pwrite_all(w->fd, p, len, off) < 0) {
		w->failed = true;
		return hu_error_set(e, errno, NULL,
				    "cannot write the EROFS image");
	}
	return 0;
}

int hu_erofs_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = hu_wr_pwrite(fd, p, len, (off_t)off);

		if (n < 0 && hu_eintr_retry())
			continue;
		if (n <= 0)
			return n < 0 ? -1 : (errno = EIO, -1);
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

uint8_t *hu_erofs_at(struct hu_erofs *w, uint64_t pos)
{
	return w->rbuf + (pos - w->rpos);
}

int hu_erofs_patch(struct hu_erofs *w, uint64_t off, const void *buf,
		size_t len, struct hu_error *e)
{
	if (off >= w->rpos && off + len <= w->rpos + w->rcap) {
		memcpy(hu_erofs_at(w, off), buf, len);
		return 0;
	}
	return hu_erofs_write(w, buf, len, off, e);
}

int hu_erofs_flush(struct hu_erofs *w, struct hu_error *e)
{
	if (!w->rcap)
		return 0;
	/* The last region, the end of the image: no unused blocks kept. */
	if (w->end == w->rpos + w->rcap && w->rpos + w->rused < w->end) {
		w->rcap = align_up(w->rused, w->blksz);
		w->end = w->rpos + w->rcap;
	}
	return hu_erofs_write(w, w->rbuf, w->rcap, w->rpos, e);
}

/* What lies this far behind the end of the image is written, or nearly
 * (the gathered blocks, a worker's copy in flight): its writeback is
 * started, and a window before it waited for and dropped from the page
 * cache (hu_writebehind, outfile.c, as a tarball's).  A 2 GB image left
 * dirty in the cache throttles the writers and pushes the layers' pages
 * out.  A page dropped and patched later (a "..", a link count) is read
 * back for it. */
#define WB_LAG	((uint64_t)32 << 20)

static int write_behind(struct hu_erofs *w, struct hu_error *e)
{
	uint64_t done = w->end > WB_LAG ? w->end - WB_LAG : 0;

	if (done <= (uint64_t)w->wb.end)
		return 0;
	if (hu_writebehind_wrote(&w->wb, (size_t)(done - (uint64_t)w->wb.end))
	    < 0) {
		w->failed = true;
		return hu_error_set(e, errno, NULL,
				    "cannot write the EROFS image");
	}
	return 0;
}

int hu_erofs_alloc_blocks(struct hu_erofs *w, uint64_t bytes, uint32_t *blkaddr,
		       struct hu_error *e)
{
	uint64_t blk = w->end >> w->blkbits;
	uint64_t n = (bytes + w->blksz - 1) >> w->blkbits;

	/* The superblock counts blocks in 32 bits, and so do addresses. */
	if (blk + n >= UINT32_MAX)
		return hu_error_set(e, EFBIG, NULL,
				    "EROFS cannot hold an image of 2^32 blocks or more");
	*blkaddr = (uint32_t)blk;
	w->end += n << w->blkbits;
	return write_behind(w, e);
}

/* Make the region's buffer hold @cap bytes, the new ones zero. */
static int region_size(struct hu_erofs *w, size_t cap, struct hu_error *e)
{
	if (cap > w->rmax) {
		uint8_t *p = realloc(w->rbuf, cap);

		if (!p)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		w->rbuf = p;
		w->rmax = cap;
	}
	if (cap > w->rcap)
		memset(w->rbuf + w->rcap, 0, cap - w->rcap);
	return 0;
}

/* Room for @need bytes of region from @off on: grow the region when it
 * is the end of the image, else start a new one there. */
static int region_room(struct hu_erofs *w, size_t *off, size_t need,
		       struct hu_error *e)
{
	size_t cap = align_up(*off + need, w->blksz);
	uint32_t blk = 0;

	if (w->end == w->rpos + w->rcap && cap <= REGION_MAX) {
		if (region_size(w, cap, e) < 0 ||
		    hu_erofs_alloc_blocks(w, cap - w->rcap, &blk, e) < 0)
			return -1;
		w->rcap = cap;
		return 0;
	}
	if (hu_erofs_flush(w, e) < 0)
		return -1;
	cap = align_up(need > REGION_MIN ? need : REGION_MIN, w->blksz);
	w->rcap = 0;
	if (region_size(w, cap, e) < 0 ||
	    hu_erofs_alloc_blocks(w, cap, &blk, e) < 0)
		return -1;
	w->rpos = (uint64_t)blk << w->blkbits;
	w->rcap = cap;
	*off = 0;
	return 0;
}

/*
 * Room for a record of @size bytes aligned to @align: its image offset in
 * *@pos, its bytes zero in the region until filled (hu_erofs_at).  A record
 * that fits in a block never crosses a block boundary (an inline tail may
 * not, and erofs-utils reads an xattr header within one block); a larger
 * one starts a block.
 */
int hu_erofs_reserve(struct hu_erofs *w, size_t size, size_t align,
		  uint64_t *pos, struct hu_error *e)
{
	size_t off = align_up(w->rused, align);

	if (size > w->blksz || (off & (w->blksz - 1)) + size > w->blksz)
		off = align_up(off, w->blksz);
	if (off + size > w->rcap && region_room(w, &off, size, e) < 0)
		return -1;
	*pos = w->rpos + off;
	w->rused = off + size;
	return 0;
}
