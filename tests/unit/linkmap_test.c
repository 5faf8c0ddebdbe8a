/* SPDX-License-Identifier: MIT */
/* The hard-link rule: the first name of a shared inode carries the data,
 * each later name links to it; nothing else enters the map. */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/stat.h>

#include "common/linkmap.h"

static struct stat inode(mode_t mode, nlink_t nlink, dev_t dev, ino_t ino)
{
	struct stat st;

	memset(&st, 0, sizeof(st));
	st.st_mode = mode;
	st.st_nlink = nlink;
	st.st_dev = dev;
	st.st_ino = ino;
	return st;
}

Test(linkrule, first_name_recorded_later_names_link_to_it)
{
	struct hu_linkmap m = { 0 };
	struct stat st = inode(S_IFREG | 0644, 3, 1, 42);
	const char *first = "junk";

	cr_assert_eq(hu_linkmap_first(&m, &st, NULL, "a/x", &first), 0);
	cr_expect_null(first);
	cr_assert_eq(hu_linkmap_first(&m, &st, NULL, "b/y", &first), 0);
	cr_expect_str_eq(first, "a/x");
	cr_assert_eq(hu_linkmap_first(&m, &st, "c", "z", &first), 0);
	cr_expect_str_eq(first, "a/x");
	cr_expect_str_eq(hu_linkmap_first_of(&m, &st), "a/x");
	cr_expect_eq(m.used, 1);
	hu_linkmap_free(&m);
}

Test(linkrule, records_dir_and_name_joined)
{
	struct hu_linkmap m = { 0 };
	struct stat st = inode(S_IFLNK | 0777, 2, 7, 9);
	const char *first;

	cr_assert_eq(hu_linkmap_first(&m, &st, "d/e", "f", &first), 0);
	cr_expect_null(first);
	cr_expect_str_eq(hu_linkmap_first_of(&m, &st), "d/e/f");
	hu_linkmap_free(&m);
}

/* The map holds only inodes with other names, never directories: they
 * are always written in full. */
Test(linkrule, single_names_and_directories_stay_out)
{
	struct hu_linkmap m = { 0 };
	struct stat one = inode(S_IFREG | 0644, 1, 1, 5);
	struct stat dir = inode(S_IFDIR | 0755, 4, 1, 6);
	const char *first;

	for (int i = 0; i < 2; i++) {
		cr_assert_eq(hu_linkmap_first(&m, &one, NULL, "f", &first), 0);
		cr_expect_null(first);
		cr_assert_eq(hu_linkmap_first(&m, &dir, NULL, "d", &first), 0);
		cr_expect_null(first);
	}
	cr_expect_eq(m.used, 0);
	cr_expect_null(hu_linkmap_first_of(&m, &one));
	cr_expect_not(hu_linkmap_shared(&one));
	cr_expect_not(hu_linkmap_shared(&dir));
	hu_linkmap_free(&m);
}

/* One inode number on two devices (two layers) is two groups. */
Test(linkrule, device_and_inode_make_the_group)
{
	struct hu_linkmap m = { 0 };
	struct stat a = inode(S_IFREG | 0644, 2, 1, 5);
	struct stat b = inode(S_IFREG | 0644, 2, 2, 5);
	const char *first;

	cr_assert_eq(hu_linkmap_first(&m, &a, NULL, "a", &first), 0);
	cr_assert_eq(hu_linkmap_first(&m, &b, NULL, "b", &first), 0);
	cr_expect_null(first);
	cr_expect_str_eq(hu_linkmap_first_of(&m, &a), "a");
	cr_expect_str_eq(hu_linkmap_first_of(&m, &b), "b");
	hu_linkmap_free(&m);
}

/* A tree built under a temporary name, then renamed: the names recorded
 * below it move with it; a name that only begins alike does not. */
Test(linkrule, names_move_with_their_tree)
{
	struct hu_linkmap m = { 0 };
	struct stat a = inode(S_IFREG | 0644, 2, 1, 5);
	struct stat b = inode(S_IFREG | 0644, 2, 1, 6);
	struct stat c = inode(S_IFREG | 0644, 2, 1, 7);
	const char *first;

	cr_assert_eq(hu_linkmap_first(&m, &a, "d/.tmp/x", "a", &first), 0);
	cr_assert_eq(hu_linkmap_first(&m, &b, "d/.tmp2", "b", &first), 0);
	cr_assert_eq(hu_linkmap_first(&m, &c, "d", ".tmp", &first), 0);
	cr_assert_eq(hu_linkmap_move(&m, "d/.tmp", "d/n"), 0);
	cr_expect_str_eq(hu_linkmap_first_of(&m, &a), "d/n/x/a");
	cr_expect_str_eq(hu_linkmap_first_of(&m, &b), "d/.tmp2/b");
	cr_expect_str_eq(hu_linkmap_first_of(&m, &c), "d/.tmp");
	hu_linkmap_free(&m);
}
