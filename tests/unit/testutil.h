/* SPDX-License-Identifier: MIT */
/* Helpers for the unit tests: build small layer trees under a fresh
 * temporary directory, by path relative to it. */
#ifndef HUNION_TESTUTIL_H
#define HUNION_TESTUTIL_H

#include <stdbool.h>
#include <sys/types.h>

#include "hunion.h"

/* A fresh directory for one test; removed by tu_cleanup(). */
const char *tu_tmpdir(void);
/* Expect the malloc'd string @got to be @want, and free it. */
#define tu_expect_str(got, want)                                        \
	do {                                                            \
		char *g_ = (got);                                       \
		cr_expect_str_eq(g_, want);                             \
		free(g_);                                               \
	} while (0)

void tu_cleanup(void);
/* Absolute path of @rel under the test directory (static buffer ring). */
const char *tu_path(const char *rel);

void tu_mkdir(const char *rel);			/* mkdir -p */
void tu_file(const char *rel, const char *content);
void tu_symlink(const char *target, const char *rel);
void tu_xattr(const char *rel, const char *name, const char *value);
void tu_mknod(const char *rel, mode_t mode, unsigned maj, unsigned min);
/* Markers. */
void tu_wh_union(const char *rel);
void tu_wh_overlay(const char *rel);
void tu_opaque(const char *rel, const char *ns_format); /* "union"/"overlay" */

/* Read a whole small file under the test directory; NULL if missing. */
char *tu_read(const char *rel);
bool tu_exists(const char *rel);

/* Open a stack of layers named relative to the test dir, bottom first. */
int tu_stack(struct hu_stack *s, struct hu_error *e, int n, ...);

/* The merged view as "name:layer" lines, recursively ("a/b:1\n"); also
 * checks that the walk listing ahead (list_ahead, with the xattr names)
 * gives the same lines and reads the same data from every file. */
char *tu_view_dump(const struct hu_stack *s);
/* One walk of the view (@ahead: listing ahead, with the xattr names, and
 * opening files ahead) as "name:layer" lines, each file's followed by
 * " [its data]"; *@rc and @e are the walk's result. */
char *tu_view_walk_data(const struct hu_stack *s, bool ahead, int *rc,
			struct hu_error *e);

#endif
