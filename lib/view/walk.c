/* SPDX-License-Identifier: MIT */
/*
 * A depth-first walk of the merged view: sorted, directories first, one
 * open directory per level of depth.
 *
 * Listing a directory of the view (opening it in every layer, reading the
 * names, a stat of each and the markers) is about half the syscalls of a
 * walk that also reads every entry, as flatten does.  With list_ahead a
 * second thread, the lister, does that part: it walks the same tree in the
 * same order, ahead of the callbacks, and hands each listed directory over
 * through a bounded queue.  The queue is the lister's walk written out: an
 * "enter" item for each directory, and a "leave" item once the lister has
 * listed all the directories below it and no longer touches it.  The walk
 * takes a directory from its enter item and closes it only after taking its
 * leave item; so the two threads never share a directory one of them frees.
 * The walk then closes its fds and hands it back to the lister, which frees
 * it: its memory goes back to the thread that allocated it.  Freed by the
 * walking thread, it went through the lister's malloc arena under its lock
 * and was never reused where it was freed; that cost a fifth of a
 * flatten's user time.  The lister closes its fds too: in a flatten the
 * walk, which opens, reads and closes every file, is the busier of the
 * two.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* How far the lister may run ahead: open layer directories (each holds
 * an fd) and listed entries held in the queue. */
enum { AHEAD_RING = 1024, AHEAD_FDS = 256, AHEAD_ENTRIES = 1 << 16 };
/* Entries queued above which the walk counts as busy (walk_is_busy). */
enum { AHEAD_BUSY = 2048 };

enum item_kind { ITEM_ENTER, ITEM_LEAVE, ITEM_ERROR };

struct item {
	enum item_kind kind;
	struct hu_vdir *d;
	size_t fds, entries;	/* what an enter item holds */
};

struct lister {
	const struct hu_stack *s;
	bool xattr_names;	/* read the entries' xattr names too */
	pthread_t thread;
	bool running;
	pthread_mutex_t mu;
	pthread_cond_t not_full, not_empty;
	struct item ring[AHEAD_RING];
	size_t head, count, fds, entries;
	bool stop;		/* the walk gave up: the lister quits */
	bool done;		/* the lister has returned */
	struct hu_error err;	/* handed over with ITEM_ERROR */
	/* Directories the walk is done with, fds closed, for the lister to
	 * free; and the array it swaps them into, to free them unlocked. */
	struct vdirs { struct hu_vdir **v; size_t n, cap; } returned, closing;
};

struct walk {
	const struct hu_walk_ops *ops;
	void *ctx;
	struct lister *ahead;	/* NULL: list in the walking thread */
};

/* ---- the lister ---------------------------------------------------------- */

static bool over_budget(const struct lister *l)
{
	return l->count == AHEAD_RING ||
	       (l->count > 0 &&
		(l->fds >= AHEAD_FDS || l->entries >= AHEAD_ENTRIES));
}

static void close_all(struct vdirs *vs)
{
	for (size_t i = 0; i < vs->n; i++)
		hu_vdir_close(vs->v[i]);
	vs->n = 0;
}

/* Queue an item; -1 when the walk has stopped (the caller keeps @d). */
static int push(struct lister *l, enum item_kind kind, struct hu_vdir *d)
{
	struct item it = { .kind = kind, .d = d };
	int rc = 0;

	if (kind == ITEM_ENTER) {
		const struct hu_ventry *ents;

		it.fds = hu_vdir_width(d);
		(void)hu_vdir_list(d, &ents, &it.entries, NULL);
	}
	pthread_mutex_lock(&l->mu);
	for (;;) {
		/* free what the walk handed back, also while waiting for
		 * room */
		if (l->returned.n > 0) {
			struct vdirs swap = l->closing;

			l->closing = l->returned;
			l->returned = swap;
			pthread_mutex_unlock(&l->mu);
			close_all(&l->closing);
			pthread_mutex_lock(&l->mu);
			continue;
		}
		if (l->stop || !over_budget(l))
			break;
		pthread_cond_wait(&l->not_full, &l->mu);
	}
	if (l->stop) {
		rc = -1;
	} else {
		l->ring[(l->head + l->count) % AHEAD_RING] = it;
		l->count++;
		l->fds += it.fds;
		l->entries += it.entries;
		pthread_cond_signal(&l->not_empty);
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

/*
 * Whether the walk has plenty queued.  The names of the bottom layer's
 * entries (most of a view, as a rule) only save the walk a listxattr per
 * entry; the lister reads them only while the walk has work queued, and
 * leaves them to the walk when the lister is what the walk waits for.
 * Plenty is half of any of its budgets: of small directories (the 200k
 * stack's hold 11 entries each) the fds run out long before the entries,
 * and counting entries alone left a flatten's walk, the busier thread,
 * reading the names of a tenth of its files itself (9% of the
 * listings; 3% with this rule).
 * The names of the layers above also spare the lister marker lookups and
 * settling the bottom layer (hu_vdir_settle_for_data): those it reads
 * always.
 */
static bool walk_is_busy(struct lister *l)
{
	bool busy;

	pthread_mutex_lock(&l->mu);
	busy = l->entries >= AHEAD_BUSY || 2 * l->fds >= AHEAD_FDS ||
	       2 * l->count >= AHEAD_RING;
	pthread_mutex_unlock(&l->mu);
	return busy;
}

/* List @d, just opened (@opened, its opener's result; @d is NULL when
 * that failed), read its entries' xattr names if asked, and settle the
 * deferred layers its files' data may come from (only the lister settles
 * layers; hunion.h says how that differs from the plain walk).  On
 * failure close it and queue the error, which ends the lister's walk as
 * it would end the walk. */
static struct hu_vdir *ready(struct lister *l, int opened, struct hu_vdir *d)
{
	const struct hu_ventry *ents;
	size_t n;

	if (opened == 0 && hu_vdir_list(d, &ents, &n, &l->err) == 0) {
		if (l->xattr_names)
			hu_vdir_read_xattr_names(d, walk_is_busy(l) ? 0 : 1);
		if (hu_vdir_settle_for_data(d, &l->err) == 0)
			return d;
	}
	if (d)
		hu_vdir_close(d);
	(void)push(l, ITEM_ERROR, NULL);
	return NULL;
}

/* List the directories below @d, which is listed and queued. */
static int list_below(struct lister *l, struct hu_vdir *d)
{
	const struct hu_ventry *ents;
	size_t n;

	(void)hu_vdir_list(d, &ents, &n, NULL);
	for (size_t i = 0; i < n; i++) {
		struct hu_vdir *child;
		int opened;

		if (!S_ISDIR(ents[i].st.st_mode))
			continue;
		opened = hu_vdir_open_child(d, &ents[i], &child, &l->err);
		if (!ready(l, opened, child))
			return -1;
		if (push(l, ITEM_ENTER, child) < 0) {
			hu_vdir_close(child);
			return -1;
		}
		if (list_below(l, child) < 0 || push(l, ITEM_LEAVE, child) < 0)
			return -1;
	}
	return 0;
}

static void lister_walk(struct lister *l)
{
	struct hu_vdir *root;
	int opened = hu_vdir_open_root(l->s, &root, &l->err);

	if (!ready(l, opened, root))
		return;
	if (push(l, ITEM_ENTER, root) < 0) {
		hu_vdir_close(root);
		return;
	}
	if (list_below(l, root) == 0)
		(void)push(l, ITEM_LEAVE, root);
}

static void *lister_main(void *arg)
{
	struct lister *l = arg;

	lister_walk(l);
	/* From now on the walk closes what it is done with itself. */
	pthread_mutex_lock(&l->mu);
	l->done = true;
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static int lister_start(struct lister *l, const struct hu_stack *s,
			bool xattr_names, struct hu_error *e)
{
	int err;

	memset(l, 0, sizeof(*l));
	l->s = s;
	l->xattr_names = xattr_names;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->not_full, NULL);
	pthread_cond_init(&l->not_empty, NULL);
	err = pthread_create(&l->thread, NULL, lister_main, l);
	if (err)
		return hu_error_set(e, err, NULL, "cannot start a thread");
	l->running = true;
	return 0;
}

/* Stop the lister, wait for it, and close what it queued. */
static void lister_stop(struct lister *l)
{
	if (!l->running)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_signal(&l->not_full);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->thread, NULL);
	l->running = false;
	for (; l->count > 0; l->count--) {
		struct item *it = &l->ring[l->head];

		if (it->kind == ITEM_ENTER)
			hu_vdir_close(it->d);
		l->head = (l->head + 1) % AHEAD_RING;
	}
	close_all(&l->returned);
}

static void lister_free(struct lister *l)
{
	lister_stop(l);
	free(l->returned.v);
	free(l->closing.v);
	hu_error_clear(&l->err);
	pthread_cond_destroy(&l->not_empty);
	pthread_cond_destroy(&l->not_full);
	pthread_mutex_destroy(&l->mu);
}

/* The next item, which must be of kind @want (for @d when leaving). */
static int take(struct lister *l, enum item_kind want, struct hu_vdir **d,
		struct hu_error *e)
{
	struct item it;

	pthread_mutex_lock(&l->mu);
	while (l->count == 0)
		pthread_cond_wait(&l->not_empty, &l->mu);
	it = l->ring[l->head];
	l->head = (l->head + 1) % AHEAD_RING;
	l->count--;
	l->fds -= it.fds;
	l->entries -= it.entries;
	pthread_cond_signal(&l->not_full);
	pthread_mutex_unlock(&l->mu);
	if (it.kind == ITEM_ERROR) {
		hu_error_clear(e);
		*e = l->err;
		memset(&l->err, 0, sizeof(l->err));
		return -1;
	}
	if (it.kind != want || (want == ITEM_LEAVE && it.d != *d)) {
		if (it.kind == ITEM_ENTER)
			hu_vdir_close(it.d);
		return hu_error_set(e, EPROTO, NULL,
				    "internal error: the lister is out of step");
	}
	*d = it.d;
	return 0;
}

/* Hand @d, which the walk is done with, back to the lister to close and
 * free; or do that here when the lister has returned or memory runs
 * short. */
static void give_back(struct lister *l, struct hu_vdir *d)
{
	struct vdirs *vs = &l->returned;
	bool kept = false;

	pthread_mutex_lock(&l->mu);
	if (!l->done && vs->n == vs->cap) {
		size_t cap = vs->cap ? 2 * vs->cap : 64;
		struct hu_vdir **v = realloc(vs->v, cap * sizeof(*v));

		if (v) {
			vs->v = v;
			vs->cap = cap;
		}
	}
	if (!l->done && vs->n < vs->cap) {
		vs->v[vs->n++] = d;
		kept = true;
	}
	pthread_mutex_unlock(&l->mu);
	if (!kept)
		hu_vdir_close(d);
}

/* ---- the walk ------------------------------------------------------------ */

/* The directory of @ent below @d, listed or ready to be. */
static int child_open(struct walk *w, struct hu_vdir *d,
		      const struct hu_ventry *ent, struct hu_vdir **child,
		      struct hu_error *e)
{
	if (!w->ahead)
		return hu_vdir_open_child(d, ent, child, e);
	return take(w->ahead, ITEM_ENTER, child, e);
}

/* Done with @child.  @failing: the walk is unwinding from an error, and
 * the lister may still be listing below @child: stop it first. */
static int child_close(struct walk *w, struct hu_vdir *child, bool failing,
		       struct hu_error *e)
{
	int rc = 0;

	if (w->ahead) {
		struct hu_vdir *leaving = child;

		if (!failing && take(w->ahead, ITEM_LEAVE, &leaving, e) < 0)
			rc = -1;
		if (failing || rc < 0) {
			lister_stop(w->ahead);
		} else {
			give_back(w->ahead, child);
			return 0;
		}
	}
	hu_vdir_close(child);
	return rc;
}

static int walk_dir(struct walk *w, struct hu_vdir *d, bool skip,
		    struct hu_error *e);

/* The directory @ent of @d: walk it when @descend, else only take what the
 * lister queued for it. */
static int walk_child(struct walk *w, struct hu_vdir *d,
		      const struct hu_ventry *ent, bool descend,
		      struct hu_error *e)
{
	struct hu_vdir *child;
	int rc;

	if (!descend && !w->ahead)
		return 0;
	if (child_open(w, d, ent, &child, e) < 0)
		return -1;
	rc = walk_dir(w, child, !descend, e);
	if (rc == 0 && descend && w->ops->leave)
		rc = w->ops->leave(w->ctx, child, ent, e);
	return child_close(w, child, rc < 0, e) < 0 ? -1 : rc;
}

static int walk_dir(struct walk *w, struct hu_vdir *d, bool skip,
		    struct hu_error *e)
{
	const struct hu_ventry *ents;
	size_t n, window_end = 0;

	if (hu_vdir_list(d, &ents, &n, e) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const struct hu_ventry *ent = &ents[i];
		int rc = hu_interrupt_check(e);

		if (rc == 0 && !skip) {
			if (w->ops->prefetch_data && i == window_end)
				window_end = hu_vdir_prefetch(d, i);
			rc = w->ops->entry(w->ctx, d, ent, e);
		}
		if (rc < 0)
			return -1;
		if (S_ISDIR(ent->st.st_mode) &&
		    walk_child(w, d, ent, rc > 0, e) < 0)
			return -1;
	}
	return 0;
}

int hu_view_walk(const struct hu_stack *s, const struct hu_walk_ops *ops,
		 void *ctx, struct hu_error *e)
{
	struct walk w = { .ops = ops, .ctx = ctx };
	struct lister lister;
	struct hu_vdir *root;
	int rc;

	if (ops->list_ahead) {
		if (lister_start(&lister, s, ops->xattr_names, e) < 0)
			return -1;
		w.ahead = &lister;
	}
	if (w.ahead ? take(w.ahead, ITEM_ENTER, &root, e) :
		      hu_vdir_open_root(s, &root, e)) {
		rc = -1;
		goto out;
	}
	rc = ops->enter_root ? ops->enter_root(ctx, root, e) : 0;
	if (rc == 0)
		rc = walk_dir(&w, root, false, e);
	if (rc == 0 && ops->leave)
		rc = ops->leave(ctx, root, NULL, e);
	if (child_close(&w, root, rc < 0, e) < 0)
		rc = -1;
out:
	if (w.ahead)
		lister_free(w.ahead);
	return rc;
}
