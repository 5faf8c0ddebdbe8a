/* SPDX-License-Identifier: MIT */
/*
 * One writer per output, and what killed writers leave.  A run writing
 * output NAME (flatten's or diff --oci's file, merge's or convert's tree)
 * holds flock(2) on ".NAME.hunion-lock" beside it while it has a
 * temporary there (NAME shortened with a hash where it is too long for
 * that: hu_temp_stem()).  So runs writing one output take turns, and the run
 * that holds the lock knows that every ".NAME.hunion-XXXXXX" beside it
 * was left by a run that died (SIGKILL, a crash, a power cut): no live
 * run can own one.  It moves them aside before it makes its own, one
 * rename each (aside.c), and they are removed after the run's work: a
 * killed merge's tree of 2 GB costs the next run no wait.
 *
 * A lock, not a pid in the name: the kernel drops a dead process's locks
 * whatever killed it, in every pid namespace, and no reused pid can look
 * alive.  The lock file goes with its last holder; one a killed run left
 * is taken over by the next.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static bool is_regular(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

/* Open the lock file @name, created when missing.  Never through a
 * symlink, and never O_CREAT on a file that exists (the kernel's
 * protected_regular refuses that on another user's file in a sticky
 * directory).  Writable where we may: NFS locks need it. */
static int open_lock(int dirfd, const char *name)
{
	const int flags = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;

	for (int tries = 0; tries < 100; tries++) {
		int fd = openat(dirfd, name, O_RDWR | flags);

		if (fd < 0 && errno == EACCES)
			fd = openat(dirfd, name, O_RDONLY | flags);
		if (fd >= 0 && !is_regular(fd))
			return close(fd), errno = EEXIST, -1;
		if (fd >= 0 || errno != ENOENT)
			return fd;
		fd = hu_wr_create_lock(dirfd, name, 0644);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	errno = EAGAIN;
	return -1;
}

/* The directory @out is in, for the progress line: NULL when out of
 * memory. */
static char *out_dir(const char *out)
{
	const char *slash = strrchr(out, '/');

	if (!slash)
		return strdup(".");
	return strndup(out, slash == out ? 1 : (size_t)(slash - out));
}

/* Move the temporaries of @base a killed run left aside: regular files
 * (flatten's) and trees (merge's), nothing else; and take over what a
 * dead run moved aside here.  Best effort: what cannot be moved stays
 * for the next run. */
static void sweep(int dirfd, const char *base, const char *out)
{
	struct hu_names names;
	struct stat st;
	char *dir;

	if (hu_names_read(dirfd, &names, NULL, NULL) < 0)
		return;
	dir = out_dir(out);
	for (size_t i = 0; dir && i < names.n; i++) {
		const char *n = names.v[i].name;

		if (hu_aside_adopt(dirfd, n, dir) ||
		    !hu_is_temp_of(n, base) ||
		    fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))
			(void)hu_aside_move(dirfd, n, -1, dir);
	}
	free(dir);
	hu_names_free(&names);
}

/* Wait for the lock on @fd: 1 when held, 0 when the filesystem has no
 * locks (some network filesystems: go on as before locks, removing
 * nothing), -1 when interrupted.  flock(2) would be restarted after the
 * front end's signal handler (SA_RESTART), so a run waiting for a long
 * one could not be stopped: wait in naps, which a signal ends. */
static int wait_lock(int fd, struct hu_error *e)
{
	struct timespec nap = { 0, 1000000 };	/* 1 ms, up to 128 ms */

	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return 0;
		if (hu_interrupt_check(e) < 0)
			return -1;
		(void)nanosleep(&nap, NULL);
		if (nap.tv_nsec < 128000000)
			nap.tv_nsec *= 2;
	}
	return 1;
}

int hu_outlock_take(struct hu_outlock *k, int dirfd, const char *base,
		    const char *out, struct hu_error *e)
{
	int rc;
	char stem[HU_TEMP_STEM_SIZE];

	k->fd = -1;
	k->name = NULL;
	if (hu_wr_dry_run())
		return 0;
	hu_temp_stem(base, stem);	/* fits NAME_MAX whatever @base */
	if (asprintf(&k->name, ".%s.hunion-lock", stem) < 0) {
		k->name = NULL;
		return hu_error_set(e, ENOMEM, out, "out of memory");
	}
	for (;;) {
		k->fd = open_lock(dirfd, k->name);
		if (k->fd < 0)
			return hu_error_set(e, errno, out, "cannot make its "
					    "lock file %s", k->name);
		rc = wait_lock(k->fd, e);
		/* A holder before us may have removed the lock file while
		 * we waited: then we would hold the lock of nothing. */
		if (rc < 0 || (rc > 0 && hu_fd_is_at(dirfd, k->name, k->fd)))
			break;
		close(k->fd);
		k->fd = -1;
		if (rc == 0)	/* no locks here: go on unlocked */
			return 0;
	}
	if (rc < 0) {		/* not ours: drop must not unlink it */
		close(k->fd);
		k->fd = -1;
		hu_error_prefix(e, out);
		return -1;
	}
	sweep(dirfd, base, out);
	if (hu_interrupt_check(e) < 0) {
		hu_error_prefix(e, out);
		return -1;
	}
	return 0;
}

void hu_outlock_drop(struct hu_outlock *k, int dirfd)
{
	/* k->fd means something only with k->name (a zeroed struct) */
	/* Unlinked while held: whoever waits on this file then finds it
	 * gone (hu_fd_is_at) and makes a new one. */
	if (k->name && k->fd >= 0) {
		(void)hu_wr_unlinkat(dirfd, k->name, 0);
		close(k->fd);
	}
	free(k->name);
	k->fd = -1;
	k->name = NULL;
}
