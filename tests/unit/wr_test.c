/* SPDX-License-Identifier: MIT */
/* The write wrapper's injected kills and interrupts (HUNION_FAULT=kill:N,
 * int:N) hit the thread making the Nth change, at that change: not a
 * thread the kernel picks, later, which on a busy machine lets the run go
 * on for a few more changes. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hunion.h"
#include "internal.h"
#include "testutil.h"

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(fault, .fini = teardown);

/* What the SIGINT handler saw: the thread it ran on. */
static pthread_t handled_on;
static volatile sig_atomic_t handled;

static void on_sigint(int sig)
{
	(void)sig;
	handled_on = pthread_self();
	handled = 1;
	hu_interrupt();
}

/* A worker making three changes, as the pool's threads do; the main
 * thread sleeps in pthread_join meanwhile, the thread the kernel picks
 * for a signal sent to the process. */
struct changes {
	int dirfd;
	bool handled_after[3], interrupted_after[3];
	int rc[3];
};

static void *make_three(void *arg)
{
	struct changes *c = arg;
	static const char *const names[] = { "a", "b", "c" };

	for (int i = 0; i < 3; i++) {
		c->rc[i] = hu_wr_mkdirat(c->dirfd, names[i], 0755);
		c->handled_after[i] = handled &&
				      pthread_equal(handled_on, pthread_self());
		c->interrupted_after[i] = hu_interrupted();
	}
	return NULL;
}

static void three_on_a_worker(struct changes *c)
{
	pthread_t t;

	c->dirfd = open(tu_tmpdir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(c->dirfd, 0);
	cr_assert_eq(pthread_create(&t, NULL, make_three, c), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	close(c->dirfd);
}

Test(fault, int_stops_the_run_at_the_change_on_its_thread)
{
	struct sigaction sa = { .sa_handler = on_sigint,
				.sa_flags = SA_RESTART };
	struct changes c = { 0 };

	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGINT, &sa, NULL), 0);
	setenv("HUNION_FAULT", "int:2", 1);
	three_on_a_worker(&c);
	cr_expect(!c.interrupted_after[0]);
	/* the handler ran on the worker, before its call returned */
	cr_expect(c.handled_after[1], "the handler ran on another thread, "
		  "or after the call");
	cr_expect(c.interrupted_after[1]);
	/* the change itself is made: an interrupt, not a failure */
	cr_expect_eq(c.rc[1], 0);
	cr_expect(tu_exists("b"));
}

Test(fault, int_stops_the_run_where_sigint_is_ignored)
{
	struct changes c = { 0 };

	/* a script's background job: the front end leaves SIGINT ignored */
	signal(SIGINT, SIG_IGN);
	setenv("HUNION_FAULT", "int:1", 1);
	three_on_a_worker(&c);
	cr_expect(c.interrupted_after[0]);
	cr_expect(tu_exists("a"));
}

Test(fault, kill_comes_before_the_change_on_any_thread)
{
	struct changes c = { 0 };
	int status;
	pid_t pid;

	setenv("HUNION_FAULT", "kill:2", 1);
	(void)tu_tmpdir();	/* made here, not in the child */
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		three_on_a_worker(&c);
		_exit(0);	/* not reached */
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	cr_expect(tu_exists("a"));
	cr_expect(!tu_exists("b"), "the killed change was made");
	cr_expect(!tu_exists("c"));
}
