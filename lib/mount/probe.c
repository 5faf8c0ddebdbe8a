/* SPDX-License-Identifier: MIT */
/*
 * Is a directory the upperdir or workdir of a mounted overlay, whatever
 * path that mount named it by?  The kernel knows: it marks both in use
 * (fs/overlayfs/super.c, ovl_get_upper(): ovl_inuse_trylock() of the
 * upper root, ovl_get_workdir() likewise of the workdir), and a second
 * overlay made with index=on that names a marked directory as its
 * upperdir fails with EBUSY ("upperdir is in-use as upperdir/workdir of
 * another mount").
 *
 * So the probe makes such an overlay, never mounted: fsopen("overlay"),
 * the directory as upperdir (by /proc/self/fd, the very directory open
 * here), FSCONFIG_CMD_CREATE.  Its workdir (and lowerdir) is the root of
 * a tmpfs made for the probe and never attached anywhere, so it is on
 * another mount than any directory: ovl_get_workdir() refuses that
 * (EINVAL, "workdir and upperdir must reside under the same mount")
 * before it locks, makes or writes anything, and that is the first
 * step after the upper's lock.  Nothing is written to the directory,
 * nothing is mounted; the kernel logs one line of each probe.  Its
 * options are checked when set (fsconfig(FSCONFIG_SET_STRING)), so an
 * error there (a read-only or unsuitable filesystem) is told apart from
 * the answer of CMD_CREATE.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <linux/mount.h>
#include <sys/syscall.h>

#include "internal.h"
#include "mount/mountinfo.h"

static int sys_fsopen(const char *fstype)
{
	return (int)syscall(SYS_fsopen, fstype, FSOPEN_CLOEXEC);
}

static int sys_fsconfig(int fd, unsigned int cmd, const char *key,
			const char *value)
{
	return (int)syscall(SYS_fsconfig, fd, cmd, key, value, 0);
}

/* A tmpfs of our own, attached nowhere (an fd of its root), or -1. */
static int scratch_tmpfs(void)
{
	int fs = sys_fsopen("tmpfs"), mnt = -1;

	if (fs < 0)
		return -1;
	if (sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL) == 0)
		mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, 0);
	close(fs);
	return mnt;
}

int hu_overlay_locked(int fd)
{
	char dir[HU_FDPATH_MAX], scratch[HU_FDPATH_MAX];
	int tmp = scratch_tmpfs(), ovl = -1, rc = -1, err;

	if (tmp < 0)
		return -1;
	hu_fdpath(dir, fd, NULL);
	hu_fdpath(scratch, tmp, NULL);
	ovl = sys_fsopen("overlay");
	if (ovl < 0 ||
	    sys_fsconfig(ovl, FSCONFIG_SET_STRING, "lowerdir", scratch) < 0 ||
	    sys_fsconfig(ovl, FSCONFIG_SET_STRING, "upperdir", dir) < 0 ||
	    sys_fsconfig(ovl, FSCONFIG_SET_STRING, "workdir", scratch) < 0 ||
	    sys_fsconfig(ovl, FSCONFIG_SET_STRING, "index", "on") < 0)
		goto out;
	if (sys_fsconfig(ovl, FSCONFIG_CMD_CREATE, NULL, NULL) == 0) {
		/* a kernel that no longer refuses the workdir: the answer
		 * is not the one asked for */
		errno = ENOTSUP;
		goto out;
	}
	if (errno == EBUSY)
		rc = 1;
	else if (errno == EINVAL)
		rc = 0;
out:
	err = errno;
	if (ovl >= 0)
		close(ovl);
	close(tmp);
	errno = err;
	return rc;
}
