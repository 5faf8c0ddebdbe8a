/* SPDX-License-Identifier: MIT */
/*
 * A small pool of worker threads for independent jobs (pool.c): the
 * walk of a tree is one thread; copying file data and metadata, which
 * needs nothing from the walk once both files are open, runs beside it.
 * The first failure is kept; later jobs are then dropped.
 */
#ifndef HUNION_POOL_H
#define HUNION_POOL_H

#include "hunion.h"

struct hu_pool;

/* A job: @run does the work and fills @e on failure; @drop releases the
 * job when it will not run (after an earlier failure).  Both own @job. */
struct hu_pool_job {
	int (*run)(struct hu_pool_job *job, struct hu_error *e);
	void (*drop)(struct hu_pool_job *job);
	struct hu_pool_job *next;
};

/* Start @threads workers (0: run every job at once in the caller). */
int hu_pool_start(struct hu_pool **p, unsigned threads, struct hu_error *e);
/* Queue @job; waits while many are queued.  Returns -1 with the first
 * failure of an earlier job in @e (the job is then dropped). */
int hu_pool_submit(struct hu_pool *p, struct hu_pool_job *job,
		   struct hu_error *e);
/* Wait for every job, stop the workers, free the pool.  Returns -1 with
 * the first failure when a job failed (unless @e already holds one: then
 * @e is left alone). */
int hu_pool_finish(struct hu_pool *p, struct hu_error *e);
/* How many workers suit this machine for file copies. */
unsigned hu_pool_default_threads(void);

#endif
