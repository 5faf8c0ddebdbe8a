/* SPDX-License-Identifier: MIT */
/*
 * fsck: what interrupted hunion runs leave in a layer (hunionLeftover):
 * an output's temporaries and lock file that no live run holds, a
 * conversion's temporary whiteouts, the times record of a repair; and a
 * conversion in place that stopped (convertUnfinished), which fsck
 * finishes.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "fsck/fsck_marker.h"

#define LOCK_SUFFIX ".hunion-lock"
#define TEMP_SUFFIX_LEN (sizeof(".hunion-XXXXXX") - 1)

/* ---- leftovers of interrupted runs --------------------------------------- */

/* The output NAME of ".NAME.hunion-lock" or ".NAME.hunion-XXXXXX"
 * (malloc'd), *@lock telling which; NULL for other names. */
static char *leftover_base(const char *name, bool *lock)
{
	size_t len = strlen(name), ll = strlen(LOCK_SUFFIX);
	char *base;

	if (name[0] != '.')
		return NULL;
	*lock = len > ll + 1 && !strcmp(name + len - ll, LOCK_SUFFIX);
	if (*lock)
		base = strndup(name + 1, len - ll - 1);
	else if (len > TEMP_SUFFIX_LEN + 1)
		base = strndup(name + 1, len - TEMP_SUFFIX_LEN - 1);
	else
		return NULL;
	if (base && (!*base || (!*lock && !hu_is_temp_of(name, base)))) {
		free(base);
		return NULL;
	}
	return base;
}

/*
 * Is output @base of @dirfd being written by a live run?  Such a run
 * holds flock(2) on ".BASE.hunion-lock" from before it makes a temporary
 * until the temporary is gone (outlock.c); a dead run's lock is free.
 * 1 held (or no locks here to tell), 0 free with *@lockfd our hold on
 * the lock file (-1 when there is none), -1 with errno on error.
 */
static int lock_held(int dirfd, const char *base, int *lockfd)
{
	char *name;
	struct stat st;
	int fd;

	*lockfd = -1;
	if (asprintf(&name, ".%s" LOCK_SUFFIX, base) < 0)
		return errno = ENOMEM, -1;
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
		    O_CLOEXEC);
	free(name);
	if (fd < 0)
		return errno == ENOENT ? 0 : errno == ELOOP ? 1 : -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return 1;
	}
	*lockfd = fd;
	return 0;
}

int fm_remove_entry(const struct fsck_dir *d, const char *name,
			struct hu_error *why)
{
	if (hu_rmtree(d->wd->fd, name) < 0)
		return fm_fail(why, d, name, "cannot remove");
	return 0;
}

/* ".NAME.hunion-XXXXXX" and ".NAME.hunion-lock" no live run holds, what
 * a run that died moved aside (".hunion-gone-*", aside.c), and a
 * conversion's ".hunion-wh.*" outside a half-converted layer.
 * 1 when @ent is one (reported), 0 when not. */
int fm_check_leftover(struct fsck_run *r, const struct fsck_dir *d,
			  const struct wh_ent *ent, struct hu_error *e)
{
	const char *name = ent->name;
	struct hu_error why = { 0 };
	int lockfd = -1, rc;
	bool lock = false;
	char *base = NULL;

	if (hu_is_aside_name(name)) {
		/* moved aside (aside.c): its mover holds it while alive */
		lockfd = hu_aside_locked(d->wd->fd, name);
		if (lockfd < 0)
			return 1;
	} else if (!hu_conv_temp_prefixed(name)) {
		base = leftover_base(name, &lock);
		if (!base)
			return 0;
		rc = lock_held(d->wd->fd, base, &lockfd);
		free(base);
		if (rc < 0)
			return wh_fail(e, errno, fsck_layer(r)->path,
				       d->wd->path, name, "cannot read the "
				       "lock of its output");
		if (rc > 0)
			return 1;	/* a live run's: not ours to judge */
		/* a lock file that went meanwhile is none */
		if (lock && (lockfd < 0 ||
			     !hu_fd_is_at(d->wd->fd, name, lockfd))) {
			if (lockfd >= 0)
				close(lockfd);
			return 1;
		}
	}
	rc = fm_found(r, d, HU_PB_HUNION_LEFTOVER, name, NULL, e);
	if (rc == 1) {
		/* Holding the lock: no run starts on this output meanwhile;
		 * a lock file goes while it is the one held (outlock.c). */
		rc = fm_keep(r, d, &why);
		if (rc == 0)
			rc = fm_remove_entry(d, name, &why);
		rc = fm_done(r, d, rc, &why, e);
	}
	if (lockfd >= 0)
		close(lockfd);
	return rc < 0 ? -1 : 1;
}

/* ---- a half-converted layer -------------------------------------------- */

int fm_check_converting(struct fsck_run *r, const struct fsck_dir *d,
			    struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_convert_opts o = { .to = l->conv_to,
				     .to_userxattr = l->conv_to_userxattr,
				     .dry_run = hu_wr_dry_run(),
				     .report = fsck_opts(r)->report };
	struct hu_convert_stats st;
	struct hu_error why = { 0 };
	char detail[64];
	int rc;

	snprintf(detail, sizeof(detail), "%s>%s%s", hu_format_name(l->format),
		 hu_format_name(l->conv_to), l->conv_to_userxattr &&
		 l->conv_to != HU_FMT_OCI ? " (user.*)" : "");
	rc = fm_found(r, d, HU_PB_CONVERT_UNFINISHED, NULL, detail, e);
	if (rc != 1)
		return rc;
	/* Each step of a conversion in place keeps the view as it is, and a
	 * run over a half-converted layer finishes it (convert_inplace.c). */
	rc = hu_wh_convert(l, NULL, &o, &st, &why);
	return fsck_done(r, rc, &why, e);
}

/* The times record of a repair (fsck_keep_times) that a killed run left
 * on @d: the times it holds are @d's own, and come back. */
int fm_check_times_record(struct fsck_run *r, struct fsck_dir *d,
			      struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_error why = { 0 };
	struct timespec ts[2];
	bool had;
	int rc;

	if (!wh_dir_may_hold(d->wd, ".converting-times"))
		return 0;
	if (hu_conv_times_read(d->wd->fd, ts, &had, e) < 0)
		return wh_prefix(e, l->path, d->wd->path);
	if (!had)
		return 0;
	d->wd->st.st_atim = ts[0];
	d->wd->st.st_mtim = ts[1];
	rc = fm_found(r, d, HU_PB_HUNION_LEFTOVER, NULL,
		   "the directory's times, recorded by a repair", e);
	if (rc != 1)
		return rc;
	if (hu_wr_futimens(d->wd->fd, ts) < 0)
		rc = fm_fail(&why, d, "", "cannot restore the directory's times");
	else
		rc = hu_conv_times_clear(l, l, d->wd->fd, &why);
	return fsck_done(r, rc, &why, e);
}

