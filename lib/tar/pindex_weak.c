/* SPDX-License-Identifier: MIT */
/*
 * Until the path index (pindex.c) is in: weak stand-ins, never called (no
 * layer has an index before it), so that the layer code links.  pindex.c's
 * definitions replace them; this file goes when it comes.
 */
#include <errno.h>

#include "internal.h"
#include "tar/pindex.h"

#define WEAK __attribute__((weak))

WEAK size_t hu_pindex_nchildren(const struct hu_pindex *x, hu_pnode d)
{ (void)x; (void)d; return 0; }
WEAK hu_pnode hu_pindex_child(const struct hu_pindex *x, hu_pnode d, size_t i)
{ (void)x; (void)d; (void)i; return HU_PNODE_NONE; }
WEAK hu_pnode hu_pindex_lookup(const struct hu_pindex *x, hu_pnode d,
			       const char *name)
{ (void)x; (void)d; (void)name; return HU_PNODE_NONE; }
WEAK const char *hu_pindex_name(const struct hu_pindex *x, hu_pnode n)
{ (void)x; (void)n; return ""; }
WEAK hu_pnode hu_pindex_parent(const struct hu_pindex *x, hu_pnode n)
{ (void)x; (void)n; return HU_PNODE_NONE; }
WEAK void hu_pindex_stat(const struct hu_pindex *x, hu_pnode n, struct stat *st)
{ (void)x; (void)n; (void)st; }
WEAK dev_t hu_pindex_dev(const struct hu_pindex *x)
{ (void)x; return 0; }
WEAK bool hu_pindex_implicit(const struct hu_pindex *x, hu_pnode n)
{ (void)x; (void)n; return false; }
WEAK const char *hu_pindex_symlink(const struct hu_pindex *x, hu_pnode n)
{ (void)x; (void)n; return NULL; }
WEAK const char *hu_pindex_xattr_names(const struct hu_pindex *x, hu_pnode n,
				       size_t *len)
{ (void)x; (void)n; *len = 0; return ""; }
WEAK int hu_pindex_xattr(const struct hu_pindex *x, hu_pnode n,
			 const char *name, const void **val, size_t *len)
{ (void)x; (void)n; (void)name; (void)val; (void)len; return -1; }
WEAK size_t hu_pindex_nodes(const struct hu_pindex *x)
{ (void)x; return 0; }
WEAK void hu_pindex_free(struct hu_pindex *x)
{ (void)x; }

struct hu_oci_image;
struct hu_report;
int hu_pindex_build(int fd, const struct hu_oci_image *img, size_t k,
		    const char *name, const struct hu_report *r,
		    struct hu_pindex **out, struct hu_error *e);
WEAK int hu_pindex_build(int fd, const struct hu_oci_image *img, size_t k,
			 const char *name, const struct hu_report *r,
			 struct hu_pindex **out, struct hu_error *e)
{
	(void)fd; (void)img; (void)k; (void)r; (void)out;
	return hu_error_set(e, ENOSYS, name, "no path index yet");
}
