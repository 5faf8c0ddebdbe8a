/* SPDX-License-Identifier: MIT */
/*
 * The paths of a tarball layer: how an entry's name becomes a path of the
 * layer (hu_tar_path_norm), and the index of the paths made so far, the
 * one whole-tree structure of an unpack.  The index is a tree of names
 * (each node: its parent and one name), so its size follows the number of
 * entries and directories, never the length of their paths times their
 * depth; it holds no data.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tar/tarlayer.h"

/* ---- names --------------------------------------------------------------- */

/* A whiteout or the opaque marker: made a file, never a directory. */
static bool is_marker_name(const char *s, size_t len)
{
	enum hu_marker kind = hu_oci_name_kind(s, len);

	return kind == HU_MARK_WHITEOUT || kind == HU_MARK_OPAQUE_FILE;
}

char *hu_tar_path_norm(const char *in, bool *is_root, const char **why)
{
	size_t len = strlen(in), n = 0;
	const char *s = in, *last = NULL, *hidden;
	size_t last_len = 0;
	char *out;

	*is_root = false;
	*why = NULL;
	if (len == 0) {
		*why = "entry without a name";
		return NULL;
	}
	out = malloc(len + 1);
	if (!out) {
		*why = "out of memory";
		return NULL;
	}
	while (*s) {
		const char *end = strchrnul(s, '/');
		size_t cl = end - s;

		if (cl == 0 || (cl == 1 && s[0] == '.')) {
			/* "", "." : "./x", "/x", "a//b" and "a/./b" */
		} else if (cl == 2 && s[0] == '.' && s[1] == '.') {
			*why = "path has a '..' component";
			goto refuse;
		} else {
			if (last && is_marker_name(last, last_len)) {
				*why = "path passes through a whiteout";
				goto refuse;
			}
			if (n)
				out[n++] = '/';
			memcpy(out + n, s, cl);
			last = out + n;
			last_len = cl;
			n += cl;
		}
		s = *end ? end + 1 : end;
	}
	out[n] = '\0';
	if (n == 0) {
		*is_root = true;
		return out;
	}
	/* The final name: whiteouts must hide a name of this directory. */
	hidden = hu_oci_hidden(last);
	if (hidden && hu_oci_hides_nothing(hidden)) {
		*why = "invalid whiteout name: it hides no name";
		goto refuse;
	}
	return out;
refuse:
	free(out);
	return NULL;
}

const char *hu_tar_path_unusual(const char *in, bool is_dir)
{
	const char *s = in;

	/* One leading "./": what GNU tar (tar -C dir .) and docker write. */
	if (s[0] == '.' && s[1] == '/')
		s += 2;
	else if ((s[0] == '.' || s[0] == '/') && !s[1])
		return NULL;	/* the root, as "." or as "/" (umoci's) */
	if (*s == '/')
		return "absolute";
	while (*s) {
		const char *end = strchrnul(s, '/');
		size_t cl = (size_t)(end - s);

		if (cl == 0)
			return "empty name";
		if (cl == 1 && s[0] == '.')
			return "'.' name";
		if (cl == 2 && s[0] == '.' && s[1] == '.')
			return "'..' name";
		if (*end && !end[1]) {
			/* A trailing '/': a directory's, as tar writes it. */
			return is_dir ? NULL :
			       "trailing '/' on a non-directory";
		}
		s = *end ? end + 1 : end;
	}
	return NULL;
}

/* ---- the index ------------------------------------------------------------ */

struct ti_chunk {
	struct ti_chunk *next;
	size_t used, size;
	char data[];
};

static uint32_t hash_name(uint32_t parent, const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */

	for (int i = 0; i < 4; i++) {
		h ^= (parent >> (8 * i)) & 0xff;
		h *= 1099511628211ull;
	}
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	return (uint32_t)(h ^ (h >> 32));
}

static const char *intern(struct tar_index *x, const char *s, size_t len)
{
	struct ti_chunk *c = x->chunks;

	if (!c || c->size - c->used < len + 1) {
		size_t size = len + 1 > 65536 ? len + 1 : 65536;

		c = malloc(sizeof(*c) + size);
		if (!c)
			return NULL;
		c->used = 0;
		c->size = size;
		c->next = x->chunks;
		x->chunks = c;
	}
	memcpy(c->data + c->used, s, len);
	c->data[c->used + len] = '\0';
	c->used += len + 1;
	return c->data + c->used - len - 1;
}

/* The table slot of (@parent, @name): the one holding it, or the free one
 * where it belongs. */
static uint32_t *slot(const struct tar_index *x, uint32_t *table, size_t cap,
		      uint32_t parent, const char *name, size_t len,
		      uint32_t h)
{
	for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1)) {
		const struct ti_node *nd;

		if (!table[i])
			return &table[i];
		nd = &x->nodes[table[i] - 1];
		if (nd->hash == h && nd->parent == parent &&
		    strncmp(nd->name, name, len) == 0 && !nd->name[len])
			return &table[i];
	}
}

static int grow_table(struct tar_index *x)
{
	size_t cap = x->tcap ? x->tcap * 2 : 1024;
	uint32_t *t = calloc(cap, sizeof(*t));

	if (!t)
		return -1;
	for (size_t i = 0; i < x->tcap; i++) {
		const struct ti_node *nd;

		if (!x->table[i])
			continue;
		nd = &x->nodes[x->table[i] - 1];
		*slot(x, t, cap, nd->parent, nd->name, strlen(nd->name),
		      nd->hash) = x->table[i];
	}
	free(x->table);
	x->table = t;
	x->tcap = cap;
	return 0;
}

static uint32_t new_node(struct tar_index *x, uint32_t parent,
			 const char *name, size_t len, uint32_t h)
{
	struct ti_node *nd;

	if (x->n >= TI_NONE - 1)
		return TI_NONE;
	if (x->n == x->ncap) {
		size_t cap = x->ncap ? x->ncap * 2 : 1024;

		nd = realloc(x->nodes, cap * sizeof(*nd));
		if (!nd)
			return TI_NONE;
		x->nodes = nd;
		x->ncap = cap;
	}
	nd = &x->nodes[x->n];
	nd->name = intern(x, name, len);
	if (!nd->name)
		return TI_NONE;
	nd->parent = parent;
	nd->child = nd->next = TI_NONE;
	nd->hash = h;
	nd->dir = TI_NONE;
	nd->flags = 0;
	if (parent != TI_NONE) {
		nd->next = x->nodes[parent].child;
		x->nodes[parent].child = (uint32_t)x->n;
	}
	return (uint32_t)x->n++;
}

int ti_init(struct tar_index *x)
{
	memset(x, 0, sizeof(*x));
	return new_node(x, TI_NONE, "", 0, 0) == TI_ROOT ? 0 : -1;
}

uint32_t ti_child(struct tar_index *x, uint32_t parent, const char *name,
		  size_t len, bool add)
{
	uint32_t h = hash_name(parent, name, len), *sl, id;

	if (x->tcap && *(sl = slot(x, x->table, x->tcap, parent, name, len,
				   h)))
		return *sl - 1;
	if (!add)
		return TI_NONE;
	if ((x->n + 1) * 10 > x->tcap * 7 && grow_table(x) < 0)
		return TI_NONE;
	id = new_node(x, parent, name, len, h);
	if (id == TI_NONE)
		return TI_NONE;
	*slot(x, x->table, x->tcap, parent, name, len, h) = id + 1;
	return id;
}

uint32_t ti_path(struct tar_index *x, const char *path, bool add)
{
	uint32_t id = TI_ROOT;

	while (*path && id != TI_NONE) {
		size_t len = strchrnul(path, '/') - path;

		id = ti_child(x, id, path, len, add);
		path += len + (path[len] == '/');
	}
	return id;
}

struct ti_dir *ti_dir(struct tar_index *x, uint32_t node)
{
	struct ti_dir *d;

	if (x->nodes[node].dir != TI_NONE)
		return &x->dirs[x->nodes[node].dir];
	if (x->ndirs == x->dcap) {
		size_t cap = x->dcap ? x->dcap * 2 : 256;

		d = realloc(x->dirs, cap * sizeof(*d));
		if (!d)
			return NULL;
		x->dirs = d;
		x->dcap = cap;
	}
	x->nodes[node].dir = (uint32_t)x->ndirs;
	d = &x->dirs[x->ndirs++];
	memset(d, 0, sizeof(*d));
	d->node = node;
	return d;
}

char *ti_name_path(const struct tar_index *x, uint32_t node)
{
	size_t len = 0;
	char *p;

	for (uint32_t i = node; i != TI_ROOT; i = x->nodes[i].parent)
		len += strlen(x->nodes[i].name) + 1;
	p = malloc(len + 1);
	if (!p)
		return NULL;
	p[len ? len - 1 : 0] = '\0';
	for (uint32_t i = node; i != TI_ROOT; i = x->nodes[i].parent) {
		size_t nl = strlen(x->nodes[i].name);

		len -= nl + 1;
		memcpy(p + len, x->nodes[i].name, nl);
		if (i != node)
			p[len + nl] = '/';
	}
	return p;
}

void ti_free(struct tar_index *x)
{
	while (x->chunks) {
		struct ti_chunk *c = x->chunks;

		x->chunks = c->next;
		free(c);
	}
	free(x->nodes);
	free(x->table);
	free(x->dirs);
	memset(x, 0, sizeof(*x));
}
