/* SPDX-License-Identifier: MIT */
/* xattr names in pax records: written as GNU tar writes them, read in
 * both that form and libarchive's (paxxattr.c). */
#ifndef HUNION_PAXXATTR_H
#define HUNION_PAXXATTR_H

#include <stddef.h>

struct hu_paxbuf {
	char *p;
	size_t len, cap;
};

/* @in, @len: the bytes libarchive's pax writer wrote for one entry's
 * header: a pax extended header (its ustar block, then its records padded
 * to 512 bytes), then the entry's own ustar block.  Into @out (emptied,
 * grown as needed): the same header with every SCHILY.xattr.NAME key in
 * GNU tar's form and no LIBARCHIVE.xattr.* record.  Returns 0, or -1 with
 * errno EINVAL (not such a header) or ENOMEM. */
int hu_pax_fix_xattr_keys(const char *in, size_t len, struct hu_paxbuf *out);

/* Append: 0, or -1 with errno ENOMEM. */
int hu_paxbuf_add(struct hu_paxbuf *b, const void *p, size_t n);
void hu_paxbuf_free(struct hu_paxbuf *b);

/* The xattr name that key suffix @in (after "SCHILY.xattr.") stands for,
 * into @out of @size bytes: GNU tar's %25 and %3D undone, or, for a name
 * in libarchive's URL encoding, every escape.  Returns 0, or -1 when
 * @size is too small. */
int hu_pax_xattr_name(const char *in, char *out, size_t size);

#endif
