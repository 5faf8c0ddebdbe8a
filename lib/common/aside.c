/* SPDX-License-Identifier: MIT */
/*
 * What killed runs left, moved aside and removed after the run's work.
 *
 * A killed run's leftover can be big (a tarball layer's unpack directory
 * of 2 GB takes minutes to remove on a busy machine), and a run that
 * finds one must not make its user wait for that before its own work.
 * So the sweeps (tarlayer.c in TMPDIR, outlock.c beside an output) only
 * move a leftover aside: one rename in its own directory, to
 * ".hunion-gone-XXXXXXXXXXXX", a name no run writes into and no output
 * lock covers, while the mover holds flock(2) on it.  The list of what
 * this process moved aside is kept here, and the front end removes it
 * once the command's work is done (hu_aside_remove(), phase "cleaning
 * up").
 *
 * Ownership is told by locks, as everywhere (outlock.c): a moved-aside
 * entry is locked by its mover from before the rename until it is gone,
 * so a ".hunion-gone-*" entry that can be locked is one whose mover died
 * (killed while cleaning up, or before): the next sweep of that
 * directory takes it over (hu_aside_adopt()), `hunion clean` too.  No
 * entry another live run holds is ever moved or removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <unistd.h>

#include "internal.h"

#define ASIDE_DIGITS 12

struct aside {
	int dirfd;		/* its directory (a dup: ours) */
	int fd;			/* the entry itself, flock'd: ours */
	char *name;		/* its name in @dirfd */
	char *path;		/* its old path, for progress and errors */
};

static struct {
	pthread_mutex_t lock;	/* layers unpack on several threads */
	struct aside *v;
	size_t n, cap;
} moved = { .lock = PTHREAD_MUTEX_INITIALIZER };

bool hu_is_aside_name(const char *name)
{
	size_t n = strlen(HU_ASIDE_PREFIX);

	return !strncmp(name, HU_ASIDE_PREFIX, n) &&
	       strlen(name + n) == ASIDE_DIGITS &&
	       strspn(name + n, "0123456789abcdef") == ASIDE_DIGITS;
}

/* Note @name of @dirfd, locked through @fd (taken), for removal; shown
 * as @shown of @dir (the name it had before it was moved aside). */
static int note(int dirfd, int fd, const char *name, const char *shown,
		const char *dir)
{
	struct aside a = { .dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3),
			   .fd = fd, .name = strdup(name),
			   .path = hu_path_join(dir, shown) };
	int rc = -1;

	pthread_mutex_lock(&moved.lock);
	if (moved.n == moved.cap) {
		size_t cap = moved.cap ? 2 * moved.cap : 8;
		struct aside *v = realloc(moved.v, cap * sizeof(*v));

		if (v) {
			moved.v = v;
			moved.cap = cap;
		}
	}
	if (a.dirfd >= 0 && a.name && a.path && moved.n < moved.cap) {
		moved.v[moved.n++] = a;
		rc = 0;
	}
	pthread_mutex_unlock(&moved.lock);
	if (rc < 0) {		/* left for the next sweep: unlocked */
		if (a.dirfd >= 0)
			close(a.dirfd);
		close(fd);
		free(a.name);
		free(a.path);
	}
	return rc;
}

/* @name of @dirfd opened and locked (not waiting), still there: its fd,
 * else -1. */
static int open_locked(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
			O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0 || !hu_fd_is_at(dirfd, name, fd)) {
		close(fd);
		return -1;
	}
	return fd;
}

int hu_aside_move(int dirfd, const char *name, int fd, const char *dir)
{
	int own = fd < 0 ? open_locked(dirfd, name) : fd;
	char gone[sizeof(HU_ASIDE_PREFIX) + ASIDE_DIGITS];

	if (own < 0 || hu_wr_dry_run())
		goto fail;
	for (int tries = 0; tries < 100; tries++) {
		unsigned char rnd[ASIDE_DIGITS / 2];
		int n = snprintf(gone, sizeof(gone), "%s", HU_ASIDE_PREFIX);

		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
			for (size_t i = 0; i < sizeof(rnd); i++)
				rnd[i] = (unsigned char)(rand() ^ getpid());
		for (size_t i = 0; i < sizeof(rnd); i++)
			n += snprintf(gone + n, sizeof(gone) - (size_t)n,
				      "%02x", rnd[i]);
		/* moved: @own is note()'s even when out of memory (then
		 * the entry is left, unlocked, for the next sweep) */
		if (hu_wr_renameat2(dirfd, name, dirfd, gone,
				    RENAME_NOREPLACE) == 0) {
			(void)note(dirfd, own, gone, name, dir);
			return 0;
		}
		if (errno != EEXIST)
			break;
	}
fail:
	if (own >= 0 && fd < 0)
		close(own);
	return -1;
}

int hu_aside_locked(int dirfd, const char *name)
{
	struct stat st;

	/* another user's (a shared TMPDIR): not ours to remove */
	if (!hu_is_aside_name(name) ||
	    fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    (geteuid() != 0 && st.st_uid != geteuid()) ||
	    (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)))
		return -1;
	return open_locked(dirfd, name);	/* held: its mover lives */
}

bool hu_aside_adopt(int dirfd, const char *name, const char *dir)
{
	int fd;

	if (!hu_is_aside_name(name))
		return false;
	fd = hu_aside_locked(dirfd, name);
	if (fd >= 0)
		(void)note(dirfd, fd, name, name, dir);
	return true;
}

size_t hu_aside_pending(void)
{
	size_t n;

	pthread_mutex_lock(&moved.lock);
	n = moved.n;
	pthread_mutex_unlock(&moved.lock);
	return n;
}

/* The last entry noted, taken off the list; false when none. */
static bool take_last(struct aside *a)
{
	bool any;

	pthread_mutex_lock(&moved.lock);
	any = moved.n > 0;
	if (any)
		*a = moved.v[--moved.n];
	if (!moved.n) {
		free(moved.v);
		moved.v = NULL;
		moved.cap = 0;
	}
	pthread_mutex_unlock(&moved.lock);
	return any;
}

static void aside_free(struct aside *a)
{
	close(a->fd);		/* the lock goes once the entry is gone */
	close(a->dirfd);
	free(a->name);
	free(a->path);
}

int hu_aside_remove(const struct hu_report *r,
		    void (*removed)(void *ctx, const char *path), void *ctx,
		    struct hu_error *e)
{
	bool was = hu_wr_dry_run();
	struct aside a;
	int rc = 0;

	/* A leftover goes even in a dry run: it is no output (and a dry
	 * run moves nothing aside but a tarball layer's, which it makes). */
	hu_wr_set_dry_run(false);
	while (take_last(&a)) {
		/* stopped: the rest stays aside, unlocked at exit, for the
		 * next sweep of its directory or `hunion clean` */
		if (hu_interrupt_check(e) < 0) {
			aside_free(&a);
			rc = -1;
			break;
		}
		hu_report_phase(r, HU_PHASE_CLEANING, a.path);
		if (hu_rmtree(a.dirfd, a.name) < 0) {
			if (rc == 0)	/* the first one said, the rest tried */
				rc = hu_error_set(e, errno, a.path, "cannot "
						  "remove what a killed run "
						  "left (moved aside as %s)",
						  a.name);
		} else if (removed) {
			removed(ctx, a.path);
		}
		aside_free(&a);
	}
	hu_wr_set_dry_run(was);
	return rc;
}
