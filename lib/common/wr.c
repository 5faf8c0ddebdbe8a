/* SPDX-License-Identifier: MIT */
/*
 * The write wrapper: the one door through which hunion changes a
 * filesystem.  Dry runs succeed without touching anything; HUNION_FAULT
 * injects a failure into the Nth call of one operation, so tests can prove
 * that every error path cleans up, or (HUNION_FAULT=kill:N) kills the
 * process before the Nth change of any kind, so they can prove what a
 * crash leaves behind, or (HUNION_FAULT=int:N) interrupts it there, as
 * Ctrl-C would.
 *
 * kill and int hit at exactly that step, however busy the machine: the
 * signal goes to the thread making the Nth change, never to the process.
 * A signal sent to the process (kill(getpid(), ...)) goes to whichever of
 * its threads the kernel picks (the pool's workers, the walk's lister,
 * the compressors), which may run its handler only later, while the
 * change goes on and the next ones too: the stop point then drifts with
 * the load.  So:
 *   kill:N  SIGKILL to the calling thread (raise), which never returns:
 *           the kernel kills the whole process before the call gets back
 *           to user space, so the Nth change is never made;
 *   int:N   SIGINT to the calling thread (raise), which returns only after
 *           the handler ran (POSIX): the front end's handler has asked the
 *           run to stop (hu_interrupt), and then the Nth change is made,
 *           and the run stops at its next check.  hu_interrupt() is also
 *           called here, for a thread where SIGINT is blocked or ignored
 *           (a script's background job), so the run stops there too.
 * N counts calls in the order the threads make them: on one thread that
 * is the same change every run; with several writing at once (merge
 * --into's pool) the Nth may be another change from one run to the next,
 * and changes other threads are making at that moment may or may not be
 * made.  Tests of such runs check what must hold whatever was cut.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "internal.h"

static bool dry_run;

static struct {
	char op[32];
	long nth;
	int err;
	long seen;
} fault;

void hu_wr_set_dry_run(bool on)
{
	dry_run = on;
}

void hu_dry_run(bool on)
{
	hu_wr_set_dry_run(on);
}

bool hu_wr_dry_run(void)
{
	return dry_run;
}

static int errno_by_name(const char *s)
{
	static const struct { const char *name; int err; } names[] = {
		{ "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT },
		{ "EPERM", EPERM }, { "EACCES", EACCES }, { "EXDEV", EXDEV },
		{ "ENOTSUP", ENOTSUP }, { "EROFS", EROFS },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].name) == 0)
			return names[i].err;
	return EIO;
}

static void fault_parse(void)
{
	const char *spec = getenv("HUNION_FAULT");
	const char *colon;

	if (!spec || !(colon = strchr(spec, ':')) ||
	    (size_t)(colon - spec) >= sizeof(fault.op))
		return;
	memcpy(fault.op, spec, colon - spec);
	fault.op[colon - spec] = '\0';
	fault.nth = strtol(colon + 1, NULL, 10);
	colon = strchr(colon + 1, ':');
	fault.err = colon ? errno_by_name(colon + 1) : EIO;
}

/* Stop the run here, on this thread (see the top of this file): killed
 * before the change, or interrupted with the change still to make. */
static void fault_signal(bool kill_it)
{
	if (kill_it) {
		(void)raise(SIGKILL);
		_exit(128 + SIGKILL);	/* not reached: SIGKILL cannot be
					 * caught, blocked or ignored */
	}
	(void)raise(SIGINT);
	hu_interrupt();
}

/* True when this call of @op must fail (errno is then set). */
static bool fault_hit(const char *op)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, fault_parse);
	if (!fault.op[0])
		return false;
	if (strcmp(fault.op, "kill") == 0 || strcmp(fault.op, "int") == 0) {
		/* Every call of every operation counts, except dry ones,
		 * which change nothing. */
		if (!dry_run && __atomic_add_fetch(&fault.seen, 1,
						   __ATOMIC_RELAXED) ==
				fault.nth)
			fault_signal(fault.op[0] == 'k');
		return false;
	}
	if (strcmp(fault.op, op) != 0)
		return false;
	/* Worker threads write too: count atomically. */
	if (__atomic_add_fetch(&fault.seen, 1, __ATOMIC_RELAXED) != fault.nth)
		return false;
	errno = fault.err;
	return true;
}

#define WR_GUARD(op)                 \
	do {                         \
		if (fault_hit(op))   \
			return -1;   \
		if (dry_run)         \
			return 0;    \
	} while (0)

int hu_wr_mkdirat(int dirfd, const char *name, mode_t mode)
{
	WR_GUARD("mkdir");
	return mkdirat(dirfd, name, mode);
}

int hu_wr_mknodat(int dirfd, const char *name, mode_t mode, dev_t dev)
{
	WR_GUARD("mknod");
	return mknodat(dirfd, name, mode, dev);
}

int hu_wr_symlinkat(const char *target, int dirfd, const char *name)
{
	WR_GUARD("symlink");
	return symlinkat(target, dirfd, name);
}

int hu_wr_linkat(int olddirfd, const char *oldname, int newdirfd,
		 const char *newname)
{
	WR_GUARD("link");
	return linkat(olddirfd, oldname, newdirfd, newname, 0);
}

int hu_wr_create(int dirfd, const char *name, mode_t mode)
{
	if (fault_hit("create"))
		return -1;
	if (dry_run)
		return open("/dev/null", O_WRONLY | O_CLOEXEC);
	return openat(dirfd, name,
		      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		      mode);
}

int hu_wr_create_lock(int dirfd, const char *name, mode_t mode)
{
	if (fault_hit("lock"))
		return -1;
	if (dry_run)
		return open("/dev/null", O_RDONLY | O_CLOEXEC);
	return openat(dirfd, name,
		      O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
}

int hu_wr_unlinkat(int dirfd, const char *name, int flags)
{
	WR_GUARD("unlink");
	return unlinkat(dirfd, name, flags);
}

int hu_wr_renameat2(int olddirfd, const char *oldname, int newdirfd,
		    const char *newname, unsigned int flags)
{
	WR_GUARD("rename");
	return renameat2(olddirfd, oldname, newdirfd, newname, flags);
}

int hu_wr_fchownat(int dirfd, const char *name, uid_t uid, gid_t gid,
		   int flags)
{
	WR_GUARD("chown");
	return fchownat(dirfd, name, uid, gid, flags);
}

int hu_wr_fchmod(int fd, mode_t mode)
{
	WR_GUARD("chmod");
	return fchmod(fd, mode);
}

int hu_wr_fchmodat(int dirfd, const char *name, mode_t mode)
{
	WR_GUARD("chmod");
	return fchmodat(dirfd, name, mode, 0);
}

int hu_wr_futimens(int fd, const struct timespec ts[2])
{
	WR_GUARD("utimens");
	return futimens(fd, ts);
}

int hu_wr_utimensat(int dirfd, const char *name, const struct timespec ts[2],
		    int flags)
{
	WR_GUARD("utimens");
	return utimensat(dirfd, name, ts, flags);
}

int hu_wr_setxattr_at(int dirfd, const char *name, const char *attr,
		      const void *value, size_t len, int flags)
{
	char p[HU_FDPATH_MAX];

	WR_GUARD("setxattr");
	if (!name || !*name)
		return fsetxattr(dirfd, attr, value, len, flags);
	return lsetxattr(hu_fdpath(p, dirfd, name), attr, value, len, flags);
}

int hu_wr_removexattr_at(int dirfd, const char *name, const char *attr)
{
	char p[HU_FDPATH_MAX];

	WR_GUARD("removexattr");
	if (!name || !*name)
		return fremovexattr(dirfd, attr);
	return lremovexattr(hu_fdpath(p, dirfd, name), attr);
}

ssize_t hu_wr_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	if (fault_hit("write"))
		return -1;
	if (dry_run)
		return (ssize_t)len;
	return pwrite(fd, buf, len, off);
}

ssize_t hu_wr_write(int fd, const void *buf, size_t len)
{
	if (fault_hit("write"))
		return -1;
	if (dry_run)
		return (ssize_t)len;
	return write(fd, buf, len);
}

int hu_wr_sync_range(int fd, off_t off, off_t len, unsigned int flags)
{
	WR_GUARD("sync");
	return sync_file_range(fd, off, len, flags);
}

ssize_t hu_wr_copy_range(int in, off_t *in_off, int out, off_t *out_off,
			 size_t len)
{
	if (fault_hit("write"))
		return -1;
	if (dry_run)
		return (ssize_t)len;
	return copy_file_range(in, in_off, out, out_off, len, 0);
}

int hu_wr_clone(int in, int out)
{
	WR_GUARD("clone");
	return ioctl(out, FICLONE, in);
}

int hu_wr_ftruncate(int fd, off_t len)
{
	WR_GUARD("truncate");
	return ftruncate(fd, len);
}

int hu_wr_fsync(int fd)
{
	WR_GUARD("fsync");
	return fsync(fd);
}

int hu_wr_syncfs(int fd)
{
	WR_GUARD("syncfs");
	return syncfs(fd);
}
