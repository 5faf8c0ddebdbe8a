/* SPDX-License-Identifier: MIT */
/* The public xattrs of one source entry, sorted, values read (lxattr.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "layer/ldir.h"
#include "layer/lxattr.h"

/* The largest value Linux allows (XATTR_SIZE_MAX). */
#define XATTR_VALUE_MAX 65536

static int name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct hu_xattr *)a)->name,
		      ((const struct hu_xattr *)b)->name);
}

static int grow(void *pp, size_t *cap, size_t want, size_t size)
{
	void *bigger;
	size_t n = *cap ? *cap : 16;

	if (want <= *cap)
		return 0;
	while (n < want)
		n *= 2;
	bigger = realloc(*(void **)pp, n * size);
	if (!bigger) {
		errno = ENOMEM;
		return -1;
	}
	*(void **)pp = bigger;
	*cap = n;
	return 0;
}

/* An index layer's list, copied into x->names. */
static ssize_t list_index_names(struct hu_xattrs *x,
				const struct hu_layer *src, int dir,
				const char *name)
{
	char *list;
	ssize_t len;

	if (hu_ldir_listxattr(src, dir, name, &list, &len) < 0)
		return -1;
	if (len > 0 && grow(&x->names, &x->names_cap, (size_t)len, 1) < 0)
		len = -1;
	else if (len > 0)
		memcpy(x->names, list, (size_t)len);
	free(list);
	return len;
}

/* The xattr names of @name in @dir, into x->names: the list length, or
 * -1 with errno. */
static ssize_t list_names(struct hu_xattrs *x, const struct hu_layer *src,
			  int dir, const char *name)
{
	if (src && hu_ldir_indexed(src))
		return list_index_names(x, src, dir, name);
	if (grow(&x->names, &x->names_cap, 4096, 1) < 0)
		return -1;
	for (;;) {
		ssize_t n = hu_listxattr_at(dir, name, x->names,
					    x->names_cap);

		if (n >= 0)
			return n;
		if (errno == ENOTSUP)
			return 0;
		if (errno != ERANGE)
			return -1;
		n = hu_listxattr_at(dir, name, NULL, 0);
		if (n < 0 ||
		    grow(&x->names, &x->names_cap, (size_t)n + 256, 1) < 0)
			return -1;
	}
}

/* The public names of the list into x->v, sorted, no values yet. */
static int pick_names(struct hu_xattrs *x, const char *names, size_t len)
{
	x->n = 0;
	for (size_t off = 0; off < len; off += strlen(names + off) + 1) {
		if (!hu_xattr_copied(names + off))
			continue;
		if (grow(&x->v, &x->cap, x->n + 1, sizeof(*x->v)) < 0)
			return -1;
		x->v[x->n++] = (struct hu_xattr){ .name = names + off };
	}
	if (x->n > 1)		/* x->v is NULL until a first name */
		qsort(x->v, x->n, sizeof(*x->v), name_cmp);
	return 0;
}

int hu_xattrs_read(struct hu_xattrs *x, const struct hu_layer *src, int dir,
		   const char *name, const char *names, size_t names_len,
		   const char *path, struct hu_error *e)
{
	size_t used = 0, kept = 0;

	if (!names) {
		ssize_t len = list_names(x, src, dir, name);

		if (len < 0)
			return hu_error_set(e, errno, path,
					    "cannot list xattrs");
		names = x->names;
		names_len = (size_t)len;
	}
	if (pick_names(x, names, names_len) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	/* Every value read into one buffer: the offsets first (it may
	 * move), the pointers once all are read. */
	for (size_t i = 0; i < x->n; i++) {
		ssize_t vl;

		if (grow(&x->values, &x->values_cap, used + XATTR_VALUE_MAX,
			 1) < 0)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		vl = src ? hu_ldir_getxattr(src, dir, name, x->v[i].name,
					    x->values + used,
					    XATTR_VALUE_MAX) :
			   hu_lgetxattr_at(dir, name, x->v[i].name,
					   x->values + used, XATTR_VALUE_MAX);
		if (vl < 0 && errno == ENODATA)
			continue;	/* removed meanwhile */
		if (vl < 0)
			return hu_error_set(e, errno, path,
					    "cannot read xattr %s",
					    x->v[i].name);
		x->v[kept].name = x->v[i].name;
		x->v[kept].value = (const void *)(uintptr_t)used;
		x->v[kept++].size = (size_t)vl;
		used += (size_t)vl;
	}
	x->n = kept;
	for (size_t i = 0; i < x->n; i++)
		x->v[i].value = x->values + (uintptr_t)x->v[i].value;
	return 0;
}

void hu_xattrs_free(struct hu_xattrs *x)
{
	free(x->v);
	free(x->names);
	free(x->values);
	memset(x, 0, sizeof(*x));
}
