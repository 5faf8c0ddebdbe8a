/* SPDX-License-Identifier: MIT */
/* The merged view: the lookup and listing rules of each format. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "internal.h"

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(view, .fini = teardown);

static char *dump2(const char *lower, const char *upper)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	char *d;

	cr_assert_eq(tu_stack(&s, &e, 2, lower, upper), 0, "%s: %s",
		     e.path, e.msg);
	d = tu_view_dump(&s);
	hu_stack_close(&s);
	return d;
}

#define expect_view tu_expect_str

Test(view, upper_file_wins_and_dirs_merge)
{
	tu_file("lo/a", "lower");
	tu_file("lo/d/x", "");
	tu_file("up/a", "upper");
	tu_file("up/d/y", "");
	expect_view(dump2("lo", "up"), "a:1\nd:1\nd/x:0\nd/y:1\n");
}

Test(view, union_whiteout_hides_lower_name)
{
	tu_file("lo/a", "");
	tu_file("lo/d/x", "");
	tu_mkdir("up");
	tu_wh_union("up/a");
	tu_wh_union("up/d");
	expect_view(dump2("lo", "up"), "");
}

Test(view, symlink_to_union_whiteout_without_xattr_is_an_entry)
{
	tu_file("lo/a", "");
	tu_symlink("(union-whiteout)", "up/a");
	tu_wh_union("up/other");	/* makes the layer union format */
	expect_view(dump2("lo", "up"), "a:1\n");
}

Test(view, union_whiteout_xattr_other_than_y_is_not_a_whiteout)
{
	tu_file("lo/a", "");
	tu_symlink("(union-whiteout)", "up/a");
	tu_xattr("up/a", "trusted.union.whiteout", "n");
	tu_wh_union("up/b");
	expect_view(dump2("lo", "up"), "a:1\n");
}

Test(view, opaque_union_dir_hides_lower_contents)
{
	tu_file("lo/d/x", "");
	tu_opaque("up/d", "union");
	tu_file("up/d/y", "");
	expect_view(dump2("lo", "up"), "d:1\nd/y:1\n");
}

Test(view, overlay_char_0_0_is_a_whiteout_but_0_1_and_block_are_not)
{
	tu_file("lo/a", "");
	tu_file("lo/b", "");
	tu_file("lo/c", "");
	tu_wh_overlay("up/a");
	tu_mknod("up/b", S_IFCHR, 0, 1);
	tu_mknod("up/c", S_IFBLK, 0, 0);
	expect_view(dump2("lo", "up"), "b:1\nc:1\n");
}

Test(view, whiteout_in_dir_that_merges_with_nothing_is_not_an_entry)
{
	tu_mkdir("lo");
	tu_wh_overlay("up/new/gone");
	tu_file("up/new/kept", "");
	expect_view(dump2("lo", "up"), "new:1\nnew/kept:1\n");
}

Test(view, upper_dir_over_lower_file_does_not_merge)
{
	tu_file("lo/d", "file");
	tu_file("lo/e/x", "");
	tu_file("up/d/y", "");
	tu_file("up/e", "file");
	expect_view(dump2("lo", "up"), "d:1\nd/y:1\ne:1\n");
}

Test(view, overlay_opaque_y_hides_but_x_and_n_do_not)
{
	tu_file("lo/y/a", "");
	tu_file("lo/x/a", "");
	tu_file("lo/n/a", "");
	tu_opaque("up/y", "overlay");
	tu_mkdir("up/x");
	tu_xattr("up/x", "trusted.overlay.opaque", "x");
	tu_mkdir("up/n");
	tu_xattr("up/n", "trusted.overlay.opaque", "n");
	expect_view(dump2("lo", "up"),
		    "n:1\nn/a:0\nx:1\nx/a:0\ny:1\n");
}

Test(view, oci_whiteouts_and_opaque_marker)
{
	tu_file("lo/a", "");
	tu_file("lo/d/x", "");
	tu_file("lo/keep", "");
	tu_file("up/.wh.a", "");
	tu_file("up/d/.wh..wh..opq", "");
	tu_file("up/d/y", "");
	expect_view(dump2("lo", "up"), "d:1\nd/y:1\nkeep:0\n");
}

Test(view, oci_whiteout_only_affects_lower_layers)
{
	tu_file("lo/a/old", "");
	tu_file("up/.wh.a", "");
	tu_file("up/a/new", "");
	expect_view(dump2("lo", "up"), "a:1\na/new:1\n");
}

Test(view, oci_wh_files_are_ordinary_in_a_union_layer)
{
	tu_file("lo/a", "");
	tu_file("up/.wh.a", "");
	tu_opaque("up/o", "union");
	expect_view(dump2("lo", "up"), ".wh.a:1\na:0\no:1\n");
}

Test(view, three_layers_middle_whiteout_and_reappearance)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	char *d;

	tu_file("l0/a", "");
	tu_file("l0/d/x", "");
	tu_wh_overlay("l1/a");
	tu_wh_overlay("l1/d");
	tu_file("l2/d/z", "");
	cr_assert_eq(tu_stack(&s, &e, 3, "l0", "l1", "l2"), 0);
	d = tu_view_dump(&s);
	cr_expect_str_eq(d, "d:2\nd/z:2\n");
	free(d);
	hu_stack_close(&s);
}

/* A middle layer's opaque directory: the bottom's entries in it are
 * hidden, the top's merge with the middle's.  Two layers never reach this
 * rule (the lookup in the layers below the topmost directory). */
static void opaque_middle(const char *fmt)
{
	struct hu_stack s;
	struct hu_error e = { 0 };

	tu_file("l0/d/bottom", "");
	tu_file("l0/d/sub/bottom", "");
	tu_file("l0/e/bottom", "");
	tu_file("l0/keep", "");
	if (strcmp(fmt, "oci") == 0) {
		tu_file("l1/d/.wh..wh..opq", "");
		tu_file("l1/e/.wh..wh..opq", "");
	} else {
		tu_opaque("l1/d", fmt);
		tu_opaque("l1/e", fmt);
	}
	tu_file("l1/d/middle", "");
	tu_mkdir("l1/d/sub");
	tu_file("l1/e/middle", "");
	tu_file("l2/d/top", "");
	tu_file("l2/d/sub/top", "");
	cr_assert_eq(tu_stack(&s, &e, 3, "l0", "l1", "l2"), 0, "%s: %s",
		     e.path, e.msg);
	expect_view(tu_view_dump(&s),
		    "d:2\nd/middle:1\nd/sub:2\nd/sub/top:2\nd/top:2\n"
		    "e:1\ne/middle:1\nkeep:0\n");
	hu_stack_close(&s);
}

Test(view, three_layers_opaque_middle_dir_union)
{
	opaque_middle("union");
}

Test(view, three_layers_opaque_middle_dir_overlay)
{
	opaque_middle("overlay");
}

Test(view, three_layers_opaque_middle_dir_oci)
{
	opaque_middle("oci");
}

Test(view, overlay_relative_redirect_merges_the_old_name)
{
	tu_file("lo/old/f", "");
	tu_wh_overlay("up/old");
	tu_mkdir("up/new");
	tu_xattr("up/new", "trusted.overlay.redirect", "old");
	tu_file("up/new/g", "");
	expect_view(dump2("lo", "up"), "new:1\nnew/f:0\nnew/g:1\n");
}

Test(view, overlay_absolute_redirect_from_layer_root)
{
	tu_file("lo/a/b/f", "");
	tu_mkdir("up/a");
	tu_wh_overlay("up/a/b");
	tu_mkdir("up/c/moved");
	tu_xattr("up/c/moved", "trusted.overlay.redirect", "/a/b");
	expect_view(dump2("lo", "up"), "a:1\nc:1\nc/moved:1\nc/moved/f:0\n");
}

Test(view, redirect_with_dotdot_is_ignored)
{
	tu_file("lo/d/f", "");
	tu_mkdir("up/e");
	tu_xattr("up/e", "trusted.overlay.redirect", "/../d");
	expect_view(dump2("lo", "up"), "d:0\nd/f:0\ne:1\n");
}

Test(view, names_are_sorted_bytewise)
{
	tu_file("lo/b", "");
	tu_file("lo/\xc3\xa9", "");
	tu_file("up/B", "");
	tu_file("up/a", "");
	tu_wh_overlay("up/zz");
	expect_view(dump2("lo", "up"), "B:1\na:1\nb:0\n\xc3\xa9:0\n");
}

Test(view, opaque_mark_on_a_layer_root_is_ignored_as_by_the_kernel)
{
	tu_file("lo/a", "");
	tu_opaque("up", "overlay");
	tu_file("up/b", "");
	expect_view(dump2("lo", "up"), "a:0\nb:1\n");
}

Test(view, metacopy_relative_redirect_names_the_data_file)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	struct hu_merge_opts mo = { 0 };
	struct hu_merge_stats st;

	tu_file("lo/orig", "lower data");
	tu_file("up/renamed", "");
	cr_assert_eq(truncate(tu_path("up/renamed"), 10), 0);
	tu_xattr("up/renamed", "trusted.overlay.metacopy", "");
	tu_xattr("up/renamed", "trusted.overlay.redirect", "orig");
	tu_wh_overlay("up/orig");
	cr_assert_eq(tu_stack(&s, &e, 2, "lo", "up"), 0);
	free(tu_view_dump(&s));	/* the data, with and without the lister */
	cr_assert_eq(hu_merge_tree(&s, tu_path("out"), &mo, &st, &e), 0,
		     "%s", e.msg);
	hu_stack_close(&s);
	cr_expect_str_eq(tu_read("out/renamed"), "lower data");
	cr_expect(!tu_exists("out/orig"));
}

Test(view, xattr_whiteouts_hide_names_in_any_overlay_layer_like_the_kernel)
{
	tu_file("lo/a", "");
	tu_file("lo/d/b", "");
	tu_file("up/a", "");
	tu_xattr("up/a", "trusted.overlay.whiteout", "");
	tu_file("up/d/b", "");
	tu_xattr("up/d/b", "trusted.overlay.whiteout", "");
	tu_file("up/d/kept", "not empty");
	tu_xattr("up/d/kept", "trusted.overlay.whiteout", "");
	tu_wh_overlay("up/other");	/* xattr whiteouts alone do not make
					 * a layer's format known */
	expect_view(dump2("lo", "up"), "d:1\nd/kept:1\n");
}

/* View directory @path of 3-layer stack lo, mid, up (kept open in @s). */
static struct hu_vdir *open3(struct hu_stack *s, const char *name)
{
	struct hu_error e = { 0 };
	struct hu_vdir *root, *d = NULL;
	struct hu_ventry ent;

	cr_assert_eq(tu_stack(s, &e, 3, "lo", "mid", "up"), 0, "%s: %s",
		     e.path, e.msg);
	cr_assert_eq(hu_vdir_open_root(s, &root, &e), 0, "%s", e.msg);
	cr_assert_eq(hu_vdir_lookup(root, name, &ent, &e), 1, "%s", e.msg);
	cr_assert_eq(hu_vdir_open_child(root, &ent, &d, &e), 0, "%s", e.msg);
	hu_vdir_close(root);
	return d;
}

Test(view, redirect_keeps_exactly_the_directories_beneath)
{
	struct hu_error e = { 0 };
	struct hu_stack s;
	struct hu_vdir *d;

	/* up/b reaches mid/a, whose own redirect reaches lo/z; lo/a is
	 * another directory that merges with nothing in the view */
	tu_file("lo/z/x", "");
	tu_file("lo/a/decoy", "");
	tu_file("mid/a/f", "");
	tu_xattr("mid/a", "trusted.overlay.redirect", "/z");
	tu_mkdir("up/b");
	tu_xattr("up/b", "trusted.overlay.redirect", "/a");
	tu_wh_overlay("up/a");
	d = open3(&s, "b");
	cr_expect_str_eq(hu_vdir_layer_path(d, 1), "a");
	cr_expect_str_eq(hu_vdir_layer_path(d, 0), "z");
	cr_expect_null(hu_vdir_layer_path(d, 3));
	/* what a directory of mid needs to merge with lo/z as b does */
	cr_expect_eq(hu_vdir_redirect_keeps(d, 1, "/z", &e), 1, "%s", e.msg);
	cr_expect_eq(hu_vdir_redirect_keeps(d, 1, "/a", &e), 0);
	cr_expect_eq(hu_vdir_redirect_keeps(d, 1, "/none", &e), 0);
	cr_expect_eq(hu_vdir_redirect_keeps(d, 1, "z", &e), 0);
	/* from up: mid/a and, through its redirect, lo/z */
	cr_expect_eq(hu_vdir_redirect_keeps(d, 2, "/a", &e), 1, "%s", e.msg);
	cr_expect_eq(hu_vdir_redirect_keeps(d, 2, "/z", &e), 0);
	hu_vdir_close(d);
	hu_stack_close(&s);
}

/* hu_vdir_open_child right after hu_vdir_lookup reuses what the lookup saw
 * of each layer, once: a second open of the same entry, after a layer
 * changed (merge --into makes the target's directory between the two),
 * asks the layers again.  A redirect or an opaque mark among other xattrs
 * still steers the lookup (one xattr listing answers both), and that
 * listing tells which directories hold no xattr at all. */
Test(view, open_child_reuses_the_lookup_once)
{
	struct hu_error e = { 0 };
	struct hu_vdir *root, *c;
	struct hu_ventry ent;
	struct hu_stack s;

	tu_file("lo/d/x", "");
	tu_mkdir("up/d");
	tu_mkdir("mid/keep");
	tu_file("lo/keep/hidden", "");
	tu_xattr("mid/keep", "user.other", "1");
	tu_xattr("mid/keep", "trusted.overlay.origin", "o");
	tu_xattr("mid/keep", "trusted.overlay.opaque", "y");
	tu_mkdir("up/keep");
	tu_file("lo/z/y", "");
	tu_mkdir("mid/moved");
	tu_xattr("mid/moved", "user.other", "1");
	tu_xattr("mid/moved", "trusted.overlay.redirect", "/z");
	tu_wh_overlay("mid/z");
	tu_mkdir("up/moved");
	cr_assert_eq(tu_stack(&s, &e, 3, "lo", "mid", "up"), 0, "%s: %s",
		     e.path, e.msg);
	cr_assert_eq(hu_vdir_open_root(&s, &root, &e), 0, "%s", e.msg);
	cr_assert_eq(hu_vdir_lookup(root, "d", &ent, &e), 1, "%s", e.msg);
	cr_assert_eq(hu_vdir_open_child(root, &ent, &c, &e), 0, "%s", e.msg);
	cr_expect_eq(hu_vdir_width(c), 2);	/* up/d, lo/d */
	cr_expect(hu_vdir_layer_bare(c, 2), "up/d holds no xattr");
	cr_expect_not(hu_vdir_layer_bare(c, 0), "the bottom is not listed");
	hu_vdir_close(c);
	tu_mkdir("mid/d");
	cr_assert_eq(hu_vdir_open_child(root, &ent, &c, &e), 0, "%s", e.msg);
	cr_expect_eq(hu_vdir_width(c), 3, "the new mid/d is not seen");
	hu_vdir_close(c);

	cr_assert_eq(hu_vdir_lookup(root, "keep", &ent, &e), 1, "%s", e.msg);
	cr_assert_eq(hu_vdir_open_child(root, &ent, &c, &e), 0, "%s", e.msg);
	cr_expect_eq(hu_vdir_width(c), 2, "mid/keep is opaque");
	hu_vdir_close(c);
	cr_assert_eq(hu_vdir_lookup(root, "moved", &ent, &e), 1, "%s", e.msg);
	cr_assert_eq(hu_vdir_open_child(root, &ent, &c, &e), 0, "%s", e.msg);
	cr_expect_eq(hu_vdir_width(c), 3, "mid/moved reaches lo/z");
	cr_expect_not(hu_vdir_layer_bare(c, 1), "mid/moved has xattrs");
	cr_expect_str_eq(hu_vdir_layer_path(c, 0), "z");
	hu_vdir_close(c);
	hu_vdir_close(root);
	hu_stack_close(&s);
}

/* A directory merge --into makes in the target joins the open view
 * directory in its place, as a lookup would find it; where a redirect
 * steers the lookup, the caller is told to open it again. */
/* View directory @name of 3-layer stack lo, mid, up (kept open in @s),
 * its parent kept open in *@root. */
static struct hu_vdir *open3_in(struct hu_stack *s, struct hu_vdir **root,
				const char *name)
{
	struct hu_error e = { 0 };
	struct hu_vdir *d = NULL;
	struct hu_ventry ent;

	cr_assert_eq(tu_stack(s, &e, 3, "lo", "mid", "up"), 0, "%s: %s",
		     e.path, e.msg);
	cr_assert_eq(hu_vdir_open_root(s, root, &e), 0, "%s", e.msg);
	cr_assert_eq(hu_vdir_lookup(*root, name, &ent, &e), 1, "%s", e.msg);
	cr_assert_eq(hu_vdir_open_child(*root, &ent, &d, &e), 0, "%s", e.msg);
	return d;
}

Test(view, a_new_plain_directory_joins_in_its_place)
{
	struct hu_error e = { 0 };
	const struct hu_ventry *ents;
	struct hu_vdir *d, *root;
	struct hu_ventry ent;
	struct hu_stack s;
	size_t n;

	tu_file("lo/d/x", "");
	tu_file("up/d/y", "");
	tu_mkdir("mid");
	tu_file("lo/r/z", "");
	tu_mkdir("up/moved");
	tu_xattr("up/moved", "trusted.overlay.redirect", "/r");
	d = open3_in(&s, &root, "d");
	cr_expect_eq(hu_vdir_width(d), 2);
	cr_expect_eq(hu_vdir_join(d, 1, "d", &e), -1, "mid/d is not there");
	hu_error_clear(&e);
	tu_mkdir("mid/d");
	cr_assert_eq(hu_vdir_lookup(d, "y", &ent, &e), 1, "%s", e.msg);
	cr_assert_eq(hu_vdir_join(d, 1, "d", &e), 1, "%s", e.msg);
	cr_expect_eq(hu_vdir_width(d), 3);
	/* a lookup after it asks the three (ASan: of a big enough record) */
	cr_expect_eq(hu_vdir_lookup(d, "x", &ent, &e), 1, "%s", e.msg);
	cr_expect_geq(hu_vdir_layer_fd(d, 1), 0);
	cr_expect_eq(hu_vdir_bottom_layer(d), 0);
	cr_assert_eq(hu_vdir_list(d, &ents, &n, &e), 0, "%s", e.msg);
	cr_expect_eq(n, 2);	/* x and y, through all three */
	hu_vdir_close(d);
	hu_vdir_close(root);
	hu_stack_close(&s);
	d = open3_in(&s, &root, "moved");
	tu_mkdir("mid/moved");
	cr_expect_eq(hu_vdir_join(d, 1, "moved", &e), 0, "%s", e.msg);
	cr_expect_eq(hu_vdir_width(d), 2);
	hu_vdir_close(d);
	hu_vdir_close(root);
	hu_stack_close(&s);
}

/* Child @name of @root, opened lazily, finds no x of the bottom layer's
 * and stays two layer directories wide. */
static void expect_bottom_none(struct hu_vdir *root, const char *name)
{
	struct hu_error e = { 0 };
	struct hu_ventry ent;
	struct hu_vdir *d;

	cr_assert_eq(hu_vdir_lookup(root, name, &ent, &e), 1, "%s", e.msg);
	cr_assert_eq(hu_vdir_open_child_lazy(root, &ent, &d, &e), 0, "%s",
		     e.msg);
	cr_expect_eq(hu_vdir_lookup(d, "x", &ent, &e), 0, "%s: %s", name,
		     e.msg);
	cr_expect_eq(hu_vdir_width(d), 2, "%s", name);
	hu_vdir_close(d);
}

/* A directory opened lazily leaves the bottom layer's directory for
 * whatever asks for it first: a name lookup that gets there, the listing,
 * a child's lookup; it is looked up by its path, as the lookup would have
 * found it (a symlink there is no directory, an opaque mark above stops
 * it), and a child of a directory still waiting waits too. */
Test(view, a_lazy_directory_looks_the_bottom_up_when_asked)
{
	struct hu_error e = { 0 };
	const struct hu_ventry *ents;
	struct hu_vdir *root, *d, *c;
	struct hu_ventry ent;
	struct hu_stack s;
	size_t n;

	tu_file("lo/d/x", "");
	tu_file("lo/d/e/z", "");
	tu_file("lo/d/f/w", "");
	tu_mkdir("mid/d/f");
	tu_mkdir("up/d/e");
	tu_mkdir("up/d/f");
	tu_file("lo/real/x", "");
	tu_symlink("real", "lo/s");
	tu_mkdir("mid/s");
	tu_mkdir("up/s");
	tu_file("lo/o/x", "");
	tu_mkdir("mid/o");
	tu_xattr("mid/o", "trusted.overlay.opaque", "y");
	tu_mkdir("up/o");
	cr_assert_eq(tu_stack(&s, &e, 3, "lo", "mid", "up"), 0, "%s: %s",
		     e.path, e.msg);
	cr_assert_eq(hu_vdir_open_root(&s, &root, &e), 0, "%s", e.msg);

	cr_assert_eq(hu_vdir_lookup(root, "d", &ent, &e), 1, "%s", e.msg);
	cr_assert_eq(hu_vdir_open_child_lazy(root, &ent, &d, &e), 0, "%s",
		     e.msg);
	cr_expect_eq(hu_vdir_width(d), 2, "lo/d waits");
	cr_expect(hu_vdir_is_merged(d));
	/* up/d/f and mid/d/f merge: lo/d/f waits too, lo/d still unasked */
	cr_assert_eq(hu_vdir_lookup(d, "f", &ent, &e), 1, "%s", e.msg);
	cr_assert_eq(hu_vdir_open_child_lazy(d, &ent, &c, &e), 0, "%s", e.msg);
	cr_expect_eq(hu_vdir_width(c), 2);
	cr_expect_eq(hu_vdir_width(d), 2);
	cr_assert_eq(hu_vdir_lookup(c, "w", &ent, &e), 1, "%s", e.msg);
	cr_expect_eq(ent.layer, 0);
	cr_expect_eq(hu_vdir_width(c), 3, "lo/d/f, asked for w");
	hu_vdir_close(c);
	/* up/d/e merges with lo/d/e alone: lo/d is asked now */
	cr_assert_eq(hu_vdir_lookup(d, "e", &ent, &e), 1, "%s", e.msg);
	cr_assert_eq(hu_vdir_open_child_lazy(d, &ent, &c, &e), 0, "%s", e.msg);
	cr_expect_eq(hu_vdir_width(d), 3);
	cr_expect_eq(hu_vdir_width(c), 2, "up/d/e and lo/d/e");
	cr_assert_eq(hu_vdir_list(c, &ents, &n, &e), 0, "%s", e.msg);
	cr_expect_eq(n, 1);
	hu_vdir_close(c);
	cr_assert_eq(hu_vdir_lookup(d, "x", &ent, &e), 1, "%s", e.msg);
	cr_expect_eq(ent.layer, 0);
	hu_vdir_close(d);

	/* the listing asks too */
	cr_assert_eq(hu_vdir_lookup(root, "d", &ent, &e), 1, "%s", e.msg);
	cr_assert_eq(hu_vdir_open_child_lazy(root, &ent, &d, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(hu_vdir_list(d, &ents, &n, &e), 0, "%s", e.msg);
	cr_expect_eq(n, 3, "e, f, x");
	hu_vdir_close(d);

	/* lo/s is a symlink: no directory of the view's */
	expect_bottom_none(root, "s");
	/* mid/o is opaque: lo/o is never asked */
	expect_bottom_none(root, "o");
	hu_vdir_close(root);
	hu_stack_close(&s);
}
