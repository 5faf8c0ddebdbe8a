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

/* hu_stack_mounted() of the stack of the directories @rel (relative to
 * the test directory, or absolute) and the extra directory @extra
 * (NULL: none): the role found, or "none". */
static char *mounted_as(const char *extra, int n, const char *const rel[])
{
	struct hu_stack_opts so = { 0 };
	struct hu_stack s = { 0 };
	struct hu_mount_use use;
	struct hu_error e = { 0 };
	char *paths[4], *role;
	int fd = -1, rc;

	for (int i = 0; i < n; i++)
		paths[i] = strdup(rel[i][0] == '/' || rel[i][0] == '.' ?
				  rel[i] : tu_path(rel[i]));
	cr_assert_eq(hu_stack_open(&s, paths, (size_t)n, &so, &e), 0,
		     "%s: %s", e.path, e.msg);
	if (extra)
		cr_assert_geq(fd = open(tu_path(extra),
					O_RDONLY | O_DIRECTORY), 0);
	rc = hu_stack_mounted(&s, fd, &use, &e);
	cr_assert_geq(rc, 0, "%s: %s", e.path, e.msg);
	if (rc == 0) {
		cr_expect_null(use.mountpoint);
		role = strdup("none");
	} else {
		cr_expect_str_eq(use.mountpoint, tu_path("mnt"));
		cr_expect_str_eq(use.fstype, "overlay");
		/* the layer named is the stack's, by the path it was given */
		if (strcmp(use.role, "workdir") == 0 && extra)
			cr_expect_null(use.layer);
		else if (strcmp(use.role, "lowerdir") != 0)
			cr_expect(use.layer &&
				  strcmp(use.layer, paths[n - 1]) == 0,
				  "layer %s", use.layer ? use.layer : "NULL");
		role = strdup(use.role);
	}
	hu_mount_use_free(&use);
	if (fd >= 0)
		close(fd);
	hu_stack_close(&s);
	for (int i = 0; i < n; i++)
		free(paths[i]);
	hu_error_clear(&e);
	return role;
}

#define MOUNTED_AS(extra, ...)                                           \
	mounted_as(extra,                                                \
		   sizeof((const char *[]){ __VA_ARGS__ }) / sizeof(char *), \
		   (const char *[]){ __VA_ARGS__ })

Test(mountinfo, stack_not_mounted_is_not_in_use)
{
	private_mounts();
	tu_file("lower/a", "x");
	tu_file("upper/b", "y");
	tu_mkdir("work");
	tu_expect_str(MOUNTED_AS("work", "lower", "upper"), "none");
}

Test(mountinfo, finds_the_upper)
{
	mount_overlay();
	tu_expect_str(MOUNTED_AS(NULL, "upp er"), "upperdir");
	/* A copy of the upper, same names and bytes, is another layer. */
	tu_file("copy/b", "upper");
	tu_expect_str(MOUNTED_AS(NULL, "copy"), "none");
}

Test(mountinfo, finds_a_lower_through_a_relative_path)
{
	mount_overlay();
	cr_assert_eq(chdir(tu_tmpdir()), 0);
	tu_expect_str(MOUNTED_AS(NULL, "./lower/../lower"), "lowerdir");
}

Test(mountinfo, finds_a_lower_through_a_bind_mount)
{
	mount_overlay();
	tu_mkdir("bind");
	cr_assert_eq(mount(tu_path("lower"), tu_path("bind"), NULL, MS_BIND,
			   NULL), 0, "%s", strerror(errno));
	mounted_at(tu_path("bind"));
	tu_expect_str(MOUNTED_AS(NULL, "bind"), "lowerdir");
}

Test(mountinfo, finds_the_workdir_by_its_fd)
{
	mount_overlay();
	tu_mkdir("other");
	tu_expect_str(MOUNTED_AS(NULL, "other"), "none");
	tu_expect_str(MOUNTED_AS("work", "other"), "workdir");
}

Test(mountinfo, names_the_top_layer_then_the_extra_then_a_lower)
{
	mount_overlay();
	/* lowerdir= comes first in the options: still the upper is named,
	 * the layer fsck writes */
	tu_expect_str(MOUNTED_AS("work", "lower", "upp er"), "upperdir");
	tu_mkdir("other");
	tu_expect_str(MOUNTED_AS("work", "lower", "other"), "workdir");
	tu_expect_str(MOUNTED_AS(NULL, "lower", "other"), "lowerdir");
}

Test(mountinfo, passes_over_a_path_the_mount_names_relatively)
{
	private_mounts();
	tu_file("lo/a", "lower");
	tu_file("up/b", "upper");
	tu_mkdir("wk");
	tu_mkdir("mnt");
	cr_assert_eq(chdir(tu_tmpdir()), 0);
	if (mount("overlay", "mnt", "overlay", 0,
		  "lowerdir=lo,upperdir=up,workdir=wk") < 0)
		cr_skip_test("cannot mount an overlay: %s", strerror(errno));
	mounted_at(tu_path("mnt"));
	/* relative to the mounter's cwd, which no reader knows: from ours,
	 * "up" of any mount anywhere would be taken for ours */
	tu_expect_str(MOUNTED_AS(NULL, "up"), "none");
}

/* ---- mountinfo text, fed in ---------------------------------------------- */

/* hu_mountinfo_scan() of @text against the stack of the directory @rel:
 * "ROLE@MOUNTPOINT (FSTYPE)" or "none". */
static char *scan(const char *text, const char *rel)
{
	struct hu_stack_opts so = { 0 };
	struct hu_stack s = { 0 };
	struct hu_mount_use use;
	struct hu_error e = { 0 };
	char *path = strdup(tu_path(rel)), *out;
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int rc;

	cr_assert_not_null(f);
	cr_assert_eq(hu_stack_open(&s, &path, 1, &so, &e), 0, "%s: %s",
		     e.path, e.msg);
	rc = hu_mountinfo_scan(f, "text", &s, -1, &use, &e);
	cr_assert_geq(rc, 0, "%s: %s", e.path, e.msg);
	if (rc == 0)
		out = strdup("none");
	else
		cr_assert_geq(asprintf(&out, "%s@%s (%s)", use.role,
				       use.mountpoint, use.fstype), 0);
	hu_mount_use_free(&use);
	hu_stack_close(&s);
	fclose(f);
	free(path);
	hu_error_clear(&e);
	return out;
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
	tu_expect_str(scan(line("overlay", opts), "a b:c,d\\e=f"),
		      "lowerdir@/m n (overlay)");
	tu_expect_str(scan(line("overlay", opts), "data"),
		      "lowerdir@/m n (overlay)");
	tu_expect_str(scan(line("overlay", opts), "x"), "none");
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
	tu_expect_str(scan(line("overlay", opts), "l:1"),
		      "lowerdir@/m n (overlay)");
	tu_expect_str(scan(line("overlay", opts), "d,1"),
		      "datadir@/m n (overlay)");
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
	tu_expect_str(scan(line("overlay", opts), "u:1"),
		      "upperdir@/m n (overlay)");
	tu_expect_str(scan(line("overlay", opts), "w"),
		      "workdir@/m n (overlay)");
	free(opts);
}

Test(mountinfo, other_filesystems_and_invisible_options)
{
	char *opts;

	tu_mkdir("u");
	cr_assert_geq(asprintf(&opts, "rw,upperdir=%s", escaped("u", false)),
		      0);
	tu_expect_str(scan(line("union", opts), "u"), "upperdir@/m n (union)");
	tu_expect_str(scan(line("fuse.fuse-overlayfs", opts), "u"),
		      "upperdir@/m n (fuse.fuse-overlayfs)");
	/* Not an overlay: its options mean something else. */
	tu_expect_str(scan(line("ext4", opts), "u"), "none");
	/* fuse-overlayfs as it usually shows: no directories at all. */
	tu_expect_str(scan(line("fuse.fuse-overlayfs",
				"rw,user_id=0,group_id=0"), "u"), "none");
	/* A relative path, and cut lines and garbage, are passed over. */
	tu_expect_str(scan(line("overlay", "rw,upperdir=u"), "u"), "none");
	tu_expect_str(scan("1 2 3\n\n - overlay\n48 26 0:39 / /m rw -\n",
			   "u"), "none");
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

/* ---- hu_mountinfo_dirs: what a command writes or reads ------------------- */

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
 * "ROLE@MOUNTPOINT", "unknown OPTION@MOUNTPOINT" or "none". */
static char *dirs_scan(const char *text, const char *rel, bool written)
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
