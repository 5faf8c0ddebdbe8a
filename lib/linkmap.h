/* SPDX-License-Identifier: MIT */
/* The hard-link map: (dev, ino) -> the first output path of that inode.
 * The one whole-tree structure of a merge; it holds only inodes with more
 * than one link. */
#ifndef HUNION_LINKMAP_H
#define HUNION_LINKMAP_H

#include <sys/types.h>

struct hu_linkmap {
	struct hu_link *slots;
	size_t cap, used;
};

struct hu_link {
	dev_t dev;
	ino_t ino;
	char *path;		/* NULL: empty slot */
};

const char *hu_linkmap_get(const struct hu_linkmap *m, dev_t dev, ino_t ino);
/* Takes ownership of @path. */
int hu_linkmap_put(struct hu_linkmap *m, dev_t dev, ino_t ino, char *path);
void hu_linkmap_free(struct hu_linkmap *m);

#endif
