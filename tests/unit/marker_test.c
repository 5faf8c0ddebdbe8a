/* SPDX-License-Identifier: MIT */
/* Markers: classification, creation and the metacopy data lookup. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(marker, .fini = teardown);

static enum hu_marker classify(enum hu_format f, const char *dir,
			       const char *name, bool xwh, const char **target)
{
	struct hu_layer l = { .format = f };
	struct hu_error e = { 0 };
	enum hu_marker kind;
	struct stat st;
	int fd = open(tu_path(dir), O_RDONLY | O_DIRECTORY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
	cr_assert_eq(hu_marker_classify(&l, fd, name, &st, xwh, &kind, target,
					&e), 0, "%s", e.msg);
	close(fd);
	return kind;
}

Test(marker, union_needs_both_the_target_and_the_xattr)
{
	const char *t;

	tu_wh_union("l/wh");
	tu_symlink("(union-whiteout)", "l/bare");
	tu_symlink("(union-whiteout)x", "l/longer");
	tu_xattr("l/longer", "trusted.union.whiteout", "y");
	cr_expect_eq(classify(HU_FMT_UNION, "l", "wh", false, &t),
		     HU_MARK_WHITEOUT);
	cr_expect_eq(classify(HU_FMT_UNION, "l", "bare", false, &t),
		     HU_MARK_NONE);
	cr_expect_eq(classify(HU_FMT_UNION, "l", "longer", false, &t),
		     HU_MARK_NONE);
	/* The same bytes mean nothing in an overlay layer. */
	cr_expect_eq(classify(HU_FMT_OVERLAY, "l", "wh", false, &t),
		     HU_MARK_NONE);
}

Test(marker, overlay_xattr_whiteout_only_where_allowed)
{
	const char *t;

	tu_file("l/x", "");
	tu_xattr("l/x", "trusted.overlay.whiteout", "");
	tu_file("l/full", "data");
	tu_xattr("l/full", "trusted.overlay.whiteout", "");
	cr_expect_eq(classify(HU_FMT_OVERLAY, "l", "x", true, &t),
		     HU_MARK_WHITEOUT);
	cr_expect_eq(classify(HU_FMT_OVERLAY, "l", "x", false, &t),
		     HU_MARK_NONE);
	cr_expect_eq(classify(HU_FMT_OVERLAY, "l", "full", true, &t),
		     HU_MARK_NONE);
}

Test(marker, oci_names)
{
	const char *t;

	tu_file("l/.wh.foo", "");
	tu_file("l/.wh..wh..opq", "");
	tu_file("l/.wh..wh.plnk", "");
	tu_file("l/plain", "");
	cr_expect_eq(classify(HU_FMT_OCI, "l", ".wh.foo", false, &t),
		     HU_MARK_WHITEOUT);
	cr_expect_str_eq(t, "foo");
	cr_expect_eq(classify(HU_FMT_OCI, "l", ".wh..wh..opq", false, &t),
		     HU_MARK_OPAQUE_FILE);
	cr_expect_eq(classify(HU_FMT_OCI, "l", ".wh..wh.plnk", false, &t),
		     HU_MARK_META);
	cr_expect_eq(classify(HU_FMT_OCI, "l", "plain", false, &t),
		     HU_MARK_NONE);
}

Test(marker, oci_whiteout_of_dotdot_is_an_error)
{
	struct hu_layer l = { .format = HU_FMT_OCI };
	struct hu_error e = { 0 };
	enum hu_marker kind;
	const char *t;

	cr_expect_eq(hu_marker_classify(&l, AT_FDCWD, ".wh..", NULL, false,
					&kind, &t, &e), -1);
	cr_expect_eq(hu_marker_classify(&l, AT_FDCWD, ".wh.", NULL, false,
					&kind, &t, &e), -1);
	cr_expect(strstr(e.msg, "invalid OCI whiteout") != NULL);
	hu_error_clear(&e);
}

Test(marker, created_whiteouts_classify_as_whiteouts)
{
	static const enum hu_format fmts[] = {
		HU_FMT_UNION, HU_FMT_OVERLAY, HU_FMT_OCI };
	struct hu_error e = { 0 };
	const char *t;

	for (size_t i = 0; i < 3; i++) {
		struct hu_layer l = { .format = fmts[i] };
		char dir[16];
		int fd;

		snprintf(dir, sizeof(dir), "l%zu", i);
		tu_mkdir(dir);
		fd = open(tu_path(dir), O_RDONLY | O_DIRECTORY);
		cr_assert_eq(hu_marker_add_whiteout(&l, fmts[i], fd, "gone",
						    &e), 0, "%s", e.msg);
		cr_assert_eq(mkdirat(fd, "d", 0755), 0);
		cr_assert_eq(hu_marker_set_opaque(&l, fmts[i], fd, "d", true,
						  &e), 0, "%s", e.msg);
		close(fd);
		cr_expect_eq(classify(fmts[i], dir, fmts[i] == HU_FMT_OCI ?
				      ".wh.gone" : "gone", false, &t),
			     HU_MARK_WHITEOUT, "format %s",
			     hu_format_name(fmts[i]));
	}
}

Test(marker, metacopy_takes_data_from_below)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	struct hu_merge_opts mo = { 0 };
	struct hu_merge_stats st;

	tu_file("lo/f", "lower data");
	tu_mkdir("up");
	close(open(tu_path("up/f"), O_CREAT | O_WRONLY, 0600));
	cr_assert_eq(truncate(tu_path("up/f"), 10), 0);
	tu_xattr("up/f", "trusted.overlay.metacopy", "");
	tu_wh_overlay("up/w");
	cr_assert_eq(tu_stack(&s, &e, 2, "lo", "up"), 0);
	cr_assert_eq(hu_merge_tree(&s, tu_path("out"), &mo, &st, &e), 0,
		     "%s", e.msg);
	hu_stack_close(&s);
	cr_expect_str_eq(tu_read("out/f"), "lower data");
}

Test(marker, metacopy_without_lower_data_is_an_error)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	struct hu_merge_opts mo = { 0 };
	struct hu_merge_stats st;

	tu_file("lo/other", "");
	tu_file("up/f", "");
	tu_xattr("up/f", "trusted.overlay.metacopy", "");
	tu_wh_overlay("up/w");
	cr_assert_eq(tu_stack(&s, &e, 2, "lo", "up"), 0);
	cr_expect_eq(hu_merge_tree(&s, tu_path("out"), &mo, &st, &e), -1);
	cr_expect_str_eq(e.msg, "metacopy file without lower data");
	cr_expect_str_eq(e.path, tu_path("up/f"));
	cr_expect(!tu_exists("out"));
	hu_stack_close(&s);
	hu_error_clear(&e);
}
