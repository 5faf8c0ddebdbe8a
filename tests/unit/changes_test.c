/* SPDX-License-Identifier: MIT */
/* diff: the changes of the top layer over the view beneath, their order,
 * --exact, redirects and metacopy, --trees, and the change set as an OCI
 * layer. */
#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
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

TestSuite(changes, .fini = teardown);

/* ---- helpers ------------------------------------------------------------- */

static struct timespec fixed_time;

static int set_time(const char *p, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	struct timespec ts[2] = { fixed_time, fixed_time };

	return utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW);
}

/* Every mtime under @rel (and @rel) to @sec. */
static void fix_times(const char *rel, long sec)
{
	fixed_time = (struct timespec){ sec, 0 };
	cr_assert_eq(nftw(tu_path(rel), set_time, 16, FTW_PHYS | FTW_DEPTH),
		     0);
}

static void set_mode(const char *rel, mode_t mode)
{
	cr_assert_eq(chmod(tu_path(rel), mode), 0);
}

static const char *what_names(unsigned w)
{
	static char buf[128];
	static const char *const n[] = { "type", "content", "mode", "owner",
					 "mtime", "xattrs" };

	buf[0] = '\0';
	for (int i = 0; i < 6; i++)
		if (w & (1u << i))
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
				 "%s%s", buf[0] ? "," : "", n[i]);
	return buf;
}

static int collect(void *ctx, const struct hu_change *c, struct hu_error *e)
{
	FILE *f = ctx;

	fprintf(f, "%c %s", (char)c->kind, *c->path ? c->path : ".");
	if (c->kind == HU_CHG_MODIFY && c->what)
		fprintf(f, " [%s]", what_names(c->what));
	if (c->opaque)
		fputs(" opaque", f);
	fputc('\n', f);
	return 0;
}

/* The changes of @s over its bottom @base layers, one per line. */
static char *changes_of(const struct hu_stack *s, size_t base, bool exact,
			bool recursive, const struct hu_stack *old)
{
	struct hu_changes_opts o = { .base = base, .exact = exact,
				     .recursive = recursive, .old = old };
	struct hu_error e = { 0 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int rc = hu_changes_walk(s, &o, collect, f, &e);

	fclose(f);
	cr_assert_eq(rc, 0, "%s: %s", e.path, e.msg);
	return buf;
}

static char *diff2(const char *lower, const char *upper, bool exact,
		   bool recursive)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	char *d;

	cr_assert_eq(tu_stack(&s, &e, 2, lower, upper), 0, "%s: %s", e.path,
		     e.msg);
	d = changes_of(&s, 1, exact, recursive, NULL);
	hu_stack_close(&s);
	return d;
}

#define expect_changes tu_expect_str

/* ---- the listing --------------------------------------------------------- */

Test(changes, added_deleted_modified_in_canonical_order)
{
	tu_file("lo/a", "a");
	tu_file("lo/gone", "g");
	tu_file("lo/d/x", "x");
	tu_file("lo/d/y", "y");
	tu_file("lo/z", "z");
	tu_file("up/a", "A");
	tu_file("up/b", "new");
	tu_file("up/d/w", "new");
	tu_wh_overlay("up/gone");
	tu_wh_overlay("up/d/y");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	/* deletions of a directory's names first, then the rest; a merged
	 * directory whose metadata are unchanged is not listed itself */
	expect_changes(diff2("lo", "up", false, false),
		       "D gone\nM a\nA b\nD d/y\nA d/w\n");
}

Test(changes, no_changes_is_empty_and_root_mtime_counts)
{
	tu_file("lo/a", "a");
	tu_mkdir("up");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(diff2("lo", "up", true, false), "");
	fix_times("up", 1100000000);
	expect_changes(diff2("lo", "up", true, false), "M . [mtime]\n");
}

Test(changes, deleted_dir_is_one_line_unless_recursive)
{
	tu_file("lo/d/x", "");
	tu_file("lo/d/sub/y", "");
	tu_mkdir("up");
	tu_wh_overlay("up/d");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(diff2("lo", "up", false, false), "D d\n");
	expect_changes(diff2("lo", "up", false, true),
		       "D d\nD d/sub\nD d/sub/y\nD d/x\n");
}

Test(changes, added_dir_is_one_line_unless_recursive)
{
	tu_mkdir("lo");
	tu_file("up/n/a", "");
	tu_file("up/n/s/b", "");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(diff2("lo", "up", false, false), "A n\n");
	expect_changes(diff2("lo", "up", false, true),
		       "A n\nA n/a\nA n/s\nA n/s/b\n");
}

Test(changes, opaque_dir_replaces_what_was_beneath)
{
	tu_file("lo/d/old", "");
	tu_file("lo/d/same", "s");
	tu_opaque("up/d", "overlay");
	tu_file("up/d/same", "s");
	tu_file("up/d/new", "");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(diff2("lo", "up", true, false),
		       "M d opaque\nD d/old\nA d/new\n");
}

Test(changes, union_whiteout_and_opaque)
{
	tu_file("lo/a", "");
	tu_file("lo/o/x", "");
	tu_wh_union("up/a");
	tu_opaque("up/o", "union");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(diff2("lo", "up", true, false),
		       "D a\nM o opaque\nD o/x\n");
}

Test(changes, oci_upper_layer)
{
	tu_file("lo/a", "");
	tu_file("lo/d/x", "");
	tu_file("lo/keep", "");
	tu_file("up/.wh.a", "");
	tu_file("up/d/.wh..wh..opq", "");
	tu_file("up/d/y", "");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(diff2("lo", "up", true, false),
		       "D a\nM d opaque\nD d/x\nA d/y\n");
}

Test(changes, oci_whiteout_and_dir_in_one_layer_replace_the_lower_dir)
{
	tu_file("lo/d/old", "");
	tu_file("lo/e/x", "");
	tu_file("up/.wh.d", "");
	tu_file("up/d/new", "");
	tu_file("up/.wh.nothing-below", "");
	tu_mkdir("up/e");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(diff2("lo", "up", true, false),
		       "M d opaque\nD d/old\nA d/new\n");
}

Test(changes, overlay_xattr_whiteout_deletes)
{
	tu_file("lo/a", "");
	tu_file("lo/b", "");
	tu_file("up/a", "");
	tu_xattr("up/a", "trusted.overlay.whiteout", "");
	tu_wh_overlay("up/c");	/* nothing below: no change */
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(diff2("lo", "up", true, false), "D a\n");
}

/* ---- --exact ------------------------------------------------------------- */

Test(changes, exact_drops_copy_ups_that_changed_nothing)
{
	tu_file("lo/same", "data");
	tu_file("lo/chmod", "data");
	tu_file("lo/edit", "abcd");
	tu_file("lo/xattr", "data");
	tu_file("up/same", "data");
	tu_file("up/chmod", "data");
	tu_file("up/edit", "abce");	/* same size, other bytes */
	tu_file("up/xattr", "data");
	tu_xattr("up/xattr", "user.k", "v");
	tu_xattr("up/xattr", "trusted.overlay.origin", "private");
	set_mode("up/chmod", 0600);
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(diff2("lo", "up", false, false),
		       "M chmod [mode]\nM edit\nM same\nM xattr\n");
	expect_changes(diff2("lo", "up", true, false),
		       "M chmod [mode]\nM edit [content]\nM xattr [xattrs]\n");
}

Test(changes, private_xattrs_do_not_count)
{
	tu_file("lo/f", "data");
	tu_file("up/f", "data");
	tu_xattr("up/f", "trusted.overlay.origin", "x");
	tu_xattr("up/f", "user.overlay.impure", "y");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(diff2("lo", "up", true, false), "");
}

Test(changes, directories_compare_metadata_even_without_exact)
{
	tu_file("lo/d/x", "");
	tu_file("lo/e/x", "");
	tu_file("lo/f/x", "");
	tu_mkdir("up/d");
	tu_mkdir("up/e");
	tu_mkdir("up/f");
	tu_xattr("up/f", "user.k", "v");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	set_mode("up/e", 0700);
	expect_changes(diff2("lo", "up", false, false),
		       "M e [mode]\nM f [xattrs]\n");
}

Test(changes, retyped_path_lists_no_deletions_beneath)
{
	tu_file("lo/was-dir/x", "");
	tu_file("lo/was-file", "f");
	tu_file("up/was-dir", "now a file");
	tu_opaque("up/was-file", "overlay");
	tu_file("up/was-file/y", "");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(diff2("lo", "up", true, false),
		       "M was-dir [type]\nM was-file [type]\n");
	expect_changes(diff2("lo", "up", true, true),
		       "M was-dir [type]\nD was-dir/x\nM was-file [type]\n"
		       "A was-file/y\n");
}

Test(changes, symlinks_devices_and_fifos)
{
	tu_symlink("old", "lo/l");
	tu_symlink("abc", "lo/l2");
	tu_mknod("lo/c", S_IFCHR | 0600, 1, 3);
	tu_mknod("lo/p", S_IFIFO | 0600, 0, 0);
	tu_symlink("new", "up/l");
	tu_symlink("abc", "up/l2");
	tu_mknod("up/c", S_IFCHR | 0600, 1, 5);
	tu_mknod("up/p", S_IFIFO | 0600, 0, 0);
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(diff2("lo", "up", true, false),
		       "M c [content]\nM l [content]\n");
}

/* ---- redirects and metacopy ---------------------------------------------- */

Test(changes, renamed_directory_is_added_with_its_lower_contents)
{
	tu_file("lo/old/f", "f");
	tu_file("lo/old/s/g", "g");
	tu_wh_overlay("up/old");
	tu_mkdir("up/new");
	tu_xattr("up/new", "trusted.overlay.redirect", "old");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(diff2("lo", "up", true, false), "D old\nA new\n");
	expect_changes(diff2("lo", "up", true, true),
		       "D old\nD old/f\nD old/s\nD old/s/g\n"
		       "A new\nA new/f\nA new/s\nA new/s/g\n");
}

Test(changes, directory_moved_over_another_compares_by_identity)
{
	tu_file("lo/a/x", "x");
	tu_file("lo/a/same", "s");
	tu_file("lo/b/y", "y");
	tu_file("lo/b/same", "s");
	tu_wh_overlay("up/a");
	tu_mkdir("up/b");
	tu_xattr("up/b", "trusted.overlay.redirect", "/a");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	/* b/same: another file, of the same bytes: M without --exact */
	expect_changes(diff2("lo", "up", false, false),
		       "D a\nD b/y\nM b/same\nA b/x\n");
	expect_changes(diff2("lo", "up", true, false),
		       "D a\nD b/y\nA b/x\n");
}

Test(changes, metacopy_copy_up_has_only_its_metadata_changed)
{
	tu_file("lo/f", "the data");
	tu_file("lo/w", "");
	tu_file("up/f", "");
	tu_xattr("up/f", "trusted.overlay.metacopy", "");
	tu_wh_overlay("up/w");	/* detection does not see metacopy */
	fix_times("lo", 1000000000);
	/* a metacopy file keeps the size of its data */
	cr_assert_eq(truncate(tu_path("up/f"), 8), 0);
	fix_times("up", 1000000000);
	set_mode("up/f", 0600);
	expect_changes(diff2("lo", "up", true, false), "D w\nM f [mode]\n");
}

/* ---- several layers, base ------------------------------------------------ */

Test(changes, base_one_of_three_layers)
{
	struct hu_stack s;
	struct hu_error e = { 0 };

	tu_file("l0/a", "");
	tu_file("l0/b", "");
	tu_file("l0/d/x", "");
	tu_wh_overlay("l1/a");
	tu_file("l1/d/y", "");
	tu_file("l2/b", "B");
	tu_wh_overlay("l2/d/x");
	tu_file("l2/n", "");
	fix_times("l0", 1000000000);
	fix_times("l1", 1000000000);
	fix_times("l2", 1000000000);
	cr_assert_eq(tu_stack(&s, &e, 3, "l0", "l1", "l2"), 0);
	expect_changes(changes_of(&s, 1, true, false, NULL),
		       "D a\nM b [content]\nD d/x\nA d/y\nA n\n");
	expect_changes(changes_of(&s, 2, true, false, NULL),
		       "M b [content]\nD d/x\nA n\n");
	expect_changes(changes_of(&s, 3, true, false, NULL), "");
	expect_changes(changes_of(&s, 0, true, false, NULL),
		       "A b\nA d\nA n\n");
	hu_stack_close(&s);
}

Test(changes, base_beyond_the_stack_is_refused)
{
	struct hu_changes_opts o = { .base = 3 };
	struct hu_error e = { 0 };
	struct hu_stack s;

	tu_mkdir("l0");
	tu_mkdir("l1");
	cr_assert_eq(tu_stack(&s, &e, 2, "l0", "l1"), 0);
	cr_expect_eq(hu_changes_walk(&s, &o, collect, stdout, &e), -1);
	hu_error_clear(&e);
	hu_stack_close(&s);
}

/* ---- --trees ------------------------------------------------------------- */

static void open_tree(struct hu_stack *s, const char *rel)
{
	struct hu_stack_opts so = { .format = HU_FMT_NONE, .userxattr = true };
	struct hu_error e = { 0 };
	char *p = strdup(tu_path(rel));

	cr_assert_eq(hu_stack_open(s, &p, 1, &so, &e), 0, "%s", e.msg);
	free(p);
}

Test(changes, trees_read_markers_as_plain_entries)
{
	struct hu_stack old, new;

	tu_file("a/f", "1");
	tu_file("a/g", "1");
	tu_file("a/d/x", "");
	tu_file("b/f", "2");	/* same size and mtime: settled as equal */
	tu_file("b/g", "2");
	tu_file("b/d/x", "");
	tu_mknod("b/d/y", S_IFCHR, 0, 0);
	tu_file("b/.wh.g", "");
	fix_times("a", 1000000000);
	fix_times("b", 1000000000);
	cr_assert_eq(utimensat(AT_FDCWD, tu_path("b/g"),
			       (struct timespec[2]){ { 5, 0 }, { 5, 0 } }, 0),
		     0);
	open_tree(&old, "a");
	open_tree(&new, "b");
	expect_changes(changes_of(&new, 0, false, false, &old),
		       "A .wh.g\nA d/y\nM g [content,mtime]\n");
	expect_changes(changes_of(&new, 0, true, false, &old),
		       "A .wh.g\nA d/y\nM f [content]\n"
		       "M g [content,mtime]\n");
	hu_stack_close(&old);
	hu_stack_close(&new);
}

/* ---- the change set as an OCI layer -------------------------------------- */

/* The entries of tarball @rel, one per line: "path type [-> link]". */
static char *tar_listing(const char *rel)
{
	struct archive *a = archive_read_new();
	struct archive_entry *ent;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	archive_read_support_format_all(a);
	archive_read_support_filter_all(a);
	cr_assert_eq(archive_read_open_filename(a, tu_path(rel), 10240),
		     ARCHIVE_OK);
	while (archive_read_next_header(a, &ent) == ARCHIVE_OK) {
		const char *hl = archive_entry_hardlink(ent);

		fprintf(f, "%s", archive_entry_pathname(ent));
		if (hl)
			fprintf(f, " => %s", hl);
		fputc('\n', f);
	}
	archive_read_free(a);
	fclose(f);
	return buf;
}

static char *write_tar(const char *lower, const char *upper, bool exact,
		       bool markers)
{
	struct hu_changes_opts o = { .base = 1, .exact = exact };
	struct hu_tarout_opts to = { 0 };
	struct hu_digests d;
	struct hu_error e = { 0 };
	struct hu_tarout *t;
	struct hu_stack s;
	int fd;

	cr_assert_eq(tu_stack(&s, &e, 2, lower, upper), 0);
	fd = open(tu_path("out.tar"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert(fd >= 0);
	cr_assert_eq(hu_tarout_open(&t, fd, &to, &e), 0, "%s", e.msg);
	cr_assert_eq(hu_changes_write_tar(&s, &o, markers, t, &e), 0,
		     "%s: %s", e.path, e.msg);
	cr_assert_eq(hu_tarout_close(t, &d, &e), 0, "%s", e.msg);
	close(fd);
	hu_stack_close(&s);
	return tar_listing("out.tar");
}

Test(changes, oci_layer_whiteouts_first_then_entries_in_full)
{
	tu_file("lo/gone", "");
	tu_file("lo/gonedir/x", "");
	tu_file("lo/d/old", "");
	tu_file("lo/d/keep", "");
	tu_file("lo/f", "1");
	tu_wh_overlay("up/gone");
	tu_wh_overlay("up/gonedir");
	tu_wh_overlay("up/d/old");
	tu_file("up/d/new", "");
	tu_file("up/f", "2");
	tu_file("up/n/a", "");
	tu_file("up/n/b", "");
	cr_assert_eq(link(tu_path("up/n/a"), tu_path("up/n/c")), 0);
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(write_tar("lo", "up", true, false),
		       ".wh.gone\n.wh.gonedir\nd/.wh.old\nd/new\nf\nn/\n"
		       "n/a\nn/b\nn/c => n/a\n");
}

Test(changes, oci_layer_opaque_dir_as_whiteouts_or_marker)
{
	tu_file("lo/d/old", "");
	tu_file("lo/d/sub/x", "");
	tu_opaque("up/d", "overlay");
	tu_file("up/d/sub/y", "");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	/* by default: whiteouts of the lower names, as for any dir (d/sub,
	 * under an opaque dir, replaces the old d/sub too) */
	expect_changes(write_tar("lo", "up", true, false),
		       "d/\nd/.wh.old\nd/sub/\nd/sub/.wh.x\nd/sub/y\n");
	/* markers: .wh..wh..opq right after the dir, then all it holds */
	expect_changes(write_tar("lo", "up", true, true),
		       "d/\nd/.wh..wh..opq\nd/sub/\nd/sub/y\n");
}

Test(changes, oci_layer_renamed_dir_carries_its_lower_contents)
{
	tu_file("lo/old/f", "f");
	tu_wh_overlay("up/old");
	tu_mkdir("up/new");
	tu_xattr("up/new", "trusted.overlay.redirect", "/old");
	fix_times("lo", 1000000000);
	fix_times("up", 1000000000);
	expect_changes(write_tar("lo", "up", true, false),
		       ".wh.old\nnew/\nnew/f\n");
}

Test(changes, oci_layer_root_when_its_metadata_changed)
{
	tu_file("lo/a", "");
	tu_file("up/b", "");
	fix_times("lo", 1000000000);
	fix_times("up", 1100000000);
	expect_changes(write_tar("lo", "up", true, false), "./\nb\n");
}
