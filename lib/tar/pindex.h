/* SPDX-License-Identifier: MIT */
/*
 * A layer tarball's path index: every name the tarball leaves when it is
 * unpacked alone (duplicates replaced, hard links as names of one inode,
 * parents no entry names marked implicit), with the metadata the view
 * reads and where each regular file's data lies in the uncompressed tar
 * stream.  It holds no file data.
 *
 * Built in one pass over the tarball (pindex.c: its bytes decompressed and
 * verified as tarsrc.c always does, the data skipped), kept in the index
 * cache (pcache.c) keyed by the blob's digest, read back with mmap: a
 * read-only, position-independent image whose readers below cost a binary
 * search per name, never a parse of the whole.
 *
 * Nodes are numbered from 0, the root.  A directory's children are kept
 * sorted bytewise by name, as hu_names_read() lists a directory.  The
 * index says what the tarball says; what an implicit directory takes from
 * the layers beneath is for the layer that reads it (lib/layer/).
 */
#ifndef HUNION_PINDEX_H
#define HUNION_PINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "hunion.h"

typedef uint32_t hu_pnode;
#define HU_PNODE_ROOT 0
#define HU_PNODE_NONE UINT32_MAX

struct hu_pindex;

/* ---- reading (the view's side) ------------------------------------------ */

/* The children of directory @dir, sorted bytewise by name: the @i-th of
 * hu_pindex_nchildren(). */
size_t hu_pindex_nchildren(const struct hu_pindex *x, hu_pnode dir);
hu_pnode hu_pindex_child(const struct hu_pindex *x, hu_pnode dir, size_t i);
/* Name @name in directory @dir (binary search), or HU_PNODE_NONE. */
hu_pnode hu_pindex_lookup(const struct hu_pindex *x, hu_pnode dir,
			  const char *name);
/* A node's name ("" for the root) and parent (HU_PNODE_NONE for the root). */
const char *hu_pindex_name(const struct hu_pindex *x, hu_pnode n);
hu_pnode hu_pindex_parent(const struct hu_pindex *x, hu_pnode n);
/* What lstat() would say of node @n in the unpacked layer: type and mode,
 * owner, size, rdev, mtime (atime the tarball's or the mtime, ctime the
 * mtime), st_ino a number the names of one inode share, st_nlink how many
 * names it has, st_dev hu_pindex_dev(). */
void hu_pindex_stat(const struct hu_pindex *x, hu_pnode n, struct stat *st);
/* A device number for the index's nodes, unlike any real filesystem's
 * and unlike another index's (hard-link maps key on dev and ino). */
dev_t hu_pindex_dev(const struct hu_pindex *x);
/* A directory made as a parent, which no entry names. */
bool hu_pindex_implicit(const struct hu_pindex *x, hu_pnode n);
/* A symlink's target (NUL-terminated), else NULL. */
const char *hu_pindex_symlink(const struct hu_pindex *x, hu_pnode n);
/* Node @n's xattr names as listxattr(2) gives them: NUL-terminated names
 * one after the other, *@len bytes in all (0: none). */
const char *hu_pindex_xattr_names(const struct hu_pindex *x, hu_pnode n,
				  size_t *len);
/* The value of xattr @name of node @n: 0 with *@val and *@len, or -1
 * (ENODATA) when it has none by that name. */
int hu_pindex_xattr(const struct hu_pindex *x, hu_pnode n, const char *name,
		    const void **val, size_t *len);

/* Where a regular file's bytes are: @off in the uncompressed tar stream;
 * a sparse file's data as @nseg segments (file offset, length) stored one
 * after the other from @off, the rest of its st_size holes. */
struct hu_pseg {
	uint64_t file_off, len;
};
struct hu_pdata {
	uint64_t off;
	const struct hu_pseg *seg;	/* NULL: not sparse, st_size bytes */
	size_t nseg;
};
int hu_pindex_data(const struct hu_pindex *x, hu_pnode n, struct hu_pdata *d);

/* The blob or tarball the index is of: "sha256:HEX" of its stored bytes. */
const char *hu_pindex_digest(const struct hu_pindex *x);
size_t hu_pindex_nodes(const struct hu_pindex *x);

void hu_pindex_free(struct hu_pindex *x);

/* (pindex.c, on h/pindex) */
struct hu_oci_image;
int hu_pindex_build(int fd, const struct hu_oci_image *img, size_t k,
		    const char *name, const struct hu_report *r,
		    struct hu_pindex **out, struct hu_error *e);

#endif /* HUNION_PINDEX_H */
