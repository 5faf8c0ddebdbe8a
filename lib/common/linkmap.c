/* SPDX-License-Identifier: MIT */
/* The hard-link map: an open-addressing hash table keyed by (dev, ino). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "common/linkmap.h"

static size_t slot_of(const struct hu_linkmap *m, dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev;

	return (size_t)(h ^ (h >> 29)) & (m->cap - 1);
}

static struct hu_link *find(const struct hu_linkmap *m, dev_t dev, ino_t ino)
{
	if (!m->cap)
		return NULL;
	for (size_t i = slot_of(m, dev, ino);; i = (i + 1) & (m->cap - 1)) {
		struct hu_link *l = &m->slots[i];

		if (!l->path)
			return NULL;
		if (l->dev == dev && l->ino == ino)
			return l;
	}
}

const char *hu_linkmap_get(const struct hu_linkmap *m, dev_t dev, ino_t ino)
{
	const struct hu_link *l = find(m, dev, ino);

	return l ? l->path : NULL;
}

void hu_linkmap_set_ref(struct hu_linkmap *m, const struct stat *st,
			uint64_t ref)
{
	struct hu_link *l = find(m, st->st_dev, st->st_ino);

	if (l)
		l->ref = ref;
}

uint64_t hu_linkmap_ref_of(const struct hu_linkmap *m, const struct stat *st)
{
	const struct hu_link *l = find(m, st->st_dev, st->st_ino);

	return l ? l->ref : 0;
}

static int grow(struct hu_linkmap *m)
{
	struct hu_linkmap bigger = { .cap = m->cap ? m->cap * 2 : 256 };

	bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
	if (!bigger.slots)
		return -1;
	for (size_t i = 0; i < m->cap; i++) {
		struct hu_link *l = &m->slots[i];

		if (l->path) {
			hu_linkmap_put(&bigger, l->dev, l->ino, l->path);
			hu_linkmap_set_ref(&bigger, &(struct stat){
				.st_dev = l->dev, .st_ino = l->ino }, l->ref);
		}
	}
	free(m->slots);
	*m = bigger;
	return 0;
}

int hu_linkmap_put(struct hu_linkmap *m, dev_t dev, ino_t ino, char *path)
{
	size_t i;

	if ((m->used + 1) * 4 > m->cap * 3 && grow(m) < 0)
		return -1;
	for (i = slot_of(m, dev, ino); m->slots[i].path;
	     i = (i + 1) & (m->cap - 1))
		;
	m->slots[i] = (struct hu_link){ .dev = dev, .ino = ino, .path = path };
	m->used++;
	return 0;
}

bool hu_linkmap_shared(const struct stat *st)
{
	return !S_ISDIR(st->st_mode) && st->st_nlink > 1;
}

const char *hu_linkmap_first_of(const struct hu_linkmap *m,
				const struct stat *st)
{
	return hu_linkmap_get(m, st->st_dev, st->st_ino);
}

int hu_linkmap_first(struct hu_linkmap *m, const struct stat *st,
		     const char *dir, const char *name, const char **first)
{
	char *p;

	*first = NULL;
	if (!hu_linkmap_shared(st))
		return 0;
	*first = hu_linkmap_first_of(m, st);
	if (*first)
		return 0;
	p = hu_path_join(dir, name);
	if (!p || hu_linkmap_put(m, st->st_dev, st->st_ino, p) < 0) {
		free(p);
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

int hu_linkmap_move(struct hu_linkmap *m, const char *from, const char *to)
{
	size_t fl = strlen(from);

	for (size_t i = 0; i < m->cap; i++) {
		char *p = m->slots[i].path, *np;

		if (!p || strncmp(p, from, fl) != 0 || p[fl] != '/')
			continue;
		np = hu_path_join(to, p + fl + 1);
		if (!np) {
			errno = ENOMEM;
			return -1;
		}
		free(p);
		m->slots[i].path = np;
	}
	return 0;
}

void hu_linkmap_free(struct hu_linkmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->slots[i].path);
	free(m->slots);
	m->slots = NULL;
	m->cap = m->used = 0;
}
