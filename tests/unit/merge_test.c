/* SPDX-License-Identifier: MIT */
/* merge -o: what the new tree holds, and that failures leave nothing. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "testutil.h"

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(merge, .fini = teardown);

static int merge(const char *out, struct hu_merge_opts *mo,
		 struct hu_error *e, int n, const char *l0, const char *l1)
{
	struct hu_merge_opts none = { 0 };
	struct hu_merge_stats st;
	struct hu_stack s;
	int rc;

	if (tu_stack(&s, e, n, l0, l1) < 0)
		return -2;
	rc = hu_merge_tree(&s, tu_path(out), mo ? mo : &none, &st, e);
	hu_stack_close(&s);
	return rc;
}

static size_t dir_entries(const char *rel)
{
	DIR *d = opendir(tu_path(rel));
	size_t n = 0;

	cr_assert_not_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n - 2;
}

Test(merge, keeps_mode_owner_times_and_public_xattrs)
{
	struct hu_error e = { 0 };
	struct timespec ts[2] = { { 1000, 5 }, { 2000, 123456789 } };
	struct stat st;
	char v[16];

	tu_file("lo/f", "data");
	cr_assert_eq(chown(tu_path("lo/f"), 1234, 5678), 0);
	cr_assert_eq(chmod(tu_path("lo/f"), 04751), 0);
	tu_xattr("lo/f", "user.keep", "1");
	tu_xattr("lo/f", "trusted.overlay.origin", "x");
	tu_xattr("lo/f", "trusted.union.anything", "x");
	cr_assert_eq(utimensat(AT_FDCWD, tu_path("lo/f"), ts, 0), 0);
	tu_mkdir("up");
	cr_assert_eq(merge("out", NULL, &e, 2, "lo", "up"), 0, "%s", e.msg);
	cr_assert_eq(lstat(tu_path("out/f"), &st), 0);
	cr_expect_eq(st.st_mode & 07777, 04751);
	cr_expect_eq(st.st_uid, 1234);
	cr_expect_eq(st.st_gid, 5678);
	cr_expect_eq(st.st_mtim.tv_sec, 2000);
	cr_expect_eq(st.st_mtim.tv_nsec, 123456789);
	cr_expect_str_eq(tu_read("out/f"), "data");
	cr_expect_eq(lgetxattr(tu_path("out/f"), "user.keep", v, sizeof(v)), 1);
	cr_expect_eq(lgetxattr(tu_path("out/f"), "trusted.overlay.origin", v,
			       sizeof(v)), -1);
	cr_expect_eq(lgetxattr(tu_path("out/f"), "trusted.union.anything", v,
			       sizeof(v)), -1);
}

Test(merge, directory_metadata_come_from_the_topmost_dir)
{
	struct hu_error e = { 0 };
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 3000, 0 } };
	struct stat st;

	tu_file("lo/d/a", "");
	tu_file("up/d/b", "");
	cr_assert_eq(chmod(tu_path("up/d"), 0705), 0);
	tu_xattr("up/d", "user.top", "1");
	tu_xattr("lo/d", "user.bottom", "1");
	cr_assert_eq(utimensat(AT_FDCWD, tu_path("up/d"), ts, 0), 0);
	cr_assert_eq(merge("out", NULL, &e, 2, "lo", "up"), 0, "%s", e.msg);
	cr_assert_eq(stat(tu_path("out/d"), &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0705);
	cr_expect_eq(st.st_mtim.tv_sec, 3000);
	cr_expect(getxattr(tu_path("out/d"), "user.top", NULL, 0) >= 0);
	cr_expect(getxattr(tu_path("out/d"), "user.bottom", NULL, 0) < 0);
	cr_expect_eq(dir_entries("out/d"), 2);
}

Test(merge, hard_links_stay_links_and_sparse_files_stay_sparse)
{
	struct hu_error e = { 0 };
	struct stat a, b, sp;
	int fd;

	tu_file("lo/a", "linked");
	cr_assert_eq(link(tu_path("lo/a"), tu_path("lo/b")), 0);
	cr_assert_eq(link(tu_path("lo/a"), tu_path("lo/gone")), 0);
	tu_wh_overlay("up/gone");
	fd = open(tu_path("lo/sparse"), O_CREAT | O_WRONLY, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "x", 1, 64 << 20), 1);
	close(fd);
	cr_assert_eq(merge("out", NULL, &e, 2, "lo", "up"), 0, "%s", e.msg);
	cr_assert_eq(lstat(tu_path("out/a"), &a), 0);
	cr_assert_eq(lstat(tu_path("out/b"), &b), 0);
	cr_expect_eq(a.st_ino, b.st_ino);
	cr_expect_eq(a.st_nlink, 2);
	cr_expect(!tu_exists("out/gone"));
	cr_assert_eq(lstat(tu_path("out/sparse"), &sp), 0);
	cr_expect_eq(sp.st_size, (64 << 20) + 1);
	cr_expect_lt(sp.st_blocks * 512, 1 << 20, "blocks %ld",
		     (long)sp.st_blocks);
}

Test(merge, devices_fifos_symlinks_and_sockets)
{
	struct hu_error e = { 0 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	char target[64];
	int sock;

	tu_mknod("lo/null", S_IFCHR | 0620, 1, 3);
	tu_mknod("lo/blk", S_IFBLK | 0600, 7, 0);
	tu_mknod("lo/fifo", S_IFIFO | 0640, 0, 0);
	tu_symlink("../elsewhere", "lo/link");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", tu_path("lo/sock"));
	sock = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(sock, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(sock);
	tu_mkdir("up");
	cr_assert_eq(merge("out", NULL, &e, 2, "lo", "up"), 0, "%s", e.msg);
	cr_assert_eq(lstat(tu_path("out/null"), &st), 0);
	cr_expect(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
	cr_expect_eq(st.st_mode & 07777, 0620);
	cr_assert_eq(lstat(tu_path("out/blk"), &st), 0);
	cr_expect(S_ISBLK(st.st_mode) && st.st_rdev == makedev(7, 0));
	cr_assert_eq(lstat(tu_path("out/fifo"), &st), 0);
	cr_expect(S_ISFIFO(st.st_mode));
	cr_expect_eq(readlink(tu_path("out/link"), target, sizeof(target)), 12);
	cr_expect(!tu_exists("out/sock"));
}

Test(merge, link_mode_shares_inodes_with_the_layer)
{
	struct hu_error e = { 0 };
	struct hu_merge_opts mo = { .data = HU_DATA_LINK };
	struct stat a, b;

	tu_file("lo/f", "x");
	tu_mkdir("up");
	cr_assert_eq(merge("out", &mo, &e, 2, "lo", "up"), 0, "%s", e.msg);
	cr_assert_eq(stat(tu_path("lo/f"), &a), 0);
	cr_assert_eq(stat(tu_path("out/f"), &b), 0);
	cr_expect_eq(a.st_ino, b.st_ino);
}

Test(merge, refuses_existing_output_and_output_inside_a_layer)
{
	struct hu_error e = { 0 };

	tu_file("lo/f", "x");
	tu_mkdir("up/sub");
	tu_file("exists/mine", "mine");
	cr_expect_eq(merge("exists", NULL, &e, 2, "lo", "up"), -1);
	cr_expect_str_eq(e.msg, "exists and is not empty (an empty directory "
			 "is replaced)");
	cr_expect_eq(merge("up/sub/out", NULL, &e, 2, "lo", "up"), -1);
	cr_expect(strstr(e.msg, "lies inside layer") != NULL, "%s", e.msg);
	cr_expect(!tu_exists("up/sub/out"));
	cr_expect_eq(dir_entries("up/sub"), 0);
	hu_error_clear(&e);
}

Test(merge, dry_run_writes_nothing)
{
	struct hu_error e = { 0 };
	struct hu_merge_opts mo = { .dry_run = true };

	tu_file("lo/d/f", "x");
	tu_mkdir("up");
	cr_assert_eq(merge("out", &mo, &e, 2, "lo", "up"), 0);
	cr_expect_eq(dir_entries(""), 2);	/* lo, up */
}

/* A failure half-way leaves neither OUT nor the temporary tree. */
Test(merge, failure_midway_leaves_nothing)
{
	struct hu_error e = { 0 };

	for (int i = 0; i < 20; i++) {
		char name[32];

		snprintf(name, sizeof(name), "lo/d%d/f", i);
		tu_file(name, "some data");
	}
	tu_mkdir("up");
	setenv("HUNION_FAULT", "write:7:ENOSPC", 1);
	cr_assert_eq(merge("out", NULL, &e, 2, "lo", "up"), -1);
	cr_expect_eq(e.err, ENOSPC);
	cr_expect(strncmp(e.path, tu_path("out/"), strlen(tu_path("out/")))
		  == 0, "path %s", e.path);
	cr_expect_eq(dir_entries(""), 2, "left behind in %s", tu_tmpdir());
	hu_error_clear(&e);
}

Test(merge, paths_longer_than_path_max)
{
	struct hu_error e = { 0 };
	char rel[8192] = "lo", name[256];
	size_t len;

	memset(name, 'n', 250);
	name[250] = '\0';
	for (int i = 0; i < 18; i++) {
		strcat(rel, "/");
		strcat(rel, name);
	}
	len = strlen(rel);
	cr_assert_gt(len, 4096);
	/* mkdir -p cannot: build it one level at a time. */
	{
		int fd = open(tu_path("."), O_RDONLY | O_DIRECTORY);

		cr_assert_eq(mkdirat(fd, "lo", 0755), 0);
		fd = openat(fd, "lo", O_RDONLY | O_DIRECTORY);
		for (int i = 0; i < 18; i++) {
			cr_assert_eq(mkdirat(fd, name, 0755), 0);
			fd = openat(fd, name, O_RDONLY | O_DIRECTORY);
		}
		close(openat(fd, "deep", O_CREAT | O_WRONLY, 0644));
		cr_assert_eq(linkat(fd, "deep", fd, "deep2", 0), 0);
	}
	tu_mkdir("up");
	cr_assert_eq(merge("out", NULL, &e, 2, "lo", "up"), 0, "%s: %s",
		     e.path, e.msg);
	{
		int fd = open(tu_path("out"), O_RDONLY | O_DIRECTORY);
		struct stat a, b;

		for (int i = 0; i < 18; i++)
			fd = openat(fd, name, O_RDONLY | O_DIRECTORY);
		cr_assert_geq(fd, 0);
		cr_expect_eq(fstatat(fd, "deep", &a, 0), 0);
		cr_expect_eq(fstatat(fd, "deep2", &b, 0), 0);
		cr_expect_eq(a.st_ino, b.st_ino);
	}
}
