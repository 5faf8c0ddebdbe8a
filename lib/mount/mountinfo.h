/* SPDX-License-Identifier: MIT */
/* Mounted overlays, read from a mountinfo stream: hu_dirs_in_use() reads
 * /proc/self/mountinfo and asks the kernel's probe; the tests and the
 * fuzz target hand hu_mountinfo_dirs() any text and a fake probe. */
#ifndef HUNION_MOUNTINFO_H
#define HUNION_MOUNTINFO_H

#include <stdio.h>

#include "hunion.h"

/* hu_dirs_in_use() on the mountinfo lines of @f (named @what in errors),
 * with @locked telling whether a directory is an overlay's upperdir or
 * workdir (1, 0; -1: cannot tell), asked only where a mount names one by
 * a path that does not resolve. */
int hu_mountinfo_dirs(FILE *f, const char *what, const struct hu_dir_ref *d,
		      size_t n, int (*locked)(int fd),
		      struct hu_mount_use *use, struct hu_error *e);
/* probe.c: is directory @fd locked by the kernel as the upperdir or
 * workdir of a mounted overlay?  1, 0, or -1 (errno) when the kernel
 * cannot be asked. */
int hu_overlay_locked(int fd);

/* Is a filesystem mounted anywhere beneath absolute path @dir, by the
 * mountinfo lines of @f?  True too when @f cannot be read to the end. */
bool hu_mountinfo_beneath(FILE *f, const char *dir);
/* The same for directory @fd, from /proc/self/mountinfo; true when that
 * or the directory's path cannot be read. */
bool hu_mount_beneath(int fd);

#endif /* HUNION_MOUNTINFO_H */
