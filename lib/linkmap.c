/* SPDX-License-Identifier: MIT */
/* The hard-link map: an open-addressing hash table keyed by (dev, ino). */
#include <stdint.h>
#include <stdlib.h>

#include "linkmap.h"

static size_t slot_of(const struct hu_linkmap *m, dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev;

	return (size_t)(h ^ (h >> 29)) & (m->cap - 1);
}

const char *hu_linkmap_get(const struct hu_linkmap *m, dev_t dev, ino_t ino)
{
	if (!m->cap)
		return NULL;
	for (size_t i = slot_of(m, dev, ino);; i = (i + 1) & (m->cap - 1)) {
		const struct hu_link *l = &m->slots[i];

		if (!l->path)
			return NULL;
		if (l->dev == dev && l->ino == ino)
			return l->path;
	}
}

static int grow(struct hu_linkmap *m)
{
	struct hu_linkmap bigger = { .cap = m->cap ? m->cap * 2 : 256 };

	bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
	if (!bigger.slots)
		return -1;
	for (size_t i = 0; i < m->cap; i++) {
		struct hu_link *l = &m->slots[i];

		if (l->path)
			hu_linkmap_put(&bigger, l->dev, l->ino, l->path);
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
	m->slots[i] = (struct hu_link){ dev, ino, path };
	m->used++;
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
