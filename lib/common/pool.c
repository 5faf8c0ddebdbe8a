/* SPDX-License-Identifier: MIT */
/* The worker pool: a bounded FIFO of jobs, a mutex and two conditions. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/pool.h"

enum {
	QUEUE_MAX = 128,	/* bounds the open fds the jobs hold */
	BATCH = 16,		/* jobs handed over per lock and wake-up */
};

struct hu_pool {
	pthread_mutex_t lock;
	pthread_cond_t more;	/* a job was queued, or stop */
	pthread_cond_t room;	/* a job was taken, or all are done */
	struct hu_pool_job *head, *tail;
	size_t queued, running;
	/* The submitter's batch, not yet queued: no lock needed. */
	struct hu_pool_job *batch_head, *batch_tail;
	size_t batched;
	bool stop, failed;
	struct hu_error first;	/* the first failure */
	unsigned nthreads;
	pthread_t *threads;
};

unsigned hu_pool_default_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	/* One more worker than cores: copies wait on the disk too. */
	return n < 1 ? 1 : n > 8 ? 9 : (unsigned)n + 1;
}

/* Record @e as the failure unless one is kept already; under the lock. */
static void keep_failure(struct hu_pool *p, struct hu_error *e)
{
	if (!p->failed) {
		p->failed = true;
		p->first = *e;		/* takes over e->path */
	} else {
		hu_error_clear(e);
	}
	memset(e, 0, sizeof(*e));
}

/* Run the jobs of the list @jobs (or drop them after a failure). */
static void run_list(struct hu_pool *p, struct hu_pool_job *jobs, bool failed)
{
	while (jobs) {
		struct hu_pool_job *job = jobs;
		struct hu_error e = { 0 };

		jobs = job->next;
		if (failed) {
			job->drop(job);
			continue;
		}
		if (job->run(job, &e) < 0) {
			pthread_mutex_lock(&p->lock);
			keep_failure(p, &e);
			pthread_mutex_unlock(&p->lock);
			failed = true;
		}
	}
}

static void *worker(void *arg)
{
	struct hu_pool *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct hu_pool_job *jobs, *last;
		size_t n = 1;
		bool failed;

		while (!p->head && !p->stop)
			pthread_cond_wait(&p->more, &p->lock);
		if (!p->head)
			break;
		/* Take a few jobs at once: fewer lock round trips. */
		jobs = last = p->head;
		while (n < BATCH && last->next) {
			last = last->next;
			n++;
		}
		p->head = last->next;
		if (!p->head)
			p->tail = NULL;
		last->next = NULL;
		p->queued -= n;
		p->running++;
		failed = p->failed;
		pthread_cond_signal(&p->room);
		pthread_mutex_unlock(&p->lock);
		run_list(p, jobs, failed);
		pthread_mutex_lock(&p->lock);
		p->running--;
		pthread_cond_broadcast(&p->room);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int hu_pool_start(struct hu_pool **out, unsigned threads, struct hu_error *e)
{
	struct hu_pool *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->more, NULL);
	pthread_cond_init(&p->room, NULL);
	p->threads = calloc(threads ? threads : 1, sizeof(*p->threads));
	if (!p->threads) {
		free(p);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	for (; p->nthreads < threads; p->nthreads++) {
		int err = pthread_create(&p->threads[p->nthreads], NULL,
					 worker, p);

		if (err) {
			/* Fewer workers is still a pool; none: inline. */
			break;
		}
	}
	*out = p;
	return 0;
}

/* Hand the submitter's batch to the workers. */
static int flush(struct hu_pool *p, struct hu_error *e)
{
	struct hu_pool_job *jobs = p->batch_head;
	size_t n = p->batched;

	p->batch_head = p->batch_tail = NULL;
	p->batched = 0;
	if (!jobs)
		return 0;
	pthread_mutex_lock(&p->lock);
	while (p->queued >= QUEUE_MAX && !p->failed)
		pthread_cond_wait(&p->room, &p->lock);
	if (p->failed) {
		pthread_mutex_unlock(&p->lock);
		run_list(p, jobs, true);
		return hu_error_set(e, p->first.err, p->first.path, "%s",
				    p->first.msg);
	}
	if (p->tail)
		p->tail->next = jobs;
	else
		p->head = jobs;
	while (jobs->next)
		jobs = jobs->next;
	p->tail = jobs;
	p->queued += n;
	pthread_cond_broadcast(&p->more);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int hu_pool_submit(struct hu_pool *p, struct hu_pool_job *job,
		   struct hu_error *e)
{
	if (p->nthreads == 0)
		return job->run(job, e);	/* no workers: run it here */
	job->next = NULL;
	if (p->batch_tail)
		p->batch_tail->next = job;
	else
		p->batch_head = job;
	p->batch_tail = job;
	return ++p->batched < BATCH ? 0 : flush(p, e);
}

int hu_pool_finish(struct hu_pool *p, struct hu_error *e)
{
	struct hu_error lost = { 0 };
	bool failed;

	if (flush(p, &lost) < 0)
		hu_error_clear(&lost);	/* the first failure is kept below */
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->more);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	failed = p->failed;
	if (failed && e && !hu_error_has_msg(e)) {
		hu_error_clear(e);
		*e = p->first;
	} else {
		hu_error_clear(&p->first);
	}
	pthread_cond_destroy(&p->more);
	pthread_cond_destroy(&p->room);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p);
	return failed ? -1 : 0;
}
