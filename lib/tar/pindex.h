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

/* ---- building and loading ------------------------------------------------- */

/* Index the tarball @fd (from its start) in one pass: layer @k of @img,
 * its digests, size and compression verified as the unpack verifies them,
 * or (@img NULL) a tarball file, the sha256 of its bytes taken as they
 * pass.  @name is what messages call it: they read as the unpack's
 * ("NAME: ENTRY: message").  @r sees the progress of the read; what the
 * unpack would say is said at its end, as hu_pindex_replay() says it
 * (on an error too, what came before it).  The index is in memory:
 * hu_pindex_bytes(). */
int hu_pindex_build(int fd, const struct hu_oci_image *img, size_t k,
		    const char *name, const struct hu_report *r,
		    const struct hu_problem_sink *sink,
		    struct hu_pindex **out, struct hu_error *e);
/* What the unpack of tarball @name would have said, kept by the build:
 * its warnings (a duplicate entry, a name libarchive could not
 * convert...) to @r, worded as the unpack words them; given a problem
 * sink (fsck), a duplicate and a hard link forward (left out of the
 * index) go there instead, as the unpack gives them.  -1 with @e where
 * the unpack would have failed: a hard link forward that no sink takes.
 * So a run says the same whether it unpacked, built the index or read
 * it from the cache. */
int hu_pindex_replay(const struct hu_pindex *x, const char *name,
		     const struct hu_report *r,
		     const struct hu_problem_sink *sink, struct hu_error *e);
/* An index from its image: @len bytes at @buf (copied), or the file @fd
 * (mapped).  -1 with errno EINVAL when it is no valid index (its
 * checksum, or any offset or count, wrong), ENOMEM, or fstat/mmap's. */
int hu_pindex_from_bytes(const void *buf, size_t len, struct hu_pindex **out);
int hu_pindex_from_fd(int fd, struct hu_pindex **out);
/* For the tests: the checksum of image @buf made right again after they
 * changed it, so that the loader's other checks are what refuse it. */
void hu_pindex_fix_sum(void *buf, size_t len);
/* The image: the bytes hu_pindex_from_bytes() takes back. */
int hu_pindex_bytes(const struct hu_pindex *x, const void **buf, size_t *len);

/* What identifies a tarball file that is no image's layer, without reading
 * it: its index is good while these stay (a rewrite changes ctime). */
struct hu_pindex_file {
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
};
/* Of file @fd: 0, or -1 (fstat failed). */
int hu_pindex_file_id(int fd, struct hu_pindex_file *f);
/* Of the file the index was built from (all 0: an image's layer, or a
 * file that changed while it was read). */
void hu_pindex_source(const struct hu_pindex *x, struct hu_pindex_file *f);
/* The image layer's diff_id ("" for a tarball file). */
const char *hu_pindex_diff_id(const struct hu_pindex *x);
/* The uncompressed tar stream's size. */
uint64_t hu_pindex_tar_size(const struct hu_pindex *x);
/* Built as root: owners as the tarball says, devices made.  An index is
 * good only for a reader that is root as its builder was. */
bool hu_pindex_as_root(const struct hu_pindex *x);

/* ---- the cache (pcache.c) ------------------------------------------------ */

/*
 * Indexes kept in a directory: @dir, or (NULL) $XDG_CACHE_HOME/hunion,
 * else $HOME/.cache/hunion; made 0700 when missing, refused (naming it)
 * when another user owns it or group or others may write it.  An image
 * layer's index is found by its blob's digest, a tarball file's by its
 * device and inode (checked against its size, mtime and ctime).  Each is
 * written whole or not at all (hunion-layers(7), "Path index cache").
 */
struct hu_pcache;
int hu_pcache_open(struct hu_pcache **c, const char *dir, struct hu_error *e);
void hu_pcache_close(struct hu_pcache *c);
/* The bound on the indexes' size in all (default 1 GiB). */
void hu_pcache_set_limit(struct hu_pcache *c, uint64_t bytes);
/* Remove the least recently used indexes beyond the bound (and what killed
 * runs left): for a command to call AFTER its own work. */
int hu_pcache_trim(struct hu_pcache *c, struct hu_error *e);

/*
 * The index of tarball @fd: layer @k of @img, or (@img NULL) a tarball
 * file; @name names it in messages, as hu_pindex_build().  From cache @c
 * when it holds a good one (*@from_cache), else built (@r: its progress)
 * and stored there; either way what the build said is said to @r and
 * @sink (hu_pindex_replay()), and where the unpack would fail, so does
 * this.  A cached index that does not load, or
 * is not of this tarball, is rebuilt and replaced without a word; one the
 * cache cannot store costs the next run a build.  @c NULL (--no-cache):
 * built in memory, nothing written.
 */
int hu_pindex_get(struct hu_pcache *c, int fd, const struct hu_oci_image *img,
		  size_t k, const char *name, const struct hu_report *r,
		  const struct hu_problem_sink *sink, struct hu_pindex **out,
		  bool *from_cache, struct hu_error *e);

#endif /* HUNION_PINDEX_H */
