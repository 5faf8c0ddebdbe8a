/* SPDX-License-Identifier: MIT */
/*
 * copy.c: a file's bytes are the st_size bytes its stat saw, by every way
 * of copying.  The seam is that stat: one that says more bytes than the
 * file holds is a file cut between the stat and the copy, one that says
 * fewer a file that grew.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/internal.h"
#include "testutil.h"

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(copy, .fini = teardown);

enum { MIB = 1 << 20 };

/* The ways of copying, forced through the state: the first falls back
 * from a reflink where the test directory's filesystem has none. */
static const struct hu_copy_state ways[] = {
	{ .no_clone = false, .no_copy_range = false },
	{ .no_clone = true, .no_copy_range = false },
	{ .no_clone = true, .no_copy_range = true },
};
#define NWAYS (sizeof(ways) / sizeof(ways[0]))

/* @len bytes of @c at @off of file @rel (created if missing). */
static void put(const char *rel, off_t off, size_t len, char c)
{
	char *buf = malloc(len);
	int fd = open(tu_path(rel), O_WRONLY | O_CREAT, 0644);

	cr_assert(buf && fd >= 0);
	memset(buf, c, len);
	cr_assert_eq(pwrite(fd, buf, len, off), (ssize_t)len);
	close(fd);
	free(buf);
}

/* Copy @rel by way @w, its stat saying @size bytes (and no blocks when
 * @sparse, which takes the hole-keeping way), into "out".  Returns what
 * hu_copy_data() returned. */
static int copy_as(const char *rel, size_t w, off_t size, bool sparse,
		   struct hu_error *e)
{
	struct hu_copy_state cs = ways[w];
	struct stat st;
	int in, out, rc;

	in = open(tu_path(rel), O_RDONLY);
	cr_assert(in >= 0);
	cr_assert_eq(fstat(in, &st), 0);
	st.st_size = size;
	if (sparse)
		st.st_blocks = 0;
	unlink(tu_path("out"));
	out = open(tu_path("out"), O_WRONLY | O_CREAT | O_EXCL, 0644);
	cr_assert(out >= 0);
	rc = hu_copy_data(&cs, in, &st, out, e);
	close(out);
	close(in);
	return rc;
}

static void expect_shrank(const char *rel, off_t size, bool sparse)
{
	for (size_t w = 0; w < NWAYS; w++) {
		struct hu_error e = { 0 };

		cr_expect_eq(copy_as(rel, w, size, sparse, &e), -1,
			     "way %zu%s: a shrunk file copied", w,
			     sparse ? " (sparse)" : "");
		cr_expect_eq(e.err, EIO, "way %zu", w);
		cr_expect_str_eq(e.msg,
				 "the file shrank while it was being read");
		hu_error_clear(&e);
	}
}

Test(copy, a_file_cut_before_the_copy_is_an_error)
{
	put("f", 0, 10, 'x');
	expect_shrank("f", 400 * 1024, false);
}

Test(copy, a_file_cut_midway_is_an_error)
{
	/* read/write meets the end after a whole buffer or more */
	put("f", 0, 3 * MIB / 2, 'x');
	expect_shrank("f", 3 * MIB, false);
}

Test(copy, a_sparse_file_cut_in_its_last_hole_is_an_error)
{
	/* data, a hole, data: cut after the data, the stat saw more */
	put("f", 0, 4096, 'a');
	put("f", MIB, 4096, 'b');
	expect_shrank("f", 2 * MIB, true);
}

Test(copy, a_sparse_file_cut_in_its_data_is_an_error)
{
	put("f", 0, 4096, 'a');
	put("f", MIB, 8192, 'b');
	expect_shrank("f", MIB + 65536, true);
}

/* A file that grew is copied up to the size the stat saw, as flatten
 * writes it: those bytes, none after. */
static void expect_prefix(bool sparse)
{
	for (size_t w = 0; w < NWAYS; w++) {
		struct hu_error e = { 0 };
		struct stat st;
		char *got;

		cr_assert_eq(copy_as("f", w, MIB + 100, sparse, &e), 0,
			     "way %zu: %s", w, e.msg);
		cr_assert_eq(stat(tu_path("out"), &st), 0);
		cr_expect_eq(st.st_size, MIB + 100, "way %zu", w);
		got = tu_read("out");
		cr_expect(got && got[0] == 'a', "way %zu", w);
	}
}

Test(copy, a_file_that_grew_is_copied_to_the_size_its_stat_saw)
{
	put("f", 0, 2 * MIB, 'a');
	expect_prefix(false);
}

Test(copy, a_sparse_file_that_grew_is_copied_to_the_size_its_stat_saw)
{
	put("f", 0, 4096, 'a');
	put("f", MIB, 4096, 'b');
	put("f", 3 * MIB, 4096, 'c');
	expect_prefix(true);
}

Test(copy, a_file_of_the_size_its_stat_saw_is_copied_whole)
{
	struct hu_error e = { 0 };
	struct stat st;

	put("f", 0, 4096, 'a');
	put("f", MIB, 4096, 'b');
	for (size_t w = 0; w < NWAYS; w++) {
		cr_assert_eq(copy_as("f", w, MIB + 4096, false, &e), 0);
		cr_assert_eq(stat(tu_path("out"), &st), 0);
		cr_expect_eq(st.st_size, MIB + 4096);
		cr_assert_eq(copy_as("f", w, MIB + 4096, true, &e), 0);
		cr_assert_eq(stat(tu_path("out"), &st), 0);
		cr_expect_eq(st.st_size, MIB + 4096);
		cr_expect_lt(st.st_blocks * 512, MIB, "way %zu: holes kept",
			     w);
	}
}
