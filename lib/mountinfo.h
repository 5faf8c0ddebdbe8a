/* SPDX-License-Identifier: MIT */
/* Mounted overlays, read from a mountinfo stream: hu_stack_mounted() reads
 * /proc/self/mountinfo; the tests and the fuzz target hand it any text. */
#ifndef HUNION_MOUNTINFO_H
#define HUNION_MOUNTINFO_H

#include <stdio.h>

#include "hunion.h"

/* hu_stack_mounted() on the mountinfo lines of @f (named @what in
 * errors). */
int hu_mountinfo_scan(FILE *f, const char *what, const struct hu_stack *s,
		      int extra_fd, struct hu_mount_use *use,
		      struct hu_error *e);

#endif /* HUNION_MOUNTINFO_H */
