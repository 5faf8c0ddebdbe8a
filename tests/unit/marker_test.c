/* SPDX-License-Identifier: MIT */
/* Markers: classification, creation and the metacopy data lookup. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
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

/* ---- OCI marker names, by name alone ------------------------------------ */

static enum hu_marker name_kind(const char *name)
{
	return hu_oci_name_kind(name, strlen(name));
}

Test(marker, oci_names_by_name_alone)
{
	static const struct {
		const char *name, *hidden;
		enum hu_marker kind;
		bool marker, opaque, nothing;
	} c[] = {
		{ ".wh.", "", HU_MARK_WHITEOUT, true, false, true },
		{ ".wh..", ".", HU_MARK_WHITEOUT, true, false, true },
		{ ".wh...", "..", HU_MARK_WHITEOUT, true, false, true },
		{ ".wh..wh..opq", NULL, HU_MARK_OPAQUE_FILE, true, true, false },
		{ ".wh..wh.other", NULL, HU_MARK_META, true, false, false },
		{ ".wh..wh.", NULL, HU_MARK_META, true, false, false },
		{ ".wh..wh..opqx", NULL, HU_MARK_META, true, false, false },
		{ ".wh.a", "a", HU_MARK_WHITEOUT, true, false, false },
		{ ".wh..opq", ".opq", HU_MARK_WHITEOUT, true, false, false },
		{ ".wh.\xff\xfe", "\xff\xfe", HU_MARK_WHITEOUT, true, false, false },
		{ "a.wh.", NULL, HU_MARK_NONE, false, false, false },
		{ ".wh", NULL, HU_MARK_NONE, false, false, false },
		{ ".WH.a", NULL, HU_MARK_NONE, false, false, false },
		{ "\xff.wh.", NULL, HU_MARK_NONE, false, false, false },
		{ "", NULL, HU_MARK_NONE, false, false, false },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		const char *h = hu_oci_hidden(c[i].name);

		cr_expect_eq(hu_oci_is_marker(c[i].name), c[i].marker, "%s",
			     c[i].name);
		cr_expect_eq(hu_oci_is_opaque(c[i].name), c[i].opaque, "%s",
			     c[i].name);
		cr_expect_eq(name_kind(c[i].name), c[i].kind, "%s",
			     c[i].name);
		if (!c[i].hidden) {
			cr_expect_null(h, "%s", c[i].name);
			continue;
		}
		cr_assert_not_null(h, "%s", c[i].name);
		cr_expect_str_eq(h, c[i].hidden);
		cr_expect_eq(h, c[i].name + strlen(HU_OCI_WH_PREFIX));
		cr_expect_eq(hu_oci_hides_nothing(h), c[i].nothing, "%s",
			     c[i].name);
	}
}

Test(marker, oci_name_kind_reads_only_len_bytes)
{
	/* a name inside a path: no NUL after it */
	const char *p = ".wh..wh..opq/.wh.x/.wh";

	cr_expect_eq(hu_oci_name_kind(p, 12), HU_MARK_OPAQUE_FILE);
	cr_expect_eq(hu_oci_name_kind(p, 11), HU_MARK_META);
	cr_expect_eq(hu_oci_name_kind(p, 8), HU_MARK_META);
	cr_expect_eq(hu_oci_name_kind(p, 7), HU_MARK_WHITEOUT);
	cr_expect_eq(hu_oci_name_kind(p, 4), HU_MARK_WHITEOUT);
	cr_expect_eq(hu_oci_name_kind(p, 3), HU_MARK_NONE);
	cr_expect_eq(hu_oci_name_kind(p + 13, 5), HU_MARK_WHITEOUT);
	cr_expect_eq(hu_oci_name_kind(p + 19, 3), HU_MARK_NONE);
	cr_expect_eq(hu_oci_name_kind(p, 0), HU_MARK_NONE);
}

Test(marker, oci_whiteout_name_fits_or_says_so)
{
	char buf[NAME_MAX + 1], small[6], name[NAME_MAX + 1];

	cr_expect(hu_oci_whiteout_name(buf, sizeof(buf), "a"));
	cr_expect_str_eq(buf, ".wh.a");
	cr_expect(hu_oci_whiteout_name(buf, sizeof(buf), "\xff\xfe"));
	cr_expect_str_eq(buf, ".wh.\xff\xfe");
	cr_expect(hu_oci_whiteout_name(small, sizeof(small), "a"));
	cr_expect(!hu_oci_whiteout_name(small, sizeof(small), "ab"));
	cr_expect_str_eq(small, ".wh.a");	/* cut short, terminated */

	/* the longest name that has a whiteout, and one byte more */
	memset(name, 'n', NAME_MAX - 4);
	name[NAME_MAX - 4] = '\0';
	cr_expect(hu_oci_whiteout_name(buf, sizeof(buf), name));
	cr_expect_eq(strlen(buf), NAME_MAX);
	cr_expect_eq(hu_oci_name_kind(buf, strlen(buf)), HU_MARK_WHITEOUT);
	cr_expect_str_eq(hu_oci_hidden(buf), name);
	name[NAME_MAX - 4] = 'n';
	name[NAME_MAX - 3] = '\0';
	cr_expect(!hu_oci_whiteout_name(buf, sizeof(buf), name));
}

Test(marker, oci_marker_paths)
{
	static const struct {
		const char *dir, *name, *wh, *opq;
	} c[] = {
		{ "", "a", ".wh.a", ".wh..wh..opq" },
		{ "d", "a", "d/.wh.a", "d/.wh..wh..opq" },
		{ "d/e", ".wh.", "d/e/.wh..wh.", "d/e/.wh..wh..opq" },
		{ "\xff", "\xfe", "\xff/.wh.\xfe", "\xff/.wh..wh..opq" },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		char *wh = hu_oci_whiteout_path(c[i].dir, c[i].name);
		char *opq = hu_oci_opaque_path(c[i].dir);

		cr_assert_not_null(wh);
		cr_assert_not_null(opq);
		cr_expect_str_eq(wh, c[i].wh);
		cr_expect_str_eq(opq, c[i].opq);
		free(wh);
		free(opq);
	}
}
