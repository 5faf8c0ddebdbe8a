/* SPDX-License-Identifier: MIT */
/*
 * The public xattrs of one source entry, as every output writes them:
 * hunion's and the kernel's private markers and what /etc/xattr.conf
 * skips left out (hu_xattr_copied()), sorted by name, values read.  The
 * tar writer and the EROFS sink read them here.
 */
#ifndef HUNION_LXATTR_H
#define HUNION_LXATTR_H

#include <stddef.h>
#include <sys/types.h>

#include "internal.h"

struct hu_xattrs {
	struct hu_xattr *v;	/* the entry's, sorted by name */
	size_t n, cap;
	char *names;		/* the list read, when not given */
	size_t names_cap;
	char *values;		/* every value, one after another */
	size_t values_cap;
};

/*
 * Read the public xattrs of @name in directory @dir (@name NULL: @dir
 * itself) of layer @src (NULL: of the file system, @dir an fd) into
 * @x->v, valid until the next call.  @names (@names_len bytes) is the
 * entry's name list when already read, else NULL.  An xattr removed
 * meanwhile is passed by.  Errors name @path.
 */
int hu_xattrs_read(struct hu_xattrs *x, const struct hu_layer *src, int dir,
		   const char *name, const char *names, size_t names_len,
		   const char *path, struct hu_error *e);
void hu_xattrs_free(struct hu_xattrs *x);

#endif
