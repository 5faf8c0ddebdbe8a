/* SPDX-License-Identifier: MIT */
/*
 * A layer's directories, on disk or in a path index (ldir.c): how the
 * view and the readers of its entries (diff, fsck, detection's probes)
 * reach a layer directory.  For a directory layer each call is the
 * syscall it replaces, on the same fd.  For an index layer (hu_layer.pindex:
 * a tarball read from its path index, never unpacked) a directory is a
 * handle naming a node of the index, which no real fd can be: a reader
 * that misses this module and hands the handle to the kernel gets EBADF,
 * never another file.
 *
 * The handles are HU_LDIR_BASE + node, not negative numbers: -100 is
 * AT_FDCWD, and every caller takes a negative result for an error.  An fd
 * that large needs RLIMIT_NOFILE above 2^30, which no system gives.
 *
 * A directory the tarball only implies (hu_pindex_implicit) is read as its
 * unpack made it (tardirs.c): with the owner, mode, times and xattrs of the
 * directory of the layers beneath, or gone where nothing is beneath and it
 * holds markers only.  That is resolved once, at the open
 * (hu_ldir_imply()), and kept in the layer: the index itself is shared and
 * read-only.
 *
 * Every call but hu_ldir_imply() returns -1 with errno, as the syscall it
 * replaces; @name NULL or "" means the directory itself.
 */
#ifndef HUNION_LDIR_H
#define HUNION_LDIR_H

#include <stdbool.h>
#include <sys/types.h>

#include "internal.h"
#include "tar/pdata.h"
#include "tar/pindex.h"

#define HU_LDIR_BASE 0x40000000

/* Is @l read from a path index? */
static inline bool hu_ldir_indexed(const struct hu_layer *l)
{
	return l->pindex != NULL;
}

/* The handle of node @n of an index layer. */
static inline int hu_ldir_handle(hu_pnode n)
{
	return HU_LDIR_BASE + (int)n;
}

/* lstat of @name in layer directory @dir. */
int hu_ldir_stat(const struct hu_layer *l, int dir, const char *name,
		 struct stat *st);
/* The directory @name in @dir, never followed (hu_open_dir_at()); close it
 * with hu_ldir_close(). */
int hu_ldir_open(const struct hu_layer *l, int dir, const char *name);
/* The directory at relative @path under @root (hu_open_dir_beneath()). */
int hu_ldir_open_beneath(const struct hu_layer *l, int root,
			 const char *path);
/* Another handle of @dir, closed apart (fcntl F_DUPFD_CLOEXEC). */
int hu_ldir_dup(const struct hu_layer *l, int dir);
/* Close what hu_ldir_open() gave (an fd; nothing for a handle). */
void hu_ldir_close(const struct hu_layer *l, int dir);
/* The names of directory @dir of index layer @l, sorted bytewise:
 * hu_layer_names_read() of an index layer (the names are the index's,
 * no copy).  Errors name @path. */
int hu_ldir_names(const struct hu_layer *l, int dir, struct hu_names *out,
		  const char *path, struct hu_error *e);
/* hu_xattr_names(), hu_llistxattr_at(), hu_lgetxattr_at() of @name in
 * @dir. */
ssize_t hu_ldir_xattr_names(const struct hu_layer *l, int dir,
			    const char *name, char *small, size_t size,
			    char **list);
int hu_ldir_listxattr(const struct hu_layer *l, int dir, const char *name,
		      char **list, ssize_t *len);
ssize_t hu_ldir_getxattr(const struct hu_layer *l, int dir, const char *name,
			 const char *attr, void *buf, size_t size);
/* readlinkat(2) of @name in @dir. */
ssize_t hu_ldir_readlink(const struct hu_layer *l, int dir, const char *name,
			 char *buf, size_t size);
/* The file @name in @dir opened for its data (openat with @flags, never
 * followed).  An index layer holds no data: -1 with @e saying so (errno
 * EOPNOTSUPP), for the commands that read a lower file's bytes, which
 * unpack their tarball layers instead. */
int hu_ldir_open_data(const struct hu_layer *l, int dir, const char *name,
		      int flags, struct hu_error *e);

/* The @size bytes of file @name in @dir of index layer @l, to @put: read
 * forward from its tarball (tar/pdata.h), opened at the first file asked
 * for, when the layer was opened for its data (hu_stack_opts.index_data:
 * @l->tar_fd); else -1 (EOPNOTSUPP). */
int hu_ldir_copy_data(struct hu_layer *l, int dir, const char *name,
		      uint64_t size, hu_pstream_put put, void *ctx,
		      struct hu_error *e);
/* Read the rest of that tarball, its digests checked (and all of it when
 * no file was asked for): what a command that read the layer's data does
 * once done with it.  0 for a layer not opened for its data. */
int hu_ldir_data_finish(struct hu_layer *l, struct hu_error *e);

/* hu_copy_xattrs() from directory @dir of @l to the open fd @dfd: the
 * public xattrs, through the write wrapper. */
int hu_ldir_copy_xattrs(const struct hu_layer *l, int dir, int dfd,
			struct hu_error *e);

/* Make @x (owned from now on) the index of tarball layer @l, OCI, its
 * root the handle of the index root; its implicit directories read as
 * their unpack over @below (may be NULL: alone) makes them.  Errors read
 * "@l->path: ...".  On failure @x is freed and @l is as before. */
int hu_ldir_imply(struct hu_layer *l, struct hu_pindex *x,
		  const struct hu_stack *below, struct hu_error *e);
/* Free what hu_ldir_imply() keeps in @l, the index with it. */
void hu_ldir_free(struct hu_layer *l);

#endif /* HUNION_LDIR_H */
