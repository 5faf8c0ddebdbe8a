/* SPDX-License-Identifier: MIT */
/*
 * merge --into on several threads: phase 2 cut into directories.
 *
 * A task is one directory of the upper, ready to merge (its view directory
 * open).  The thread that merges a directory's entries makes each
 * subdirectory ready itself (no other thread touches its view directory)
 * and hands it to the pool as a task while few wait, else merges it now,
 * as a task still (its own subdirectories may go to the pool in turn).  A
 * directory is finished (its metadata given to the target, the emptied
 * upper directory removed) by the thread that ends the last of its entries
 * and subtasks, so each directory is finished after everything in it, as
 * on one thread: the crash safety of the one-thread merge holds for each
 * directory, and a re-run resumes either alike.  The newest task is taken
 * first, and tasks stop going to the pool while many are open, so the
 * directories open at once stay few.
 *
 * Directories merge independently once phase 1 has made the upper plain
 * (no redirect, no metacopy), which is why a pool runs only for an upper
 * whose detection found neither: no thread reads what another changes.
 * The layers beneath the target are never changed; a deferred one whose
 * format the view would detect halfway is held instead (hu_layer.hold),
 * and so is a rename that meets another filesystem (EXDEV): the pool
 * stops, the layer is settled or the copies chosen, and the merge starts
 * over from the root on what is left, as a re-run would.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mergedown/mergedown.h"

enum {
	POOL_MAX_THREADS = 8,
	/* A thread sleeps in the kernel for much of its run (every rename
	 * across directories takes the filesystem's rename lock, the ext4
	 * journal makes its handles wait): more threads than CPUs keep
	 * them busy (bench/README.md, merge-down). */
	POOL_THREADS_PER_CPU = 4,
	/* a few ready for a thread that ends one */
	POOL_WAITING_PER_THREAD = 2,
	POOL_MAX_OPEN = 256,		/* tasks open (three fds each) */
};

struct md_task {
	struct md_task *parent;
	struct md_task *next;		/* waiting, the newest first */
	struct md_task *newer, *older;	/* all the tasks not finished */
	struct hu_vdir *v;
	int ufd, tfd;			/* @v's upper and target dirs */
	struct stat us;			/* the upper dir, before the merge */
	struct timespec ts[2];		/* its times, recorded */
	char *path;			/* relative to the layer roots */
	const char *name;		/* in the parent: the last of @path */
	/* its own entries, and each subtask, not finished yet */
	size_t pending;
};

struct md_pool {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct md_task *waiting;	/* a stack: the newest first */
	size_t nwaiting, max_waiting, nopen, busy;
	struct md_task *tasks;		/* every task not finished, newest
					 * first (a child before its parent) */
	bool stop;			/* a thread failed */
	struct hu_error err;		/* the first failure */
	uint64_t done;			/* entries, for the progress */
	const struct md *m;
};

struct worker {
	struct md m;			/* its pool in m.pool */
	struct hu_mergedown_stats st;
	struct hu_error e;
	pthread_t thread;
};

uint64_t md_pool_tick(struct md_pool *pool)
{
	return __atomic_add_fetch(&pool->done, 1, __ATOMIC_RELAXED);
}

bool md_pool_stopped(struct md *m, struct hu_error *e)
{
	if (!m->pool || !__atomic_load_n(&m->pool->stop, __ATOMIC_RELAXED))
		return false;
	hu_error_set(e, ECANCELED, NULL, "stopped");
	return true;
}

/* Take @t out of the pool's tasks, under its lock; task_free() closes
 * its fds after, outside the lock, which the other threads would wait
 * for. */
static void task_unlink(struct md_pool *pool, struct md_task *t)
{
	if (t->newer)
		t->newer->older = t->older;
	else
		pool->tasks = t->older;
	if (t->older)
		t->older->newer = t->newer;
	pool->nopen--;
}

static void task_free(struct md_task *t)
{
	hu_vdir_close(t->v);
	free(t->path);
	free(t);
}

/* Task @name of @parent (NULL: the root), view directory @v (stat @us);
 * not in the pool yet (task_link). */
static struct md_task *task_new(const struct md_pool *pool,
				struct md_task *parent, struct hu_vdir *v,
				const struct stat *us, const char *name)
{
	struct md_task *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->path = parent ? hu_path_join(parent->path, name) : strdup("");
	if (!t->path) {
		free(t);
		return NULL;
	}
	t->name = parent ? t->path + strlen(t->path) - strlen(name) : "";
	t->parent = parent;
	t->v = v;
	t->ufd = hu_vdir_layer_fd(v, pool->m->iup);
	t->tfd = hu_vdir_layer_fd(v, pool->m->ito);
	t->us = *us;
	t->pending = 1;
	return t;
}

/* Into the pool's tasks, under its lock. */
static void task_link(struct md_pool *pool, struct md_task *t)
{
	t->older = pool->tasks;
	if (pool->tasks)
		pool->tasks->newer = t;
	pool->tasks = t;
	pool->nopen++;
	if (t->parent)
		__atomic_add_fetch(&t->parent->pending, 1, __ATOMIC_RELAXED);
}

/* Make @m's path @path, for its messages. */
static int set_path(struct md *m, const char *path, struct hu_error *e)
{
	size_t saved;

	hu_pathbuf_pop(&m->path, 0);
	if (hu_pathbuf_push(&m->path, path, &saved) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	return 0;
}

/* One of @t's entries or subtasks is finished: when it was the last,
 * finish @t (and so, perhaps, its parent). */
static int task_done(struct md *m, struct md_task *t, struct hu_error *e)
{
	struct md_pool *pool = m->pool;

	while (t && __atomic_sub_fetch(&t->pending, 1, __ATOMIC_ACQ_REL) == 0) {
		struct md_task *parent = t->parent;

		if (set_path(m, t->path, e) < 0 ||
		    md_dir_done(m, t->v, t->ufd, &t->us, t->tfd, t->ts, e) < 0)
			return -1;
		/* in the parent's path, naming the child */
		if (parent &&
		    (set_path(m, parent->path, e) < 0 ||
		     md_rmdir_upper(m, parent->ufd, t->name, e) < 0))
			return -1;
		pthread_mutex_lock(&pool->lock);
		task_unlink(pool, t);
		pthread_mutex_unlock(&pool->lock);
		task_free(t);
		t = parent;
	}
	return 0;
}

/* Task @t merged by the thread of @m: its entries, then what it
 * finishes. */
static int run_task(struct md *m, struct md_task *t, struct hu_error *e)
{
	int rc;

	if (set_path(m, t->path, e) < 0)
		return -1;
	m->task = t;
	rc = md_merge_entries(m, t->v, t->ufd, &t->us, t->tfd, t->ts, e);
	m->task = NULL;
	return rc < 0 ? -1 : task_done(m, t, e);
}

int md_task_merge(struct md *m, struct hu_vdir *c, const struct stat *us,
		  const char *name, struct hu_error *e)
{
	struct md_pool *pool = m->pool;
	struct md_task *parent = m->task, *t;
	bool queued = false, stopped;
	int rc;

	t = task_new(pool, parent, c, us, name);
	if (!t) {
		hu_vdir_close(c);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	pthread_mutex_lock(&pool->lock);
	stopped = pool->stop;
	if (!stopped) {
		task_link(pool, t);
		if (pool->nwaiting < pool->max_waiting &&
		    pool->nopen < POOL_MAX_OPEN) {
			t->next = pool->waiting;
			pool->waiting = t;
			pool->nwaiting++;
			queued = true;
		}
	}
	pthread_mutex_unlock(&pool->lock);
	if (queued)
		pthread_cond_signal(&pool->wake);
	if (stopped) {
		task_free(t);
		md_pool_stopped(m, e);
		return -1;
	}
	if (queued)
		return 0;
	/* now, on this thread, and back to the parent's entries after */
	rc = run_task(m, t, e);
	m->task = parent;
	if (set_path(m, parent->path, e) < 0)
		return -1;
	return rc;
}

/* The next task, or NULL when there is none left (or the pool stops). */
static struct md_task *take(struct md_pool *pool)
{
	struct md_task *t = NULL;

	pthread_mutex_lock(&pool->lock);
	while (!pool->waiting && pool->busy > 0 && !pool->stop)
		pthread_cond_wait(&pool->wake, &pool->lock);
	if (pool->waiting && !pool->stop) {
		t = pool->waiting;
		pool->waiting = t->next;
		pool->nwaiting--;
		pool->busy++;
	} else {
		pthread_cond_broadcast(&pool->wake);	/* all done */
	}
	pthread_mutex_unlock(&pool->lock);
	return t;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct md_pool *pool = w->m.pool;
	struct md_task *t;

	while ((t = take(pool))) {
		int rc = run_task(&w->m, t, &w->e);
		bool over;

		pthread_mutex_lock(&pool->lock);
		pool->busy--;
		if (rc < 0 && !pool->stop) {
			__atomic_store_n(&pool->stop, true, __ATOMIC_RELAXED);
			pool->err = w->e;
			memset(&w->e, 0, sizeof(w->e));
		}
		/* the waiting threads learn it is over: stopped, or nothing
		 * left that could make more tasks */
		over = pool->stop || (!pool->waiting && pool->busy == 0);
		pthread_mutex_unlock(&pool->lock);
		hu_error_clear(&w->e);
		if (over)
			pthread_cond_broadcast(&pool->wake);
	}
	return NULL;
}

static void stats_add(struct hu_mergedown_stats *to,
		      const struct hu_mergedown_stats *from)
{
	to->moved += from->moved;
	to->copied += from->copied;
	to->removed += from->removed;
	to->dirs += from->dirs;
	to->markers += from->markers;
}

/* How many threads merge: HUNION_THREADS when set, else
 * POOL_THREADS_PER_CPU a CPU; at most POOL_MAX_THREADS. */
static size_t pool_threads(void)
{
	const char *env = getenv("HUNION_THREADS");
	long n = env ? strtol(env, NULL, 10) :
		POOL_THREADS_PER_CPU * sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > POOL_MAX_THREADS ? POOL_MAX_THREADS : (size_t)n;
}

/* Run the merge on @n threads (this one too).  1: stopped to start over
 * (a held layer, another filesystem), 0 done, -1 failed. */
static int pool_run(struct md *m, const struct stat *us, size_t n,
		    struct hu_error *e)
{
	struct md_pool pool = { .m = m, .max_waiting = n *
						     POOL_WAITING_PER_THREAD };
	struct worker *w = calloc(n, sizeof(*w));
	struct hu_vdir *root = NULL;
	struct md_task *t;
	size_t started = 0;
	int rc = -1;

	if (!w)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	pthread_mutex_init(&pool.lock, NULL);
	pthread_cond_init(&pool.wake, NULL);
	if (hu_vdir_open_root(m->s, &root, e) < 0)
		goto out;
	t = task_new(&pool, NULL, root, us, NULL);
	if (!t) {
		hu_vdir_close(root);
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	task_link(&pool, t);
	t->ufd = m->up->fd;	/* the layers' own root fds */
	t->tfd = m->to->fd;
	pool.waiting = t;
	pool.nwaiting = 1;
	for (size_t i = 0; i < n; i++) {
		w[i].m = *m;
		w[i].m.pool = &pool;
		w[i].m.st = &w[i].st;
		w[i].m.path = (struct hu_pathbuf){ 0 };
	}
	for (size_t i = 1; i < n; i++) {
		if (pthread_create(&w[i].thread, NULL, work, &w[i]) != 0)
			break;
		started++;
	}
	work(&w[0]);
	for (size_t i = 1; i <= started; i++)
		pthread_join(w[i].thread, NULL);
	for (size_t i = 0; i < n; i++) {
		stats_add(m->st, &w[i].st);
		hu_pathbuf_free(&w[i].m.path);
	}
	/* every task finished, unless the pool stopped */
	if (!pool.stop && pool.tasks)
		hu_error_set(&pool.err, EIO, pool.tasks->path, "the threads "
			     "ended with this directory not merged");
	/* what a stop left: children before their parents */
	while (pool.tasks) {
		t = pool.tasks;
		task_unlink(&pool, t);
		task_free(t);
	}
	if (!pool.stop && !hu_error_has_msg(&pool.err)) {
		rc = 0;
	} else if (pool.err.err == EXDEV || pool.err.err == EAGAIN) {
		hu_error_clear(&pool.err);
		rc = 1;
	} else {
		hu_error_clear(e);
		*e = pool.err;
	}
out:
	pthread_cond_destroy(&pool.wake);
	pthread_mutex_destroy(&pool.lock);
	free(w);
	return rc;
}

/* The deferred layers beneath the target held while the pool runs
 * (@held: a flag per layer), or no more (NULL). */
static void hold(const struct md *m, bool *held)
{
	for (size_t j = 0; j < m->ito; j++) {
		struct hu_layer *l = &m->s->layers[j];

		l->hold = held && hu_layer_is_deferred(l) ? &held[j] : NULL;
	}
}

/* Detect the layers the view would have detected while the pool ran. */
static int settle_held(const struct md *m, const bool *held,
		       struct hu_error *e)
{
	for (size_t j = 0; j < m->ito; j++)
		if (held[j] && hu_layer_settle(&m->s->layers[j], e) < 0)
			return -1;
	return 0;
}

int md_pool_merge(struct md *m, const struct stat *us, struct hu_error *e)
{
	size_t n = pool_threads();
	bool *held;
	int rc;

	/* one thread: the steps in their order for -v and -n; the copies
	 * share their hard-link map; redirects and metacopy files reach
	 * across directories */
	if (n < 2 || m->o->step || hu_wr_dry_run() || !md_renames(m) ||
	    m->up->refs != HU_REFS_NONE)
		return md_merge_root(m, us, e);
	held = calloc(m->ito + 1, sizeof(*held));
	if (!held)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	hold(m, held);
	rc = pool_run(m, us, n, e);
	hold(m, NULL);
	if (rc > 0 && settle_held(m, held, e) < 0)
		rc = -1;
	free(held);
	if (rc <= 0)
		return rc;
	/* started over where the pool stopped, on one thread, which moves
	 * to copies itself on EXDEV */
	return md_merge_root(m, us, e);
}
