/* SPDX-License-Identifier: MIT */
/* The hard-link map: (dev, ino) -> the first output path of that inode.
 * The one whole-tree structure of a merge; it holds only inodes with more
 * than one link.  It keeps the rule of every output (flatten, diff --oci,
 * merge -o, whiteout convert -o): of the names of one inode, the first
 * written carries the data and each later one is a hard link to it. */
#ifndef HUNION_LINKMAP_H
#define HUNION_LINKMAP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct hu_linkmap {
	struct hu_link *slots;
	size_t cap, used;
};

struct hu_link {
	dev_t dev;
	ino_t ino;
	char *path;		/* NULL: empty slot */
	uint64_t ref;		/* hu_linkmap_set_ref()'s */
};

/* Whether @st's names can be hard links to one another: not a directory,
 * more than one link.  Only such inodes enter the map. */
bool hu_linkmap_shared(const struct stat *st);
/*
 * The rule for the name @dir/@name (@dir NULL: @name is the whole output
 * path) of @st's inode, about to be written.  *@first is the name to
 * link it to when an earlier name of the inode was recorded; else NULL,
 * and this name, the first, is recorded when the inode is shared.  -1
 * (errno ENOMEM) when it cannot be recorded.
 */
int hu_linkmap_first(struct hu_linkmap *m, const struct stat *st,
		     const char *dir, const char *name, const char **first);
/* An output that names an inode by a number (EROFS: its nid) keeps it
 * beside the first name recorded for @st's inode; 0 when none. */
void hu_linkmap_set_ref(struct hu_linkmap *m, const struct stat *st,
			uint64_t ref);
uint64_t hu_linkmap_ref_of(const struct hu_linkmap *m, const struct stat *st);
/* The first name recorded for @st's inode, or NULL. */
const char *hu_linkmap_first_of(const struct hu_linkmap *m,
				const struct stat *st);

const char *hu_linkmap_get(const struct hu_linkmap *m, dev_t dev, ino_t ino);
/* Takes ownership of @path. */
int hu_linkmap_put(struct hu_linkmap *m, dev_t dev, ino_t ino, char *path);
/* The names recorded below directory @from (a path as recorded) are now
 * below @to: a tree built under a temporary name, then renamed.  -1
 * (errno ENOMEM) when one cannot be changed. */
int hu_linkmap_move(struct hu_linkmap *m, const char *from, const char *to);
void hu_linkmap_free(struct hu_linkmap *m);

#endif
