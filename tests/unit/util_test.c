/* SPDX-License-Identifier: MIT */
/* Errors, paths, the hard-link map, xattrs by name, write-behind. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "hunion.h"
#include "internal.h"
#include "common/linkmap.h"
#include "testutil.h"

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

/* ---- xattrs by directory fd and name ---------------------------------- */

/* Both ways of naming an entry, listxattrat(2) and the /proc/self/fd
 * fallback, see a symlink's own xattrs (never its target's) and a file's. */
static void expect_xattrs_by_name(void)
{
	char list[256];
	char value[16];
	int dirfd;
	ssize_t n;

	tu_file("d/f", "x");
	tu_xattr("d/f", "user.file", "1");
	tu_symlink("f", "d/l");
	tu_xattr("d/l", "trusted.link", "22");
	dirfd = open(tu_path("d"), O_RDONLY | O_DIRECTORY);
	cr_assert_geq(dirfd, 0);

	n = hu_listxattr_at(dirfd, "l", list, sizeof(list));
	cr_assert_eq(n, (ssize_t)sizeof("trusted.link"));
	cr_expect_str_eq(list, "trusted.link");
	n = hu_lgetxattr_at(dirfd, "l", "trusted.link", value, sizeof(value));
	cr_expect_eq(n, 2);
	cr_expect_eq(memcmp(value, "22", 2), 0);
	errno = 0;
	cr_expect_eq(hu_lgetxattr_at(dirfd, "l", "user.file", value,
				     sizeof(value)), -1);
	cr_expect_eq(errno, ENODATA);

	n = hu_listxattr_at(dirfd, "f", NULL, 0);
	cr_expect_eq(n, (ssize_t)sizeof("user.file"));
	errno = 0;
	cr_expect_eq(hu_listxattr_at(dirfd, "f", list, 2), -1);
	cr_expect_eq(errno, ERANGE);
	errno = 0;
	cr_expect_eq(hu_listxattr_at(dirfd, "missing", list, sizeof(list)),
		     -1);
	cr_expect_eq(errno, ENOENT);
	close(dirfd);
	tu_cleanup();
}

Test(xattr_at, names_entries_without_following)
{
	expect_xattrs_by_name();
}

Test(xattr_at, proc_fallback_agrees)
{
	hu_xattrat_disable();
	expect_xattrs_by_name();
}

/* Make syscalls @a and @b (which may be the same) fail with EPERM in this
 * process, as a seccomp filter that predates them may. */
static void refuse_calls(unsigned int a, unsigned int b)
{
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, a, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, b, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	struct sock_fprog fprog = {
		.len = sizeof(prog) / sizeof(prog[0]), .filter = prog,
	};

	cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	cr_assert_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog), 0);
}

/* A seccomp filter that answers EPERM to the two calls, as a container
 * runtime's profile that predates them may: the probe must see that and
 * fall back, not fail every entry. */
Test(xattr_at, a_filter_refusing_the_calls_falls_back)
{
#ifdef __NR_listxattrat
	refuse_calls(__NR_listxattrat, __NR_getxattrat);
	errno = 0;
	cr_assert_eq(syscall(__NR_listxattrat, AT_FDCWD, "/",
			     AT_SYMLINK_NOFOLLOW, NULL, 0), -1);
	cr_assert_eq(errno, EPERM, "the filter is in place");
#endif
	expect_xattrs_by_name();
}

/* ---- a directory beneath a root --------------------------------------- */

/* hu_open_dir_beneath() opens what a walk of hu_open_dir_at() would, and
 * says ENOTDIR wherever that walk meets a symlink or a file. */
static void expect_open_beneath(void)
{
	struct stat a, b;
	int root, fd;

	tu_file("r/a/b/c/f", "");
	tu_symlink("a", "r/link");
	tu_symlink("/", "r/a/up");
	cr_assert_geq(root = open(tu_path("r"), O_RDONLY | O_DIRECTORY), 0);
	fd = hu_open_dir_beneath(root, "a/b/c");
	cr_assert_geq(fd, 0, "%s", strerror(errno));
	cr_assert_eq(fstat(fd, &a), 0);
	cr_assert_eq(stat(tu_path("r/a/b/c"), &b), 0);
	cr_expect_eq(a.st_ino, b.st_ino);
	close(fd);
	errno = 0;
	cr_expect_eq(hu_open_dir_beneath(root, "a/missing/c"), -1);
	cr_expect_eq(errno, ENOENT);
	errno = 0;
	cr_expect_eq(hu_open_dir_beneath(root, "link/b"), -1);
	cr_expect_eq(errno, ENOTDIR, "a symlink is not followed: %s",
		     strerror(errno));
	errno = 0;
	cr_expect_eq(hu_open_dir_beneath(root, "a/up"), -1);
	cr_expect_eq(errno, ENOTDIR);
	errno = 0;
	cr_expect_eq(hu_open_dir_beneath(root, "a/b/c/f"), -1);
	cr_expect_eq(errno, ENOTDIR);
	close(root);
	tu_cleanup();
}

Test(open_beneath, opens_what_a_walk_opens)
{
	expect_open_beneath();
}

/* A seccomp filter that refuses openat2, as an older runtime's profile
 * may: the walk one component at a time answers the same. */
Test(open_beneath, a_filter_refusing_openat2_falls_back)
{
	refuse_calls(SYS_openat2, SYS_openat2);
	errno = 0;
	cr_assert_eq(syscall(SYS_openat2, AT_FDCWD, "/", NULL, 0), -1);
	cr_assert_eq(errno, EPERM, "the filter is in place");
	expect_open_beneath();
}

/* ---- write-behind -------------------------------------------------------- */

Test(writebehind, drops_what_is_written_and_keeps_the_bytes)
{
	const size_t chunk = 1 << 20, total = 64 * chunk;
	unsigned char *buf = malloc(chunk), *map;
	struct hu_writebehind wb;
	unsigned char vec[16];
	struct statfs sfs;
	int fd, resident = 0;

	cr_assert_not_null(buf);
	fd = open(tu_path("out"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0);
	hu_writebehind_init(&wb, fd);
	cr_assert_eq(wb.fd, fd);
	for (size_t off = 0; off < total; off += chunk) {
		for (size_t i = 0; i < chunk; i += 4096)
			memset(buf + i, (int)((off + i) / 4096 % 251), 4096);
		cr_assert_eq(write(fd, buf, chunk), (ssize_t)chunk);
		cr_assert_eq(hu_writebehind_wrote(&wb, chunk), 0);
	}
	cr_expect_eq(wb.end, (off_t)total);
	cr_expect_gt(wb.dropped, 0);

	/* The first pages were dropped from the page cache (not on tmpfs,
	 * whose pages are the file), and every byte reads back. */
	map = mmap(NULL, total, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(map, MAP_FAILED);
	cr_assert_eq(mincore(map, sizeof(vec) * 4096, vec), 0);
	for (size_t i = 0; i < sizeof(vec); i++)
		resident += vec[i] & 1;
	cr_assert_eq(fstatfs(fd, &sfs), 0);
	if (sfs.f_type != TMPFS_MAGIC)
		cr_expect_eq(resident, 0, "%d of the first 16 pages cached",
			     resident);
	for (size_t off = 0; off < total; off += 4096)
		cr_assert_eq(map[off], off / 4096 % 251, "byte %zu", off);
	munmap(map, total);
	close(fd);
	free(buf);
	tu_cleanup();
}

Test(writebehind, leaves_pipes_alone)
{
	struct hu_writebehind wb;
	int p[2];

	cr_assert_eq(pipe(p), 0);
	hu_writebehind_init(&wb, p[1]);
	cr_expect_eq(wb.fd, -1);
	cr_expect_eq(hu_writebehind_wrote(&wb, 1 << 30), 0);
	close(p[0]);
	close(p[1]);
}

static int make_file(int dirfd, const char *name, void *ctx)
{
	(void)ctx;
	return openat(dirfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC,
		      0600);
}

/* A temporary beside a name of NAME_MAX bytes: the name is shortened, not
 * refused (ENAMETOOLONG), and still read as that name's temporary. */
Test(temp_name, fits_beside_the_longest_name, .fini = tu_cleanup)
{
	char base[NAME_MAX + 1], *tmp = NULL;
	int dirfd = open(tu_tmpdir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd;

	cr_assert_geq(dirfd, 0);
	memset(base, 'n', NAME_MAX);
	base[NAME_MAX] = '\0';
	fd = hu_make_temp(dirfd, base, make_file, NULL, &tmp);
	cr_assert_geq(fd, 0, "hu_make_temp: %s", strerror(errno));
	cr_expect_leq(strlen(tmp), NAME_MAX);
	cr_expect(hu_is_temp_of(tmp, base));
	cr_expect_not(hu_is_temp_of(tmp, "n"));
	close(fd);
	cr_expect_eq(unlinkat(dirfd, tmp, 0), 0);
	free(tmp);
	close(dirfd);
}

/* Two output names of 255 bytes that differ only at their end: the
 * temporaries and locks beside one are never the other's, and the names
 * beside them fit NAME_MAX. */
Test(temp_name, long_names_apart, .fini = tu_cleanup)
{
	char a[NAME_MAX + 1], b[NAME_MAX + 1], *tmp = NULL;
	char sa[HU_TEMP_STEM_SIZE], sb[HU_TEMP_STEM_SIZE], ss[HU_TEMP_STEM_SIZE];
	int dirfd = open(tu_tmpdir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd;

	cr_assert_geq(dirfd, 0);
	memset(a, 'n', NAME_MAX);
	a[NAME_MAX] = '\0';
	memcpy(b, a, sizeof(b));
	b[NAME_MAX - 1] = 'm';
	hu_temp_stem(a, sa);
	hu_temp_stem(b, sb);
	cr_expect_str_neq(sa, sb);
	cr_expect_leq(strlen(sa) + strlen(".") + strlen(".hunion-lock"),
		      NAME_MAX);
	hu_temp_stem(sa, ss);
	cr_expect_str_eq(ss, sa, "the stem of a stem is itself");
	hu_temp_stem("short", ss);
	cr_expect_str_eq(ss, "short");
	fd = hu_make_temp(dirfd, a, make_file, NULL, &tmp);
	cr_assert_geq(fd, 0, "hu_make_temp: %s", strerror(errno));
	cr_expect(hu_is_temp_of(tmp, a));
	cr_expect(hu_is_temp_of(tmp, sa), "fsck finds the stem in the name");
	cr_expect_not(hu_is_temp_of(tmp, b));
	close(fd);
	free(tmp);
	close(dirfd);
}

/* hu_layer_names_read() of @dirfd with short reads taken as the end,
 * against hu_names_read(), which reads to 0. */
static void expect_same_listing(int dirfd, size_t n)
{
	struct hu_layer l = { .readdir_fills = true };
	struct hu_names a, b;
	struct hu_error e = { 0 };

	cr_assert_eq(hu_names_read(dirfd, &a, "dir", &e), 0, "%s", e.msg);
	cr_assert_eq(hu_layer_names_read(&l, dirfd, false, &b, "dir", &e), 0,
		     "%s", e.msg);
	cr_assert_eq(a.n, n);
	cr_assert_eq(b.n, n);
	for (size_t i = 0; i < n; i++)
		cr_expect_str_eq(b.v[i].name, a.v[i].name);
	hu_names_free(&a);
	hu_names_free(&b);
}

/* Names of every length, so that reads end with every amount of room
 * left: a read cut short by a full buffer is not the end. */
Test(names_read, a_short_read_ends_only_a_listing_that_left_room,
     .fini = tu_cleanup)
{
	int dirfd = open(tu_tmpdir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char name[NAME_MAX + 1];
	size_t n = 0;

	cr_assert_geq(dirfd, 0);
	expect_same_listing(dirfd, 0);
	for (size_t len = 1; len <= NAME_MAX; len++) {
		/* eight names of @len bytes: a number, padded */
		for (int k = 0; k < 8; k++) {
			int w = snprintf(name, sizeof(name), "%zu", n);

			if ((size_t)w > len)
				continue;
			memset(name + w, 'x', len - w);
			name[len] = '\0';
			cr_assert_eq(mkdirat(dirfd, name, 0700), 0, "%s: %s",
				     name, strerror(errno));
			n++;
		}
		if (len == 3)
			expect_same_listing(dirfd, n);
	}
	expect_same_listing(dirfd, n);
	close(dirfd);
}

/* A short read may be one a signal cut: once the program is being
 * interrupted, such a listing is not used, and the error says
 * "interrupted" (errno EINTR), not "Interrupted system call". */
Test(names_read, a_short_read_while_interrupted_fails, .fini = tu_cleanup)
{
	struct hu_layer l = { .readdir_fills = true };
	int dirfd = open(tu_tmpdir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct hu_names names;
	struct hu_error e = { 0 };

	cr_assert_geq(dirfd, 0);
	cr_assert_eq(mkdirat(dirfd, "x", 0700), 0);
	hu_interrupt();
	cr_expect_eq(hu_layer_names_read(&l, dirfd, false, &names, "dir",
					 &e), -1);
	cr_expect_eq(errno, EINTR);
	cr_expect_eq(e.err, 0);
	cr_expect_str_eq(e.msg, "interrupted");
	hu_error_clear(&e);
	l.readdir_fills = false;
	cr_assert_eq(hu_layer_names_read(&l, dirfd, false, &names, "dir",
					 &e), 0);
	cr_expect_eq(names.n, 1);
	hu_names_free(&names);
	close(dirfd);
}

/* A message is whole however long: no fixed buffer cuts the paths in it
 * (it used to end at 255 bytes); one may quote the error it replaces. */
Test(error, a_long_message_is_whole)
{
	struct hu_error e = { 0 };
	char *p = malloc(5001);

	cr_assert_not_null(p);
	memset(p, 'p', 5000);
	p[5000] = '\0';
	hu_error_set(&e, 0, NULL, "is the layer %s: refusing", p);
	cr_expect_eq(strlen(e.msg), 5000 + strlen("is the layer : refusing"));
	hu_error_set(&e, EIO, "x", "cannot copy it: %s", e.msg);
	cr_expect_eq(strncmp(e.msg, "cannot copy it: is the layer ppp", 32), 0);
	cr_expect_eq(strlen(e.msg), 5000 + strlen("cannot copy it: is the "
						  "layer : refusing"));
	hu_error_clear(&e);
	cr_expect_null(e.msg);
	free(p);
}
