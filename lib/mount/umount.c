/* SPDX-License-Identifier: MIT */
/*
 * Unmounting what hunion mounts (overlay, union, fuse-overlayfs), and,
 * when the kernel says busy, who holds it: the processes whose working
 * directory, root or open files lie in the mount (told by mount ID:
 * statx(STATX_MNT_ID) of /proc/PID/cwd and root, "mnt_id:" of
 * /proc/PID/fdinfo/N), and the mounts beneath it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

static int mnt_id_of(int dirfd, const char *name, int flags, uint64_t *id)
{
	struct statx stx;

	if (statx(dirfd, name, flags, STATX_MNT_ID, &stx) < 0)
		return -1;
	if (!(stx.stx_mask & STATX_MNT_ID)) {
		errno = EOPNOTSUPP;
		return -1;
	}
	*id = stx.stx_mnt_id;
	return 0;
}

/* The fstype of mount @id, and whether mount @id has mounts beneath it
 * (the first one's mount point into *@child), from mountinfo. */
static int mount_info(uint64_t id, char *fstype, size_t len, char **child)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	fstype[0] = '\0';
	*child = NULL;
	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0) {
		unsigned long long mid, parent;
		char mp[4096];
		const char *sep;

		if (sscanf(line, "%llu %llu %*s %*s %4095s", &mid, &parent,
			   mp) != 3)
			continue;
		sep = strstr(line, " - ");
		if (mid == id && sep) {
			snprintf(fstype, len, "%.*s",
				 (int)strcspn(sep + 3, " "), sep + 3);
			found = 1;
		} else if (parent == id && !*child) {
			*child = strdup(mp);
		}
	}
	free(line);
	fclose(f);
	return found ? 0 : -1;
}

static int add_holder(struct hu_mount_holder **h, size_t *n, pid_t pid,
		      const char *comm, const char *what, const char *path)
{
	struct hu_mount_holder *v = realloc(*h, (*n + 1) * sizeof(*v));

	if (!v)
		return -1;
	*h = v;
	v[*n] = (struct hu_mount_holder){ .pid = pid };
	snprintf(v[*n].comm, sizeof(v[*n].comm), "%s", comm);
	snprintf(v[*n].what, sizeof(v[*n].what), "%s", what);
	v[*n].path = path ? strdup(path) : NULL;
	(*n)++;
	return 0;
}

/* Which open files of process @pidfd are in mount @id. */
static void fds_in(int pidfd, pid_t pid, const char *comm, uint64_t id,
		   struct hu_mount_holder **h, size_t *n)
{
	int dfd = openat(pidfd, "fdinfo", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;

	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		char buf[512], what[32];
		unsigned long long mid;
		const char *m;
		int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC);
		ssize_t len;

		if (fd < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		m = strstr(buf, "mnt_id:");
		if (m && sscanf(m + 7, "%llu", &mid) == 1 && mid == id) {
			snprintf(what, sizeof(what), "fd %d", atoi(de->d_name));
			(void)add_holder(h, n, pid, comm, what, NULL);
		}
	}
	closedir(d);
}

static void holders_of(uint64_t id, const char *child,
		       struct hu_mount_holder **h, size_t *n)
{
	DIR *proc = opendir("/proc");
	struct dirent *de;

	if (child)
		(void)add_holder(h, n, 0, "", "mount", child);
	if (!proc)
		return;
	while ((de = readdir(proc))) {
		char comm[32] = "";
		uint64_t mid;
		pid_t pid = (pid_t)atoi(de->d_name);
		int pidfd, cfd;
		ssize_t len;

		if (pid <= 0 || pid == getpid())
			continue;
		pidfd = openat(dirfd(proc), de->d_name, O_RDONLY |
			       O_DIRECTORY | O_CLOEXEC);
		if (pidfd < 0)
			continue;
		cfd = openat(pidfd, "comm", O_RDONLY | O_CLOEXEC);
		if (cfd >= 0) {
			len = read(cfd, comm, sizeof(comm) - 1);
			comm[len > 0 ? len : 0] = '\0';
			comm[strcspn(comm, "\n")] = '\0';
			close(cfd);
		}
		if (mnt_id_of(pidfd, "cwd", 0, &mid) == 0 && mid == id)
			(void)add_holder(h, n, pid, comm, "cwd", NULL);
		if (mnt_id_of(pidfd, "root", 0, &mid) == 0 && mid == id)
			(void)add_holder(h, n, pid, comm, "root", NULL);
		fds_in(pidfd, pid, comm, id, h, n);
		close(pidfd);
	}
	closedir(proc);
}

/* A non-root user's fuse mount: fusermount3 -u (setuid root) does it. */
static int fusermount_u(const char *mp, bool lazy, struct hu_error *e)
{
	static const char *const tools[] = { "fusermount3", "fusermount" };
	int status;

	for (size_t i = 0; i < 2; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return hu_error_set(e, errno, NULL, "cannot fork");
		if (pid == 0) {
			execlp(tools[i], tools[i], lazy ? "-uz" : "-u", "-q",
			       "--", mp, (char *)NULL);
			_exit(127);
		}
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR)
				return hu_error_set(e, errno, NULL,
						    "cannot wait");
		if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
			continue;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			return 0;
		errno = EBUSY;	/* what fusermount refuses for, mostly */
		return -1;
	}
	return hu_error_set(e, 0, mp, "cannot unmount: neither fusermount3 "
			    "nor fusermount is installed");
}

int hu_umount(const char *mountpoint, const struct hu_umount_opts *o,
	      struct hu_mount_holder **holders, size_t *n,
	      struct hu_error *e)
{
	int flags = UMOUNT_NOFOLLOW | (o->lazy ? MNT_DETACH : 0) |
		    (o->force ? MNT_FORCE : 0);
	char fstype[64], *child = NULL;
	struct statx stx;
	uint64_t id;
	int rc;

	*holders = NULL;
	*n = 0;
	if (statx(AT_FDCWD, mountpoint, AT_SYMLINK_NOFOLLOW,
		  STATX_MNT_ID | STATX_TYPE, &stx) < 0)
		return hu_error_set(e, errno, mountpoint, "cannot unmount");
	if (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
	    !(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return hu_error_set(e, 0, mountpoint, "not a mount point");
	id = stx.stx_mnt_id;
	if (mount_info(id, fstype, sizeof(fstype), &child) < 0) {
		free(child);
		return hu_error_set(e, 0, mountpoint, "not in this process's "
				    "mount table");
	}
	if (strcmp(fstype, "overlay") && strcmp(fstype, "union") &&
	    strcmp(fstype, "fuse.fuse-overlayfs")) {
		free(child);
		return hu_error_set(e, 0, mountpoint, "a %s mount, not one "
				    "hunion makes (overlay, union, "
				    "fuse-overlayfs): use umount(8)", fstype);
	}
	if (geteuid() != 0 && !strcmp(fstype, "fuse.fuse-overlayfs"))
		rc = fusermount_u(mountpoint, o->lazy, e);
	else
		rc = umount2(mountpoint, flags);
	if (rc == 0) {
		free(child);
		return 0;
	}
	if (errno != EBUSY) {
		free(child);
		return hu_error_set(e, errno, mountpoint, "cannot unmount");
	}
	holders_of(id, child, holders, n);
	free(child);
	hu_error_set(e, EBUSY, mountpoint, "cannot unmount: busy%s",
		     *n ? "" : " (no process found holding it: a memory "
		     "map, or another mount namespace)");
	return -1;
}

void hu_mount_holders_free(struct hu_mount_holder *h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(h[i].path);
	free(h);
}
