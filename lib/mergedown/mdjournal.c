/* SPDX-License-Identifier: MIT */
/*
 * The records of a merge-down, kept on the upper (its filesystem is the
 * one the merge empties, so they cost no space in the target and vanish
 * with the directories that carry them).  Private union.* xattrs: never
 * shown in a view, never copied, no marker of any format.
 *
 * - "union.mergedown-times" on a directory of the upper: the times it had
 *   before the merge took entries out of it, written at its first visit.
 *   The target's directory gets these times when it is done; a re-run
 *   reads them back instead of the times the killed run left.
 * - "union.mergedown-intent" on the upper's root: one step that changes
 *   the view for a moment (a redirected directory of the target moved to
 *   its new name, then the upper's redirect removed), written before it
 *   and removed after it, so that a re-run finishes it before it reads
 *   the view.
 * - "union.mergedown-kept" on the upper's root, by --keep-upper through a
 *   clone (mdkeep.c): "merging DEV:INO" once the clone is whole in the
 *   target whose root is DEV:INO, "merged DEV:INO" once it is merged and
 *   gone.  It stays: it is what tells a later run that this upper is
 *   spent for that target, which merging it again would damage.
 * - "union.mergedown-clone" on the root of that clone: DEV:INO of the
 *   upper's root, written before the clone is whole, so that a re-run
 *   finishes only the clone of its own upper.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "mergedown/mergedown.h"

#define TIMES_RECORD "union.mergedown-times"
#define INTENT_RECORD "union.mergedown-intent"
#define KEPT_RECORD "union.mergedown-kept"
#define CLONE_RECORD "union.mergedown-clone"

/* trusted.* where the upper's markers live there and we may write it. */
static const char *record_name(const struct md *m, const char *what,
			       char *buf, size_t len)
{
	bool trusted = !m->up->userxattr && m->root;

	snprintf(buf, len, "%s%s", trusted ? "trusted." : "user.", what);
	return buf;
}

static int times_text(char *v, size_t len, const struct timespec ts[2])
{
	return snprintf(v, len, "%lld.%09ld %lld.%09ld",
			(long long)ts[0].tv_sec, ts[0].tv_nsec,
			(long long)ts[1].tv_sec, ts[1].tv_nsec);
}

/* The times @fd has now: from @st, or (NULL) asked. */
static int times_now(int fd, const struct stat *st, struct timespec ts[2],
		     struct hu_error *e)
{
	struct stat own;

	if (!st && fstat(fd, &own) < 0)
		return hu_error_set(e, errno, NULL, "cannot stat");
	ts[0] = (st ? st : &own)->st_atim;
	ts[1] = (st ? st : &own)->st_mtim;
	return 0;
}

int md_times_get(const struct md *m, int fd, const struct stat *st,
		 bool create, struct timespec ts[2], bool *found,
		 struct hu_error *e)
{
	char attr[64], v[96];
	long long as, ms;
	long an, mn;
	ssize_t n;
	int len;

	record_name(m, TIMES_RECORD, attr, sizeof(attr));
	if (create && !m->keep && !hu_wr_dry_run()) {
		/* the first visit's record, made unless an earlier run's is
		 * there: one call where most directories have none */
		if (times_now(fd, st, ts, e) < 0)
			return -1;
		len = times_text(v, sizeof(v), ts);
		if (hu_wr_setxattr_at(fd, NULL, attr, v, len,
				      XATTR_CREATE) == 0) {
			if (found)
				*found = true;
			return 0;
		}
		if (errno != EEXIST)
			return hu_error_set(e, errno, NULL, "cannot record "
					    "the times in %s", attr);
	}
	n = fgetxattr(fd, attr, v, sizeof(v) - 1);
	if (n > 0) {
		v[n] = '\0';
		if (sscanf(v, "%lld.%ld %lld.%ld", &as, &an, &ms, &mn) == 4) {
			ts[0] = (struct timespec){ .tv_sec = as, .tv_nsec = an };
			ts[1] = (struct timespec){ .tv_sec = ms, .tv_nsec = mn };
			if (found)
				*found = true;
			return 0;
		}
	} else if (errno != ENODATA && errno != ENOTSUP) {
		return hu_error_set(e, errno, NULL, "cannot read %s", attr);
	}
	if (times_now(fd, st, ts, e) < 0)
		return -1;
	if (found)
		*found = create && !m->keep;
	if (m->keep || !create)
		return 0;	/* the upper does not change */
	len = times_text(v, sizeof(v), ts);
	if (hu_wr_setxattr_at(fd, NULL, attr, v, len, 0) < 0)
		return hu_error_set(e, errno, NULL, "cannot record the times "
				    "in %s", attr);
	return 0;
}

int md_times_clear(const struct md *m, int fd, struct hu_error *e)
{
	char attr[64];

	if (m->keep)
		return 0;
	record_name(m, TIMES_RECORD, attr, sizeof(attr));
	if (hu_wr_removexattr_at(fd, NULL, attr) < 0 && errno != ENODATA &&
	    errno != ENOTSUP)
		return hu_error_set(e, errno, NULL, "cannot remove %s", attr);
	return 0;
}

int md_intent_write(const struct md *m, const struct md_intent *in,
		    struct hu_error *e)
{
	char attr[64], head[32];
	size_t len = 0, cap = 64;
	char *v = malloc(cap);
	int rc = 0;

	if (!v)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	record_name(m, INTENT_RECORD, attr, sizeof(attr));
	for (size_t i = 0; i < in->n; i++) {
		const struct md_move *mv = &in->v[i];
		size_t hl = (size_t)snprintf(head, sizeof(head), "%" PRIuMAX,
					     (uintmax_t)mv->ino) + 1;
		size_t sl = strlen(mv->src) + 1, dl = strlen(mv->dst) + 1;
		size_t rl = strlen(mv->marker) + 1;
		char *nv;

		if (len + hl + sl + dl + rl > cap) {
			cap = 2 * (len + hl + sl + dl + rl);
			nv = realloc(v, cap);
			if (!nv) {
				free(v);
				return hu_error_set(e, ENOMEM, NULL,
						    "out of memory");
			}
			v = nv;
		}
		memcpy(v + len, head, hl);
		memcpy(v + len + hl, mv->src, sl);
		memcpy(v + len + hl + sl, mv->dst, dl);
		memcpy(v + len + hl + sl + dl, mv->marker, rl);
		len += hl + sl + dl + rl;
	}
	if (hu_wr_setxattr_at(m->up->fd, NULL, attr, v, len, 0) < 0)
		rc = hu_error_set(e, errno, m->up->path, "cannot write the "
				  "intent record %s", attr);
	free(v);
	return rc;
}

/* The next NUL-ended field of @v (@n bytes) from *@off, or NULL. */
static const char *field(const char *v, size_t n, size_t *off)
{
	const char *f = v + *off, *end;

	if (*off >= n || !(end = memchr(f, '\0', n - *off)))
		return NULL;
	*off = end - v + 1;
	return f;
}

int md_intent_read(const struct md *m, struct md_intent *in,
		   struct hu_error *e)
{
	char attr[64], *v;
	size_t off = 0;
	ssize_t n;

	memset(in, 0, sizeof(*in));
	record_name(m, INTENT_RECORD, attr, sizeof(attr));
	n = fgetxattr(m->up->fd, attr, NULL, 0);
	if (n < 0)
		return errno == ENODATA || errno == ENOTSUP ? 0 :
			hu_error_set(e, errno, m->up->path, "cannot read %s",
				     attr);
	v = malloc(n + 1);
	if (!v)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	n = fgetxattr(m->up->fd, attr, v, n);
	if (n < 0) {
		free(v);
		return hu_error_set(e, errno, m->up->path, "cannot read %s",
				    attr);
	}
	while ((size_t)n > off) {
		const char *ino = field(v, n, &off), *src = field(v, n, &off);
		const char *dst = field(v, n, &off);
		const char *redir = field(v, n, &off);
		struct md_move *nv;

		if (!redir) {
			free(v);
			md_intent_free(in);
			return hu_error_set(e, EINVAL, m->up->path,
					    "%s is damaged", attr);
		}
		nv = realloc(in->v, (in->n + 1) * sizeof(*nv));
		if (!nv)
			break;
		in->v = nv;
		nv[in->n] = (struct md_move){
			.ino = (ino_t)strtoumax(ino, NULL, 10),
			.src = strdup(src), .dst = strdup(dst),
			.marker = strdup(redir) };
		if (!nv[in->n].src || !nv[in->n].dst ||
		    !nv[in->n].marker) {
			in->n++;
			break;
		}
		in->n++;
	}
	free(v);
	if ((size_t)n > off || (in->n && (!in->v[in->n - 1].src ||
					  !in->v[in->n - 1].dst ||
					  !in->v[in->n - 1].marker))) {
		md_intent_free(in);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	return 1;
}

int md_intent_clear(const struct md *m, struct hu_error *e)
{
	char attr[64];

	record_name(m, INTENT_RECORD, attr, sizeof(attr));
	if (hu_wr_removexattr_at(m->up->fd, NULL, attr) < 0 &&
	    errno != ENODATA)
		return hu_error_set(e, errno, m->up->path, "cannot remove %s",
				    attr);
	return 0;
}

void md_intent_free(struct md_intent *in)
{
	for (size_t i = 0; i < in->n; i++) {
		free(in->v[i].src);
		free(in->v[i].dst);
		free(in->v[i].marker);
	}
	free(in->v);
	in->v = NULL;
	in->n = 0;
}

static const char *const kept_state[] = { "", "merging", "merged" };

/* The kept record's text: state @k of the target (its root's DEV:INO). */
static int kept_text(const struct md *m, enum md_kept k, char *v, size_t len)
{
	return snprintf(v, len, "%s %ju:%ju", kept_state[k],
			(uintmax_t)m->to->dev, (uintmax_t)m->to->ino);
}

int md_kept_read(const struct md *m, enum md_kept *k, struct hu_error *e)
{
	char attr[64], v[96], want[64];
	ssize_t n;

	*k = MD_KEPT_NONE;
	record_name(m, KEPT_RECORD, attr, sizeof(attr));
	n = fgetxattr(m->up->fd, attr, v, sizeof(v) - 1);
	if (n < 0)
		return errno == ENODATA || errno == ENOTSUP ? 0 :
			hu_error_set(e, errno, m->up->path, "cannot read %s",
				     attr);
	v[n] = '\0';
	for (int i = MD_KEPT_MERGING; i <= MD_KEPT_MERGED; i++) {
		kept_text(m, i, want, sizeof(want));
		if (strcmp(v, want) == 0)
			*k = i;
	}
	return 0;
}

int md_kept_write(const struct md *m, enum md_kept k, struct hu_error *e)
{
	char attr[64], v[64];
	int len = kept_text(m, k, v, sizeof(v));

	record_name(m, KEPT_RECORD, attr, sizeof(attr));
	if (hu_wr_setxattr_at(m->up->fd, NULL, attr, v, len, 0) < 0)
		return hu_error_set(e, errno, m->up->path, "cannot write the "
				    "record %s", attr);
	return 0;
}

/* The clone record's text: the upper's root, DEV:INO. */
static int clone_text(const struct md *m, char *v, size_t len)
{
	return snprintf(v, len, "%ju:%ju", (uintmax_t)m->up->dev,
			(uintmax_t)m->up->ino);
}

int md_clone_mark(const struct md *m, int fd, struct hu_error *e)
{
	char attr[64], v[48];
	int len = clone_text(m, v, sizeof(v));

	record_name(m, CLONE_RECORD, attr, sizeof(attr));
	if (hu_wr_setxattr_at(fd, NULL, attr, v, len, 0) < 0)
		return hu_error_set(e, errno, NULL, "cannot write the record "
				    "%s", attr);
	return 0;
}

int md_clone_is_ours(const struct md *m, int fd, struct hu_error *e)
{
	char attr[64], v[48], want[48];
	ssize_t n;

	record_name(m, CLONE_RECORD, attr, sizeof(attr));
	n = fgetxattr(fd, attr, v, sizeof(v) - 1);
	if (n < 0 && errno != ENODATA && errno != ERANGE)
		return hu_error_set(e, errno, NULL, "cannot read %s", attr);
	v[n < 0 ? 0 : n] = '\0';
	clone_text(m, want, sizeof(want));
	return strcmp(v, want) == 0;
}
