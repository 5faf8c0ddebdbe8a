/* SPDX-License-Identifier: MIT */
/* What killed runs left, moved aside and removed after the work
 * (aside.c): never what a live run holds. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "internal.h"
#include "testutil.h"

/* The entries of "d" moved aside. */
static int aside_in_d(void)
{
	DIR *d = opendir(tu_path("d"));
	struct dirent *de;
	int n = 0;

	cr_assert_not_null(d);
	while ((de = readdir(d)))
		n += hu_is_aside_name(de->d_name);
	closedir(d);
	return n;
}

static int dir_fd(void)
{
	int fd = open(tu_path("d"), O_RDONLY | O_DIRECTORY);

	cr_assert_geq(fd, 0);
	return fd;
}

/* A locked hold on @rel, as a live run's: its fd. */
static int hold(const char *rel)
{
	int fd = open(tu_path(rel), O_RDONLY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
	return fd;
}

Test(aside, names, .fini = tu_cleanup)
{
	cr_expect(hu_is_aside_name(".hunion-gone-0123456789ab"));
	cr_expect_not(hu_is_aside_name(".hunion-gone-0123456789AB"));
	cr_expect_not(hu_is_aside_name(".hunion-gone-0123456789a"));
	cr_expect_not(hu_is_aside_name(".hunion-gone-0123456789abc"));
	cr_expect_not(hu_is_aside_name("hunion-gone-0123456789ab"));
}

/* Moved in one rename, whole, and removed only by hu_aside_remove(). */
Test(aside, moved_whole_then_removed, .fini = tu_cleanup)
{
	struct hu_error e = { 0 };
	int dfd;

	tu_file("d/.x.hunion-abcdef/sub/f", "data");
	tu_file("d/keep", "keep");
	dfd = dir_fd();
	cr_assert_eq(hu_aside_move(dfd, ".x.hunion-abcdef", -1, "d"), 0);
	cr_expect_not(tu_exists("d/.x.hunion-abcdef"));
	cr_expect_eq(aside_in_d(), 1);
	cr_expect_eq(hu_aside_pending(), 1);
	cr_assert_eq(hu_aside_remove(NULL, NULL, NULL, &e), 0, "%s", e.msg);
	cr_expect_eq(aside_in_d(), 0);
	cr_expect(tu_exists("d/keep"));
	cr_expect_eq(hu_aside_pending(), 0);
	close(dfd);
}

/* What a live run holds is never moved; what a live mover holds is never
 * taken over; what a dead mover left is. */
Test(aside, live_holds_are_never_taken, .fini = tu_cleanup)
{
	struct hu_error e = { 0 };
	int dfd, live, mover;

	tu_file("d/held/f", "a live run's");
	tu_file("d/.hunion-gone-00000000000a/f", "a live mover's");
	tu_file("d/.hunion-gone-00000000000b/f", "a dead mover's");
	dfd = dir_fd();
	live = hold("d/held");
	mover = hold("d/.hunion-gone-00000000000a");
	cr_expect_neq(hu_aside_move(dfd, "held", -1, "d"), 0);
	cr_expect(tu_exists("d/held/f"));
	cr_expect(hu_aside_adopt(dfd, ".hunion-gone-00000000000a", "d"));
	cr_expect(hu_aside_adopt(dfd, ".hunion-gone-00000000000b", "d"));
	cr_expect_not(hu_aside_adopt(dfd, "held", "d"));
	cr_expect_eq(hu_aside_pending(), 1);
	cr_assert_eq(hu_aside_remove(NULL, NULL, NULL, &e), 0, "%s", e.msg);
	cr_expect(tu_exists("d/held/f"));
	cr_expect(tu_exists("d/.hunion-gone-00000000000a/f"));
	cr_expect_not(tu_exists("d/.hunion-gone-00000000000b"));
	close(mover);
	close(live);
	close(dfd);
}

/* A dry run moves nothing. */
Test(aside, dry_run_moves_nothing, .fini = tu_cleanup)
{
	int dfd;

	tu_file("d/.x.hunion-abcdef", "data");
	dfd = dir_fd();
	hu_wr_set_dry_run(true);
	cr_expect_neq(hu_aside_move(dfd, ".x.hunion-abcdef", -1, "d"), 0);
	hu_wr_set_dry_run(false);
	cr_expect(tu_exists("d/.x.hunion-abcdef"));
	cr_expect_eq(hu_aside_pending(), 0);
	close(dfd);
}
