/* SPDX-License-Identifier: MIT */
/* Errors, paths and the hard-link map. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/hunion.h"
#include "../../lib/linkmap.h"

Test(error, carries_path_errno_and_message)
{
	struct hu_error e = { 0 };

	cr_expect_eq(hu_error_set(&e, ENOENT, "a/b", "cannot %s", "open"), -1);
	cr_expect_eq(e.err, ENOENT);
	cr_expect_str_eq(e.path, "a/b");
	cr_expect_str_eq(e.msg, "cannot open");
	hu_error_prefix(&e, "layer");
	cr_expect_str_eq(e.path, "layer/a/b");
	hu_error_setat(&e, 0, "", "x", "y");
	cr_expect_str_eq(e.path, "x");
	hu_error_clear(&e);
	cr_expect_null(e.path);
}

Test(linkmap, finds_what_was_put_across_growth)
{
	struct hu_linkmap m = { 0 };
	char name[32];

	for (unsigned i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "p%u", i);
		cr_assert_eq(hu_linkmap_put(&m, i % 3, i * 7, strdup(name)), 0);
	}
	for (unsigned i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "p%u", i);
		cr_assert_str_eq(hu_linkmap_get(&m, i % 3, i * 7), name);
	}
	cr_expect_null(hu_linkmap_get(&m, 1, 3));
	hu_linkmap_free(&m);
}
