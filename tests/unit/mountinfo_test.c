/* SPDX-License-Identifier: MIT */
/* Mounted overlays: a layer in use is known by device and inode, whatever
 * path the mount or the stack names it by.  The mounts are real (root,
 * in a private mount namespace of the test's own process); mountinfo
 * text the kernel of this machine cannot produce is fed in directly. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "mount/mountinfo.h"
#include "testutil.h"

/* The mounts a test made, undone before its directory is removed (rm
 * -rf would go down into them). */
static char mounted[4][4096];
static int n_mounted;

static void mounted_at(const char *path)
{
	cr_assert_lt(n_mounted, 4);
	snprintf(mounted[n_mounted++], sizeof(mounted[0]), "%s", path);
}

static void teardown(void)
{
	while (n_mounted > 0)
		cr_expect_eq(umount2(mounted[--n_mounted], MNT_DETACH), 0);
	tu_cleanup();
}

TestSuite(mountinfo, .fini = teardown);

/* This process in a mount namespace of its own, so that the mounts go
 * with it, whatever happens to the test. */
static void private_mounts(void)
{
	if (geteuid() != 0)
		cr_skip_test("mounting overlays needs root");
	if (unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		cr_skip_test("no mount namespace of our own: %s",
			     strerror(errno));
}

/* lower/, "upp er"/ (a name mountinfo escapes), work/, and the overlay
 * of them at mnt/. */
static void mount_overlay(void)
{
	char *opts;
	int rc;

	private_mounts();
	tu_file("lower/a", "lower");
	tu_file("upp er/b", "upper");
	tu_mkdir("work");
	tu_mkdir("mnt");
	cr_assert_geq(asprintf(&opts, "lowerdir=%s,upperdir=%s,workdir=%s",
			       tu_path("lower"), tu_path("upp er"),
			       tu_path("work")), 0);
	rc = mount("overlay", tu_path("mnt"), "overlay", 0, opts);
	free(opts);
	if (rc < 0)
		cr_skip_test("cannot mount an overlay: %s", strerror(errno));
	mounted_at(tu_path("mnt"));
}

/* hu_dirs_in_use() of the directories @rel (relative to the test
 * directory, or absolute), all @written or all read: the role found
 * (the directory named checked to be the one whose role it is),
 * "unknown" or "none".  The kernel's probe is the real one. */
static char *in_use(bool written, int n, const char *const rel[])
{
	struct hu_dir_ref d[4];
	struct hu_mount_use use;
	struct hu_error e = { 0 };
	char *role;
	int rc;

	cr_assert_leq(n, 4);
	for (int i = 0; i < n; i++) {
		const char *path = rel[i][0] == '/' || rel[i][0] == '.' ?
				   rel[i] : tu_path(rel[i]);

		d[i] = (struct hu_dir_ref){ open(path, O_RDONLY | O_DIRECTORY),
					    rel[i], "layer", written, false };
		cr_assert_geq(d[i].fd, 0, "%s: %s", path, strerror(errno));
	}
	rc = hu_dirs_in_use(d, (size_t)n, &use, &e);
	cr_assert_geq(rc, 0, "%s: %s", e.path, e.msg);
	if (rc == 0) {
		cr_expect_null(use.mountpoint);
		role = strdup("none");
	} else if (rc == 2) {
		role = strdup("unknown");
	} else {
		cr_expect_str_eq(use.mountpoint, tu_path("mnt"));
		cr_expect_str_eq(use.fstype, "overlay");
		role = strdup(use.role);
	}
	if (rc == 1) {
		int i = 0;

		while (i < n && strcmp(use.layer, rel[i]) != 0)
			i++;
		cr_expect_lt(i, n, "layer %s", use.layer);
	}
	hu_mount_use_free(&use);
	for (int i = 0; i < n; i++)
		close(d[i].fd);
	hu_error_clear(&e);
	return role;
}

#define IN_USE(written, ...)                                              \
	in_use(written,                                                   \
	       sizeof((const char *[]){ __VA_ARGS__ }) / sizeof(char *),  \
	       (const char *[]){ __VA_ARGS__ })
#define WRITTEN true
#define READ false

Test(mountinfo, not_mounted_is_not_in_use)
{
	private_mounts();
	tu_file("lower/a", "x");
	tu_file("upper/b", "y");
	tu_mkdir("work");
	tu_expect_str(IN_USE(WRITTEN, "lower", "upper", "work"), "none");
	tu_expect_str(IN_USE(READ, "lower", "upper", "work"), "none");
}

Test(mountinfo, finds_the_upper)
{
	mount_overlay();
	tu_expect_str(IN_USE(READ, "upp er"), "upperdir");
	tu_expect_str(IN_USE(WRITTEN, "upp er"), "upperdir");
	/* A copy of the upper, same names and bytes, is another layer. */
	tu_file("copy/b", "upper");
	tu_expect_str(IN_USE(WRITTEN, "copy"), "none");
}

Test(mountinfo, finds_a_lower_through_a_relative_path)
{
	mount_overlay();
	cr_assert_eq(chdir(tu_tmpdir()), 0);
	tu_expect_str(IN_USE(WRITTEN, "./lower/../lower"), "lowerdir");
	/* only read, a lower of a mount is no use that counts */
	tu_expect_str(IN_USE(READ, "./lower/../lower"), "none");
}

Test(mountinfo, finds_a_lower_through_a_bind_mount)
{
	mount_overlay();
	tu_mkdir("bind");
	cr_assert_eq(mount(tu_path("lower"), tu_path("bind"), NULL, MS_BIND,
			   NULL), 0, "%s", strerror(errno));
	mounted_at(tu_path("bind"));
	tu_expect_str(IN_USE(WRITTEN, "bind"), "lowerdir");
}

Test(mountinfo, finds_the_workdir)
{
	mount_overlay();
	tu_mkdir("other");
	tu_expect_str(IN_USE(READ, "other"), "none");
	tu_expect_str(IN_USE(READ, "other", "work"), "workdir");
}

Test(mountinfo, a_lower_read_does_not_hide_the_upper_or_the_workdir)
{
	mount_overlay();
	/* lowerdir= comes first in the options: still the upper is named,
	 * what the mount writes (fsck -n's warning) */
	tu_expect_str(IN_USE(READ, "lower", "upp er"), "upperdir");
	tu_mkdir("other");
	tu_expect_str(IN_USE(READ, "lower", "other", "work"), "workdir");
	tu_expect_str(IN_USE(READ, "lower", "other"), "none");
}

Test(mountinfo, a_relative_upper_is_asked_of_the_kernel)
{
	private_mounts();
	tu_file("lo/a", "lower");
	tu_file("up/b", "upper");
	tu_mkdir("wk");
	tu_mkdir("mnt");
	tu_mkdir("x/up");
	cr_assert_eq(chdir(tu_tmpdir()), 0);
	if (mount("overlay", "mnt", "overlay", 0,
		  "lowerdir=lo,upperdir=up,workdir=wk") < 0)
		cr_skip_test("cannot mount an overlay: %s", strerror(errno));
	mounted_at(tu_path("mnt"));
	/* relative to the mounter's cwd, which no reader knows: from ours,
	 * "up" of any mount anywhere would be taken for ours.  Never
	 * resolved here: the kernel's lock tells the real one. */
	cr_assert_eq(chdir(tu_path("x")), 0);
	tu_expect_str(IN_USE(READ, "./up"), "none");
	tu_expect_str(IN_USE(READ, "up"), "upperdir or workdir");
	tu_expect_str(IN_USE(READ, "wk"), "upperdir or workdir");
	/* a relative lower: whether it is a directory written, unknown */
	tu_expect_str(IN_USE(WRITTEN, "./up"), "unknown");
}

/* ---- mountinfo text, fed in ---------------------------------------------- */

static int probe_answer;	/* what the fake probe says */
static int probes;		/* how often it was asked */

static int fake_locked(int fd)
{
	(void)fd;
	probes++;
	errno = EPERM;
	return probe_answer;
}

/* hu_mountinfo_dirs() of @text for the directory @rel, @written or read:
 * "ROLE@MOUNTPOINT" (with @fstype: "ROLE@MOUNTPOINT (FSTYPE)"), "unknown
 * OPTION@MOUNTPOINT" or "none". */
static char *scan_as(const char *text, const char *rel, bool written,
		     bool fstype)
{
	struct hu_mount_use use;
	struct hu_error e = { 0 };
	struct hu_dir_ref d = { open(tu_path(rel), O_RDONLY | O_DIRECTORY),
				rel, "layer", written, false };
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	char *out;
	int rc;

	cr_assert_not_null(f);
	cr_assert_geq(d.fd, 0);
	rc = hu_mountinfo_dirs(f, "text", &d, 1, fake_locked, &use, &e);
	cr_assert_geq(rc, 0, "%s: %s", e.path, e.msg);
	if (rc == 0)
		out = strdup("none");
	else if (rc == 1 && fstype)
		cr_assert_geq(asprintf(&out, "%s@%s (%s)", use.role,
				       use.mountpoint, use.fstype), 0);
	else if (rc == 1)
		cr_assert_geq(asprintf(&out, "%s@%s", use.role,
				       use.mountpoint), 0);
	else
		cr_assert_geq(asprintf(&out, "unknown %s@%s", use.option,
				       use.mountpoint), 0);
	if (rc == 1)
		cr_expect_str_eq(use.layer, rel);
	hu_mount_use_free(&use);
	fclose(f);
	close(d.fd);
	hu_error_clear(&e);
	return out;
}

static char *dirs_scan(const char *text, const char *rel, bool written)
{
	return scan_as(text, rel, written, false);
}

static char *scan(const char *text, const char *rel, bool written)
{
	return scan_as(text, rel, written, true);
}

/* One mountinfo line of @fstype at "/m n" (escaped) with @superopts. */
static const char *line(const char *fstype, const char *superopts)
{
	static char *buf;

	free(buf);
	cr_assert_geq(asprintf(&buf,
			       "36 35 98:0 / /proc rw - proc proc rw\n"
			       "48 26 0:39 / /m\\040n rw,relatime shared:7 "
			       "master:1 - %s src %s\n", fstype, superopts),
		      0);
	return buf;
}

/* @rel's absolute path in mountinfo's escapes: ' ' \040, ',' \054,
 * '\' \134; with @colon, ':' and '\' first escaped by '\' as in a
 * lowerdir= list. */
static const char *escaped(const char *rel, bool colon)
{
	static char ring[4][4096];
	static int next;
	char *out = ring[next++ % 4], *o = out;

	for (const char *p = tu_path(rel); *p; p++) {
		if (colon && (*p == ':' || *p == '\\'))
			o += sprintf(o, "\\134");
		if (*p == ' ' || *p == ',' || *p == '\\' || *p == '=')
			o += sprintf(o, "\\%03o", (unsigned char)*p);
		else
			*o++ = *p;
	}
	*o = '\0';
	return out;
}

Test(mountinfo, lowerdir_list_escapes_and_data_layers)
{
	char *opts;

	tu_mkdir("a b:c,d\\e=f");
	tu_mkdir("data");
	tu_mkdir("x");
	cr_assert_geq(asprintf(&opts,
			       "rw,lowerdir=/nonexistent:%s::%s,"
			       "upperdir=/nowhere,workdir=/nowhere2,uuid=on",
			       escaped("a b:c,d\\e=f", true),
			       escaped("data", true)), 0);
	probe_answer = 0;
	tu_expect_str(scan(line("overlay", opts), "a b:c,d\\e=f", WRITTEN),
		      "lowerdir@/m n (overlay)");
	tu_expect_str(scan(line("overlay", opts), "data", WRITTEN),
		      "lowerdir@/m n (overlay)");
	/* in none of them: only the lower that does not resolve is left
	 * open (the kernel, asked of the upper's, said no) */
	tu_expect_str(scan(line("overlay", opts), "x", WRITTEN),
		      "unknown lowerdir=/nonexistent@/m n");
	tu_expect_str(scan(line("overlay", opts), "x", READ), "none");
	free(opts);
}

Test(mountinfo, lowerdir_add_and_datadir_add_are_single_paths)
{
	char *opts;

	tu_mkdir("l:1");
	tu_mkdir("d,1");
	cr_assert_geq(asprintf(&opts,
			       "rw,lowerdir+=%s,datadir+=%s,upperdir=/nowhere",
			       escaped("l:1", false), escaped("d,1", false)),
		      0);
	probe_answer = 0;
	tu_expect_str(scan(line("overlay", opts), "l:1", WRITTEN),
		      "lowerdir@/m n (overlay)");
	tu_expect_str(scan(line("overlay", opts), "d,1", WRITTEN),
		      "datadir@/m n (overlay)");
	tu_expect_str(scan(line("overlay", opts), "d,1", READ), "none");
	free(opts);
}

Test(mountinfo, upperdir_with_an_older_kernels_escapes)
{
	char *opts;

	tu_mkdir("u:1");
	tu_mkdir("w");
	/* Before 6.5 the mounter's "u\:1" was kept as given. */
	cr_assert_geq(asprintf(&opts, "rw,lowerdir=/a,upperdir=%s,workdir=%s",
			       escaped("u:1", true), escaped("w", false)), 0);
	probes = 0;
	tu_expect_str(scan(line("overlay", opts), "u:1", READ),
		      "upperdir@/m n (overlay)");
	tu_expect_str(scan(line("overlay", opts), "w", READ),
		      "workdir@/m n (overlay)");
	/* resolved once unescaped: the kernel was not asked */
	cr_expect_eq(probes, 0);
	free(opts);
}

Test(mountinfo, other_filesystems_and_invisible_options)
{
	char *opts;

	tu_mkdir("u");
	cr_assert_geq(asprintf(&opts, "rw,upperdir=%s", escaped("u", false)),
		      0);
	tu_expect_str(scan(line("union", opts), "u", READ),
		      "upperdir@/m n (union)");
	tu_expect_str(scan(line("fuse.fuse-overlayfs", opts), "u", READ),
		      "upperdir@/m n (fuse.fuse-overlayfs)");
	/* Not an overlay: its options mean something else. */
	probes = 0;
	tu_expect_str(scan(line("ext4", opts), "u", WRITTEN), "none");
	/* fuse-overlayfs as it usually shows: no directories at all. */
	tu_expect_str(scan(line("fuse.fuse-overlayfs",
				"rw,user_id=0,group_id=0"), "u", WRITTEN),
		      "none");
	/* Cut lines and garbage are passed over. */
	tu_expect_str(scan("1 2 3\n\n - overlay\n48 26 0:39 / /m rw -\n",
			   "u", WRITTEN), "none");
	cr_expect_eq(probes, 0);
	/* A relative path is never tried from here: the kernel is asked. */
	probe_answer = 0;
	tu_expect_str(scan(line("overlay", "rw,upperdir=u"), "u", WRITTEN),
		      "none");
	cr_expect_eq(probes, 1);
	free(opts);
}

/* hu_mountinfo_beneath() of mountinfo @text and directory @dir. */
static bool beneath(const char *text, const char *dir)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	bool rc;

	cr_assert_not_null(f);
	rc = hu_mountinfo_beneath(f, dir);
	fclose(f);
	return rc;
}

Test(mountinfo, a_mount_beneath_a_directory_by_the_kernels_paths)
{
	static const char text[] =
		"22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
		"30 22 0:5 / /a/b\\040c/d rw shared:2 - tmpfs tmpfs rw\n"
		"31 22 0:6 / /x/yz rw shared:3 - tmpfs tmpfs rw\n";

	/* beneath, however deep, and with mountinfo's escapes undone */
	cr_expect(beneath(text, "/a"));
	cr_expect(beneath(text, "/a/b c"));
	cr_expect_not(beneath(text, "/a/b\\040c"));
	cr_expect_not(beneath(text, "/a/b c/d"));
	cr_expect(beneath(text, "/x"));
	/* the mount on the directory itself is the directory's own
	 * filesystem; a name that only starts alike is a sibling */
	cr_expect_not(beneath(text, "/x/yz"));
	cr_expect_not(beneath(text, "/x/y"));
	cr_expect_not(beneath(text, "/a/b"));
	cr_expect_not(beneath(text, "/q"));
	/* every mount but the root's is beneath "/" */
	cr_expect(beneath(text, "/"));
	cr_expect_not(beneath("22 1 254:0 / / rw - ext4 /dev/vda rw\n",
			      "/"));
	/* a line cut short could be any mount: assume one */
	cr_expect(beneath("22 1 254:0 / /elsewhere\n", "/q"));
	cr_expect(beneath("22 1 254:0\n", "/q"));
}

/* A real mount beneath a layer turns its short reads off; without it the
 * layer's listings end at a short read and find every name. */
Test(mountinfo, a_layer_with_a_mount_beneath_reads_to_the_end)
{
	struct hu_stack_opts so = { .format = HU_FMT_UNION };
	struct hu_layer l;
	struct hu_error e = { 0 };
	struct statfs sf;

	private_mounts();
	tu_mkdir("layer/sub/m");
	cr_assert_eq(statfs(tu_path("layer"), &sf), 0);
	if (sf.f_type != EXT4_SUPER_MAGIC && sf.f_type != TMPFS_MAGIC &&
	    sf.f_type != XFS_SUPER_MAGIC && sf.f_type != BTRFS_SUPER_MAGIC)
		cr_skip_test("the test directory's filesystem (%lx) is not "
			     "one whose reads fill", (long)sf.f_type);
	cr_assert_eq(hu_layer_open(&l, tu_path("layer"), &so, &e), 0,
		     "%s", e.msg);
	cr_expect(l.readdir_fills);
	hu_layer_close(&l);
	cr_assert_eq(mount("tmpfs", tu_path("layer/sub/m"), "tmpfs", 0,
			   NULL), 0, "%s", strerror(errno));
	mounted_at(tu_path("layer/sub/m"));
	cr_assert_eq(hu_layer_open(&l, tu_path("layer"), &so, &e), 0,
		     "%s", e.msg);
	cr_expect_not(l.readdir_fills);
	hu_layer_close(&l);
	/* the mounted filesystem as a layer of its own: nothing beneath */
	cr_assert_eq(hu_layer_open(&l, tu_path("layer/sub/m"), &so, &e), 0,
		     "%s", e.msg);
	cr_expect(l.readdir_fills);
	hu_layer_close(&l);
	hu_error_clear(&e);
}

Test(mountinfo, dirs_written_count_in_any_role_read_ones_as_upper_only)
{
	char *opts;

	tu_mkdir("lo");
	tu_mkdir("up");
	cr_assert_geq(asprintf(&opts, "rw,lowerdir=%s,upperdir=%s,"
			       "workdir=/nowhere", escaped("lo", true),
			       escaped("up", false)), 0);
	probes = 0;
	probe_answer = 0;
	tu_expect_str(dirs_scan(line("overlay", opts), "lo", true),
		      "lowerdir@/m n");
	/* a lower read by one command and another mount: fine */
	tu_expect_str(dirs_scan(line("overlay", opts), "lo", false), "none");
	tu_expect_str(dirs_scan(line("overlay", opts), "up", false),
		      "upperdir@/m n");
	/* /nowhere does not resolve: the probe was asked, said no */
	cr_expect_eq(probes, 1);
	free(opts);
}

Test(mountinfo, dirs_relative_upper_asked_of_the_kernel)
{
	const char *text = line("overlay",
				"rw,lowerdir=/,upperdir=up,workdir=wd");

	tu_mkdir("x");
	probe_answer = 1;
	tu_expect_str(dirs_scan(text, "x", true), "upperdir or workdir@/m n");
	tu_expect_str(dirs_scan(text, "x", false),
		      "upperdir or workdir@/m n");
	probe_answer = 0;
	tu_expect_str(dirs_scan(text, "x", true), "none");
	/* the kernel cannot be asked: unknown, naming the option */
	probe_answer = -1;
	tu_expect_str(dirs_scan(text, "x", true), "unknown upperdir=up@/m n");
}

Test(mountinfo, dirs_relative_lower_is_unknown_to_a_writer)
{
	const char *text = line("overlay", "rw,lowerdir=/:lower::data");

	tu_mkdir("x");
	probes = 0;
	probe_answer = 0;
	tu_expect_str(dirs_scan(text, "x", true),
		      "unknown lowerdir=lower@/m n");
	/* a reader does not care about lowers */
	tu_expect_str(dirs_scan(text, "x", false), "none");
	/* no upperdir hidden: the kernel was not asked */
	cr_expect_eq(probes, 0);
}
