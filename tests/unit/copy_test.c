/* SPDX-License-Identifier: MIT */
/*
 * copy.c: a file's bytes are the st_size bytes its stat saw, by every way
 * of copying.  The seam is that stat: one that says more bytes than the
 * file holds is a file cut between the stat and the copy, one that says
 * fewer a file that grew.  Xattrs go through the write wrapper.
 */
#include <attr/libattr.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "internal.h"
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

/* ---- xattrs -------------------------------------------------------------- */

static int copy_xattrs_of(const char *src, const char *dst, struct hu_error *e)
{
	int in = open(tu_path(src), O_RDONLY), out, rc;

	out = open(tu_path(dst), O_WRONLY | O_CREAT | O_EXCL, 0644);
	cr_assert(in >= 0 && out >= 0);
	rc = hu_copy_xattrs(in, NULL, out, NULL, e);
	close(out);
	close(in);
	return rc;
}

static ssize_t xattr_len(const char *rel, const char *name)
{
	return lgetxattr(tu_path(rel), name, NULL, 0);
}

Test(copy, xattrs_are_copied_but_private_ones_and_what_xattr_conf_skips)
{
	struct hu_error e = { 0 };
	char big[1500], name[64];

	memset(big, 'v', sizeof(big));
	tu_file("f", "");
	tu_xattr("f", "user.a", "1");
	cr_assert_eq(setxattr(tu_path("f"), "user.big", big, sizeof(big), 0),
		     0);
	/* more names than the first, short listxattr holds */
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "user.a_rather_long_name_%02d", i);
		tu_xattr("f", name, "");
	}
	tu_xattr("f", "trusted.overlay.origin", "x");
	tu_xattr("f", "user.union.opaque", "y");
	tu_xattr("f", "user.Beagle.index", "x");
	cr_assert_eq(copy_xattrs_of("f", "out", &e), 0, "%s", e.msg);
	cr_expect_eq(xattr_len("out", "user.a"), 1);
	cr_expect_eq(xattr_len("out", "user.big"), (ssize_t)sizeof(big));
	cr_expect_eq(xattr_len("out", "user.a_rather_long_name_19"), 0);
	cr_expect_eq(xattr_len("out", "trusted.overlay.origin"), -1);
	cr_expect_eq(xattr_len("out", "user.union.opaque"), -1);
	if (attr_copy_action("user.Beagle.index", NULL) == ATTR_ACTION_SKIP)
		cr_expect_eq(xattr_len("out", "user.Beagle.index"), -1,
			     "/etc/xattr.conf says to skip it");
}

Test(copy, xattrs_of_a_symlink_by_name)
{
	struct hu_error e = { 0 };
	int src, dst;

	tu_symlink("nowhere", "src/l");
	cr_assert_eq(lsetxattr(tu_path("src/l"), "trusted.note", "x", 1, 0), 0);
	tu_symlink("nowhere", "dst/l");
	src = open(tu_path("src"), O_RDONLY | O_DIRECTORY);
	dst = open(tu_path("dst"), O_RDONLY | O_DIRECTORY);
	cr_assert(src >= 0 && dst >= 0);
	cr_assert_eq(hu_copy_xattrs(src, "l", dst, "l", &e), 0, "%s", e.msg);
	cr_expect_eq(xattr_len("dst/l", "trusted.note"), 1);
	close(dst);
	close(src);
}

/* Through the write wrapper: fault injection reaches it, and the error
 * names the attribute (the caller adds the path). */
Test(copy, a_failed_setxattr_names_the_attribute)
{
	struct hu_error e = { 0 };

	setenv("HUNION_FAULT", "setxattr:1:ENOTSUP", 1);
	tu_file("f", "");
	tu_xattr("f", "user.a", "1");
	cr_assert_eq(copy_xattrs_of("f", "out", &e), -1);
	cr_expect_eq(e.err, ENOTSUP);
	cr_expect_str_eq(e.msg, "cannot set xattr user.a");
	hu_error_clear(&e);
}
