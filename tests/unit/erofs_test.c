/* SPDX-License-Identifier: MIT */
/* The EROFS writer, checked by the real readers: fsck.erofs and
 * dump.erofs (erofs-utils), and the kernel through a mount of the image. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "erofs/erofs.h"
#include "testutil.h"

#define BT 1700000000	/* the build time */

static char mnt[4096];
static bool mounted;

static void teardown(void)
{
	if (mounted)
		umount2(mnt, MNT_DETACH);
	mounted = false;
	tu_cleanup();
}

TestSuite(erofs, .fini = teardown);

/* ---- helpers ------------------------------------------------------------ */

static struct hu_erofs *start(const char *rel, unsigned bits, bool uuid,
			      int *fd)
{
	struct hu_erofs_opts o = { .block_bits = bits, .build_time = BT,
				   .uuid_content = uuid };
	struct hu_error e = { 0 };
	struct hu_erofs *w;

	*fd = open(tu_path(rel), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
		   0644);
	cr_assert(*fd >= 0);
	cr_assert_eq(hu_erofs_open(&w, *fd, &o, &e), 0, "%s", e.msg);
	return w;
}

static struct hu_erofs_meta meta(mode_t mode)
{
	return (struct hu_erofs_meta){ .mode = mode, .mtime = BT };
}

static void ok(int rc, struct hu_error *e)
{
	cr_assert_eq(rc, 0, "%s", e->msg ? e->msg : "?");
}

static void finish(struct hu_erofs *w, int fd)
{
	struct hu_error e = { 0 };

	ok(hu_erofs_close(w, &e), &e);
	close(fd);
}

static void add_file(struct hu_erofs *w, const char *name,
		     const char *data, size_t size, uint64_t *ref)
{
	struct hu_error e = { 0 };
	struct hu_erofs_meta m = meta(S_IFREG | 0644);
	char tmp[] = "/tmp/erofs-src-XXXXXX";
	int fd = mkstemp(tmp);
	struct hu_erofs_data d = { .size = size, .fd = fd };

	cr_assert(fd >= 0);
	unlink(tmp);
	cr_assert_eq(write(fd, data, size), (ssize_t)size);
	ok(hu_erofs_file(w, name, &m, &d, ref, &e), &e);
	close(fd);
}

struct src {
	const char *p;
	size_t len, piece;
};

static int feed(void *ctx, hu_erofs_put put, void *put_ctx,
		struct hu_error *e)
{
	struct src *s = ctx;

	for (size_t o = 0; o < s->len; o += s->piece) {
		size_t n = s->len - o < s->piece ? s->len - o : s->piece;

		if (put(put_ctx, s->p + o, n, e) < 0)
			return -1;
	}
	return 0;
}

__attribute__((format(printf, 1, 2)))
static int sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static void fsck_ok(const char *rel)
{
	char x[4096];

	snprintf(x, sizeof(x), "%s", tu_path("x"));
	cr_assert_eq(sh("fsck.erofs %s >/dev/null 2>&1", tu_path(rel)),
		     0, "fsck.erofs fails on %s", rel);
	cr_assert_eq(sh("fsck.erofs --extract=%s %s >/dev/null 2>&1", x,
			tu_path(rel)), 0, "fsck.erofs --extract fails");
	sh("rm -rf %s", x);
}

/* Mount the image; the test is skipped where mounting is not allowed. */
static const char *mount_img(const char *rel)
{
	snprintf(mnt, sizeof(mnt), "%s", tu_path("mnt"));
	mkdir(mnt, 0755);
	if (geteuid() != 0)
		cr_skip_test("mounting EROFS needs root");
	if (sh("mount -t erofs -o ro %s %s 2>/dev/null", tu_path(rel), mnt))
		cr_skip_test("cannot mount an EROFS image here");
	mounted = true;
	return mnt;
}

static const char *at(const char *rel)
{
	static char buf[8][8192];
	static int i;

	i = (i + 1) % 8;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", mnt, rel);
	return buf[i];
}

static off_t img_size(const char *rel)
{
	struct stat st;

	cr_assert_eq(stat(tu_path(rel), &st), 0);
	return st.st_size;
}

/* ---- a tree of every kind ------------------------------------------------ */

static char big[3 * 4096 + 1234];
static char plain[4096 + 4090];
static char target[3000];

static void fill(char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)((i * 31 + seed) % 251);
}

static void build_all(const char *rel, bool uuid)
{
	struct hu_error e = { 0 };
	struct hu_xattr rx[] = { { "user.root", "r", 1 } };
	struct hu_xattr fx[] = {
		{ "security.selinux", "label", 5 },
		{ "trusted.t", "tv", 2 },
		{ "user.a", "", 0 },
		{ "user.b", "bee", 3 },
	};
	struct hu_erofs_meta m = meta(S_IFDIR | 0755);
	struct src s = { big, sizeof(big), 1000 };
	struct hu_erofs_data d = { .size = sizeof(big), .fd = -1,
				   .feed = feed, .ctx = &s };
	uint64_t ref;
	int fd;
	struct hu_erofs *w = start(rel, 0, uuid, &fd);

	fill(big, sizeof(big), 1);
	fill(plain, sizeof(plain), 2);
	memset(target, 'T', sizeof(target));
	m.xattrs = rx;
	m.nxattrs = 1;
	ok(hu_erofs_root(w, &m, &e), &e);
	add_file(w, "empty", "", 0, NULL);
	add_file(w, "small", "hello\n", 6, &ref);
	add_file(w, "big", big, sizeof(big), NULL);
	add_file(w, "plain", plain, sizeof(plain), NULL);
	m = meta(S_IFREG | 04755);
	m.uid = 100000;
	m.gid = 200000;
	m.mtime = 1234567890;
	m.mtime_nsec = 123456789;
	m.xattrs = fx;
	m.nxattrs = 4;
	ok(hu_erofs_file(w, "fed", &m, &d, NULL, &e), &e);
	m = meta(S_IFLNK | 0777);
	ok(hu_erofs_symlink(w, "short", &m, "small", 5, NULL, &e), &e);
	ok(hu_erofs_symlink(w, "long", &m, target, sizeof(target), NULL, &e),
	   &e);
	m = meta(S_IFCHR | 0600);
	m.rdev = makedev(300, 70000);
	ok(hu_erofs_special(w, "chr", &m, NULL, &e), &e);
	m = meta(S_IFBLK | 0600);
	m.rdev = makedev(8, 1);
	ok(hu_erofs_special(w, "blk", &m, NULL, &e), &e);
	m = meta(S_IFIFO | 0644);
	ok(hu_erofs_special(w, "fifo", &m, NULL, &e), &e);
	m = meta(S_IFSOCK | 0755);
	ok(hu_erofs_special(w, "sock", &m, NULL, &e), &e);
	m = meta(S_IFDIR | 03777);
	m.mtime = 5;
	ok(hu_erofs_dir(w, "sub", &m, &e), &e);
	ok(hu_erofs_link(w, "hard", ref, &e), &e);
	m = meta(S_IFDIR | 0700);
	ok(hu_erofs_dir(w, "inner", &m, &e), &e);
	ok(hu_erofs_link(w, "hard2", ref, &e), &e);
	ok(hu_erofs_leave(w, &e), &e);
	ok(hu_erofs_leave(w, &e), &e);
	m = meta(S_IFDIR | 0755);
	ok(hu_erofs_dir(w, "emptydir", &m, &e), &e);
	ok(hu_erofs_leave(w, &e), &e);
	ok(hu_erofs_leave(w, &e), &e);
	finish(w, fd);
}

static void expect_data(const char *path, const char *want, size_t n)
{
	char *got = malloc(n + 1);
	int fd = open(path, O_RDONLY);

	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(read(fd, got, n + 1), (ssize_t)n, "%s", path);
	cr_expect(memcmp(got, want, n) == 0, "%s differs", path);
	close(fd);
	free(got);
}

static void expect_xattr(const char *path, const char *name,
			 const char *value, size_t size)
{
	char buf[65536];
	ssize_t n = lgetxattr(path, name, buf, sizeof(buf));

	cr_assert_eq(n, (ssize_t)size, "%s %s: %zd %s", path, name, n,
		     strerror(errno));
	cr_expect(memcmp(buf, value, size) == 0, "%s %s", path, name);
}

Test(erofs, every_kind)
{
	struct stat st, st2;
	char buf[4096];

	build_all("img", false);
	fsck_ok("img");
	cr_expect_eq(img_size("img") % 4096, 0);
	mount_img("img");

	cr_assert_eq(lstat(at(""), &st), 0);
	cr_expect_eq(st.st_nlink, 4);	/* ., .., sub, emptydir */
	expect_xattr(at(""), "user.root", "r", 1);
	cr_assert_eq(lstat(at("empty"), &st), 0);
	cr_expect_eq(st.st_size, 0);
	expect_data(at("small"), "hello\n", 6);
	expect_data(at("big"), big, sizeof(big));
	expect_data(at("plain"), plain, sizeof(plain));
	expect_data(at("fed"), big, sizeof(big));
	cr_assert_eq(lstat(at("fed"), &st), 0);
	cr_expect_eq(st.st_mode, S_IFREG | 04755);
	cr_expect_eq(st.st_uid, 100000);
	cr_expect_eq(st.st_gid, 200000);
	cr_expect_eq(st.st_mtim.tv_sec, 1234567890);
	cr_expect_eq(st.st_mtim.tv_nsec, 123456789);
	expect_xattr(at("fed"), "security.selinux", "label", 5);
	expect_xattr(at("fed"), "trusted.t", "tv", 2);
	expect_xattr(at("fed"), "user.a", "", 0);
	expect_xattr(at("fed"), "user.b", "bee", 3);
	cr_expect_eq(llistxattr(at("fed"), buf, sizeof(buf)),
		     (ssize_t)sizeof("security.selinux\0trusted.t\0user.a\0"
				     "user.b"));
	cr_assert_eq(lstat(at("small"), &st), 0);
	cr_expect_eq(st.st_mtim.tv_sec, BT);
	cr_expect_eq(readlink(at("short"), buf, sizeof(buf)), 5);
	cr_expect(memcmp(buf, "small", 5) == 0);
	cr_expect_eq(readlink(at("long"), buf, sizeof(buf)), 3000);
	cr_expect(memcmp(buf, target, 3000) == 0);
	cr_assert_eq(lstat(at("chr"), &st), 0);
	cr_expect(S_ISCHR(st.st_mode));
	cr_expect_eq(major(st.st_rdev), 300);
	cr_expect_eq(minor(st.st_rdev), 70000);
	cr_assert_eq(lstat(at("blk"), &st), 0);
	cr_expect(S_ISBLK(st.st_mode));
	cr_expect_eq(st.st_rdev, makedev(8, 1));
	cr_assert_eq(lstat(at("fifo"), &st), 0);
	cr_expect(S_ISFIFO(st.st_mode));
	cr_assert_eq(lstat(at("sock"), &st), 0);
	cr_expect(S_ISSOCK(st.st_mode));
	cr_assert_eq(lstat(at("sub"), &st), 0);
	cr_expect_eq(st.st_mode, S_IFDIR | 03777);
	cr_expect_eq(st.st_nlink, 3);
	cr_expect_eq(st.st_mtim.tv_sec, 5);
	cr_assert_eq(lstat(at("small"), &st), 0);
	cr_expect_eq(st.st_nlink, 3);
	cr_assert_eq(lstat(at("sub/hard"), &st2), 0);
	cr_expect_eq(st.st_ino, st2.st_ino);
	cr_assert_eq(lstat(at("sub/inner/hard2"), &st2), 0);
	cr_expect_eq(st.st_ino, st2.st_ino);
	expect_data(at("sub/inner/hard2"), "hello\n", 6);
	/* ".." of each directory is its parent. */
	cr_assert_eq(lstat(at("sub/inner/.."), &st), 0);
	cr_assert_eq(lstat(at("sub"), &st2), 0);
	cr_expect_eq(st.st_ino, st2.st_ino);
	cr_assert_eq(lstat(at("emptydir/.."), &st), 0);
	cr_assert_eq(lstat(at(""), &st2), 0);
	cr_expect_eq(st.st_ino, st2.st_ino);
}

Test(erofs, reproducible)
{
	char *a, *b;
	size_t n;
	FILE *f;

	build_all("a", false);
	build_all("b", false);
	cr_expect_eq(sh("cmp -s %s %s", tu_path("a"), tu_path("b")), 0);
	build_all("c", true);
	build_all("d", true);
	cr_expect_eq(sh("cmp -s %s %s", tu_path("c"), tu_path("d")), 0);
	fsck_ok("c");
	/* The UUID: zero without uuid_content, else not. */
	n = (size_t)img_size("a");
	a = malloc(n);
	b = malloc(n);
	f = fopen(tu_path("a"), "rb");
	cr_assert_eq(fread(a, 1, n, f), n);
	fclose(f);
	f = fopen(tu_path("c"), "rb");
	cr_assert_eq(fread(b, 1, n, f), n);
	fclose(f);
	for (int i = 0; i < 16; i++)
		cr_expect_eq(a[1024 + 48 + i], 0);
	cr_expect(memcmp(b + 1024 + 48, a + 1024 + 48, 16) != 0);
	free(a);
	free(b);
}

/* ---- names and directories ----------------------------------------------- */

Test(erofs, big_directory)
{
	struct hu_error e = { 0 };
	struct hu_erofs_meta m = meta(S_IFDIR | 0755);
	int fd, count = 0;
	struct hu_erofs *w = start("img", 0, false, &fd);
	char name[64];
	struct dirent *de;
	struct stat st;
	DIR *d;

	ok(hu_erofs_root(w, &m, &e), &e);
	ok(hu_erofs_dir(w, "d", &m, &e), &e);
	m = meta(S_IFIFO | 0644);
	/* In an order other than the sorted one. */
	for (int i = 4999; i >= 0; i--) {
		snprintf(name, sizeof(name), "entry-%d-%s", i * 7919 % 5000,
			 i % 3 ? "x" : "a-longer-name-for-some");
		ok(hu_erofs_special(w, name, &m, NULL, &e), &e);
	}
	ok(hu_erofs_leave(w, &e), &e);
	ok(hu_erofs_leave(w, &e), &e);
	finish(w, fd);
	fsck_ok("img");
	mount_img("img");
	for (int i = 4999; i >= 0; i--) {
		snprintf(name, sizeof(name), "d/entry-%d-%s", i * 7919 % 5000,
			 i % 3 ? "x" : "a-longer-name-for-some");
		cr_assert_eq(lstat(at(name), &st), 0, "%s", name);
		cr_expect(S_ISFIFO(st.st_mode));
	}
	cr_expect_neq(lstat(at("d/entry-0-y"), &st), 0);
	d = opendir(at("d"));
	cr_assert_not_null(d);
	while ((de = readdir(d)))
		count++;
	closedir(d);
	cr_expect_eq(count, 5002);
}

Test(erofs, names)
{
	struct hu_error e = { 0 };
	struct hu_erofs_meta m = meta(S_IFDIR | 0755);
	char n255[256], n256[257], odd[3] = { 0, 'z', 0 };
	int fd;
	struct hu_erofs *w = start("img", 0, false, &fd);
	struct stat st;

	memset(n255, 'n', 255);
	n255[255] = 0;
	memset(n256, 'm', 256);
	n256[256] = 0;
	ok(hu_erofs_root(w, &m, &e), &e);
	m = meta(S_IFREG | 0644);
	add_file(w, n255, "x", 1, NULL);
	for (int b = 1; b < 256; b++) {
		if (b == '/')
			continue;
		odd[0] = (char)b;
		add_file(w, odd, odd, 2, NULL);
	}
	{
		struct hu_erofs_data d = { .size = 0, .fd = -1, .feed = feed };
		struct src s = { "", 0, 1 };

		d.ctx = &s;
		cr_expect_eq(hu_erofs_file(w, n256, &m, &d, NULL, &e), -1);
		cr_expect(strstr(e.msg, "255") != NULL, "%s", e.msg);
		hu_error_clear(&e);
		cr_expect_eq(hu_erofs_file(w, "a/b", &m, &d, NULL, &e), -1);
		hu_error_clear(&e);
	}
	ok(hu_erofs_leave(w, &e), &e);
	finish(w, fd);
	fsck_ok("img");
	mount_img("img");
	cr_expect_eq(lstat(at(n255), &st), 0);
	for (int b = 1; b < 256; b++) {
		if (b == '/')
			continue;
		odd[0] = (char)b;
		cr_expect_eq(lstat(at(odd), &st), 0, "byte %d", b);
		expect_data(at(odd), odd, 2);
	}
}

Test(erofs, deep_tree)
{
	struct hu_error e = { 0 };
	struct hu_erofs_meta m = meta(S_IFDIR | 0755);
	static char path[4096 * 2];
	int fd;
	struct hu_erofs *w = start("img", 0, false, &fd);
	struct stat st;

	ok(hu_erofs_root(w, &m, &e), &e);
	path[0] = 0;
	for (int i = 0; i < 200; i++) {
		ok(hu_erofs_dir(w, "level", &m, &e), &e);
		strcat(path, i ? "/level" : "level");
	}
	add_file(w, "leaf", "deep", 4, NULL);
	for (int i = 0; i <= 200; i++)
		ok(hu_erofs_leave(w, &e), &e);
	finish(w, fd);
	fsck_ok("img");
	mount_img("img");
	strcat(path, "/leaf");
	cr_expect_eq(lstat(at(path), &st), 0);
	expect_data(at(path), "deep", 4);
}

/* ---- data layouts -------------------------------------------------------*/

Test(erofs, sparse_file)
{
	struct hu_error e = { 0 };
	struct hu_erofs_meta m = meta(S_IFDIR | 0755);
	char tmp[4096];
	const uint64_t size = 5ull << 30;
	char head[5000], tail[3000], got[5000];
	int src, fd;
	struct hu_erofs *w = start("img", 0, false, &fd);

	snprintf(tmp, sizeof(tmp), "%s", tu_path("sparse"));
	src = open(tmp, O_RDWR | O_CREAT | O_TRUNC, 0644);
	cr_assert(src >= 0);
	fill(head, sizeof(head), 3);
	fill(tail, sizeof(tail), 4);
	cr_assert_eq(pwrite(src, head, sizeof(head), 0), (ssize_t)sizeof(head));
	cr_assert_eq(pwrite(src, tail, sizeof(tail), size - sizeof(tail)),
		     (ssize_t)sizeof(tail));
	ok(hu_erofs_root(w, &m, &e), &e);
	m = meta(S_IFREG | 0644);
	{
		struct hu_erofs_data d = { .size = size, .fd = src };

		ok(hu_erofs_file(w, "sparse", &m, &d, NULL, &e), &e);
	}
	close(src);
	ok(hu_erofs_leave(w, &e), &e);
	finish(w, fd);
	cr_expect_lt(img_size("img"), 8 << 20, "image is %lld bytes",
		     (long long)img_size("img"));
	cr_expect_eq(sh("fsck.erofs %s >/dev/null 2>&1", tu_path("img")), 0);
	mount_img("img");
	src = open(at("sparse"), O_RDONLY);
	cr_assert(src >= 0);
	cr_assert_eq(pread(src, got, sizeof(head), 0), (ssize_t)sizeof(head));
	cr_expect(memcmp(got, head, sizeof(head)) == 0);
	cr_assert_eq(pread(src, got, sizeof(tail), size - sizeof(tail)),
		     (ssize_t)sizeof(tail));
	cr_expect(memcmp(got, tail, sizeof(tail)) == 0);
	cr_assert_eq(pread(src, got, 4096, size / 2), 4096);
	for (int i = 0; i < 4096; i++)
		cr_assert_eq(got[i], 0);
	close(src);
}

/* ---- xattrs -------------------------------------------------------------*/

Test(erofs, xattr_limits)
{
	struct hu_error e = { 0 };
	struct hu_erofs_meta m = meta(S_IFDIR | 0755);
	static char v[65536];
	struct hu_xattr x = { "user.big", v, 65000 };
	struct src s = { "", 0, 1 };
	struct hu_erofs_data d = { .size = 0, .fd = -1, .feed = feed,
				   .ctx = &s };
	int fd;
	struct hu_erofs *w = start("img", 0, false, &fd);

	fill(v, sizeof(v), 5);
	ok(hu_erofs_root(w, &m, &e), &e);
	m = meta(S_IFREG | 0644);
	m.xattrs = &x;
	m.nxattrs = 1;
	ok(hu_erofs_file(w, "ok", &m, &d, NULL, &e), &e);
	x.size = 65536;
	cr_expect_eq(hu_erofs_file(w, "toobig", &m, &d, NULL, &e), -1);
	cr_expect(strstr(e.msg, "65535") != NULL, "%s", e.msg);
	hu_error_clear(&e);
	x.name = "nosuchprefix.x";
	x.size = 1;
	cr_expect_eq(hu_erofs_file(w, "badname", &m, &d, NULL, &e), -1);
	hu_error_clear(&e);
	hu_erofs_abort(w);
	close(fd);

	/* The same without the refused ones. */
	w = start("img", 0, false, &fd);
	m = meta(S_IFDIR | 0755);
	ok(hu_erofs_root(w, &m, &e), &e);
	m = meta(S_IFREG | 0644);
	x = (struct hu_xattr){ "user.big", v, 65000 };
	m.xattrs = &x;
	m.nxattrs = 1;
	ok(hu_erofs_file(w, "ok", &m, &d, NULL, &e), &e);
	add_file(w, "after", "after", 5, NULL);
	ok(hu_erofs_leave(w, &e), &e);
	finish(w, fd);
	fsck_ok("img");
	mount_img("img");
	expect_xattr(at("ok"), "user.big", v, 65000);
	expect_data(at("after"), "after", 5);
}

static void build_shared(const char *rel, bool same)
{
	struct hu_error e = { 0 };
	struct hu_erofs_meta m = meta(S_IFDIR | 0755);
	char name[32], val[64];
	struct hu_xattr x[] = {
		{ "security.selinux", "system_u:object_r:usr_t:s0", 26 },
		{ "user.own", val, 0 },
	};
	int fd;
	struct hu_erofs *w = start(rel, 0, false, &fd);

	ok(hu_erofs_root(w, &m, &e), &e);
	for (int i = 0; i < 100; i++) {
		struct src s = { "data", 4, 4 };
		struct hu_erofs_data d = { .size = 4, .fd = -1,
					   .feed = feed, .ctx = &s };

		snprintf(name, sizeof(name), "f%03d", i);
		snprintf(val, sizeof(val), "%s%d", same ? "" : "v", i);
		x[1].size = strlen(val);
		if (!same) {
			/* A value of its own, as long as the shared one. */
			snprintf(val, sizeof(val), "system_u:object_r:%08d",
				 i);
			x[0].value = val;
			x[0].size = 26;
			x[1].size = 0;
		}
		m = meta(S_IFREG | 0644);
		m.xattrs = x;
		m.nxattrs = 2;
		ok(hu_erofs_file(w, name, &m, &d, NULL, &e), &e);
	}
	ok(hu_erofs_leave(w, &e), &e);
	finish(w, fd);
}

Test(erofs, shared_xattrs)
{
	char path[64];

	build_shared("shared", true);
	build_shared("unshared", false);
	fsck_ok("shared");
	fsck_ok("unshared");
	cr_expect_lt(img_size("shared"), img_size("unshared"));
	/* dump.erofs: the later files' xattrs are one shared id (4
	 * bytes) and their own inline entry. */
	cr_expect_eq(sh("dump.erofs --path=/f050 %s | grep -q 'Xattr size: 28'",
			tu_path("shared")), 0);
	mount_img("shared");
	for (int i = 0; i < 100; i += 7) {
		snprintf(path, sizeof(path), "f%03d", i);
		expect_xattr(at(path), "security.selinux",
			     "system_u:object_r:usr_t:s0", 26);
		expect_data(at(path), "data", 4);
	}
}

Test(erofs, small_blocks)
{
	struct hu_error e = { 0 };
	struct hu_erofs_meta m = meta(S_IFDIR | 0755);
	char name[32];
	int fd;
	struct hu_erofs *w = start("img", 10, false, &fd);

	fill(big, sizeof(big), 7);
	ok(hu_erofs_root(w, &m, &e), &e);
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "file-%d", i);
		add_file(w, name, big, (size_t)i * 97, NULL);
	}
	ok(hu_erofs_leave(w, &e), &e);
	finish(w, fd);
	mount_img("img");
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "file-%d", i);
		expect_data(at(name), big, (size_t)i * 97);
	}
}
