/* SPDX-License-Identifier: MIT */
/*
 * The EROFS writer: one uncompressed EROFS image written in one pass, from
 * a tree given directory by directory, each directory before its contents
 * (the view's order).  It knows the on-disk format and nothing of layers:
 * the sink (lib/output/erofsout.c) hands it each entry's metadata, its
 * public xattrs and, for a regular file, where its bytes come from.
 *
 * Inode and data layout are decided here and nowhere else; file data
 * comes through struct hu_erofs_data, so that a later metadata-only image
 * (composefs) or a per-layer blob can reuse the writer.
 *
 * Memory grows with the tree's depth and width (the open directories'
 * names) and with the number of hard-link groups, not with the number of
 * files.  The same calls give the same bytes.
 */
#ifndef HUNION_EROFS_H
#define HUNION_EROFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "internal.h"

struct hu_erofs;

struct hu_erofs_opts {
	unsigned block_bits;	/* log2 of the block size: 9..16; 0 is 12 */
	/* The superblock's build time: a compact inode's mtime is this, so
	 * an inode whose mtime differs is written extended. */
	int64_t build_time;
	uint32_t build_time_nsec;
	bool uuid_content;	/* the UUID from a hash of the image; else 0 */
};

struct hu_erofs_meta {
	mode_t mode;		/* type and permission bits */
	uid_t uid;
	gid_t gid;
	int64_t mtime;
	uint32_t mtime_nsec;
	dev_t rdev;		/* character and block devices */
	/* The public xattrs, sorted by name, none repeated (struct
	 * hu_xattr, internal.h: name, value, size). */
	const struct hu_xattr *xattrs;
	size_t nxattrs;
};

/* A regular file's bytes.  With @fd >= 0 they are read from @fd, at
 * offset 0 on (copy_file_range where it can; a hole SEEK_HOLE finds stays
 * a hole in the image).  Else, unless @size is 0 (then neither is
 * used), the writer calls @feed once: the source
 * pushes the @size bytes, in order and in pieces of any size, to @put
 * (with @put_ctx), which returns 0 or -1 with @e set; @feed returns 0 or
 * -1 with @e set.  (A tarball layer's bytes are pushed as its stream is
 * read: lib/tar/pdata.h.) */
typedef int (*hu_erofs_put)(void *put_ctx, const void *p, size_t n,
			    struct hu_error *e);
struct hu_erofs_data {
	uint64_t size;
	int fd;
	/* The file as the user knows it, @layer/@path: the copy of a large
	 * file's bytes from @fd may finish after the call that gave it (a
	 * worker thread copies while the walk goes on), and its errors name
	 * this, joined only then. */
	const char *layer, *path;
	/* The source says it has no hole (its blocks cover its size): no
	 * SEEK_HOLE is asked. */
	bool no_holes;
	int (*feed)(void *ctx, hu_erofs_put put, void *put_ctx,
		    struct hu_error *e);
	void *ctx;
};

/* Start an image in @fd, an empty regular file open for writing and
 * reading. */
int hu_erofs_open(struct hu_erofs **w, int fd, const struct hu_erofs_opts *o,
		  struct hu_error *e);

/* The root directory: the first call after hu_erofs_open().  Its
 * contents follow, then hu_erofs_leave() for it. */
int hu_erofs_root(struct hu_erofs *w, const struct hu_erofs_meta *m,
		  struct hu_error *e);

/*
 * An entry @name of the directory open last (the root, or the latest
 * hu_erofs_dir() not yet left).  The names of one directory come in any
 * order, each once; "." and ".." are the writer's own.
 *
 * hu_erofs_dir() opens directory @name: its entries come next, then
 * hu_erofs_leave() for it.  A regular file, symlink (@target, its bytes
 * without a NUL) or special file (device, FIFO, socket) is written whole
 * by its call.
 *
 * @ref, when not NULL, is set to the new inode's reference, which
 * hu_erofs_link() takes to give it another name.
 */
int hu_erofs_dir(struct hu_erofs *w, const char *name,
		 const struct hu_erofs_meta *m, struct hu_error *e);
int hu_erofs_leave(struct hu_erofs *w, struct hu_error *e);
int hu_erofs_file(struct hu_erofs *w, const char *name,
		  const struct hu_erofs_meta *m, const struct hu_erofs_data *d,
		  uint64_t *ref, struct hu_error *e);
int hu_erofs_symlink(struct hu_erofs *w, const char *name,
		     const struct hu_erofs_meta *m, const char *target,
		     size_t len, uint64_t *ref, struct hu_error *e);
int hu_erofs_special(struct hu_erofs *w, const char *name,
		     const struct hu_erofs_meta *m, uint64_t *ref,
		     struct hu_error *e);
/* Another name @name, in the directory open last, of the non-directory
 * inode @ref: its link count is what the image says in the end. */
int hu_erofs_link(struct hu_erofs *w, const char *name, uint64_t ref,
		  struct hu_error *e);

/* Finish the image: every directory left, the superblock written.  The
 * caller syncs and renames the file.  Frees @w, also on failure. */
int hu_erofs_close(struct hu_erofs *w, struct hu_error *e);
/* Give up: free @w, write nothing more. */
void hu_erofs_abort(struct hu_erofs *w);

#endif
