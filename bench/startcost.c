/* SPDX-License-Identifier: MIT */
/*
 * bench/startcost.c - start cost of short commands, for bench/run.sh.
 *
 *   startcost N KEY 'CMD ARG...' [KEY 'CMD ARG...']...
 *
 * Runs each command N times, alternating (round r starts with command
 * r mod K, so none always runs first), its output to /dev/null, and
 * prints one results.tsv row per run:
 *   start  KEY  ROUND  WALL_S  CPU_S  0  ok|failed  LOAD1
 * (ok: exit status 0, or 1, which diff gives when it finds changes)
 * WALL_S from fork to wait4, CPU_S the child's user + system time from
 * wait4's rusage: a fork + exec from C, so the shell's own start is in
 * neither.  CMD is split at spaces (no quoting: bench paths have none).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS 32

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double load1(void)
{
	FILE *f = fopen("/proc/loadavg", "r");
	double l = -1;

	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

static void split(char *cmd, char **argv)
{
	int n = 0;

	for (char *t = strtok(cmd, " "); t && n < MAX_ARGS - 1;
	     t = strtok(NULL, " "))
		argv[n++] = t;
	argv[n] = NULL;
}

/* One run of @argv: its wall and CPU seconds; 0 when it exited 0 or 1. */
static int run(char **argv, double *wall, double *cpu)
{
	struct rusage ru;
	double t0 = now();
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) != pid)
		return -1;
	*wall = now() - t0;
	*cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	/* 1: diff found changes, as diff(1) says so */
	return WIFEXITED(status) && WEXITSTATUS(status) <= 1 ? 0 : -1;
}

int main(int argc, char **argv)
{
	char *cmds[16][MAX_ARGS];
	const char *keys[16];
	int rounds, k = 0;

	if (argc < 4 || argc % 2 || (argc - 2) / 2 > 16 ||
	    (rounds = atoi(argv[1])) < 1) {
		fprintf(stderr, "usage: startcost N KEY 'CMD ARG...'...\n");
		return 2;
	}
	for (int i = 2; i < argc; i += 2, k++) {
		keys[k] = argv[i];
		split(argv[i + 1], cmds[k]);
	}
	for (int r = 1; r <= rounds; r++)
		for (int i = 0; i < k; i++) {
			int c = (i + r - 1) % k;
			double wall = 0, cpu = 0, load = load1();
			int rc = run(cmds[c], &wall, &cpu);

			printf("start\t%s\t%d\t%.6f\t%.6f\t0\t%s\t%.2f\n",
			       keys[c], r, wall, cpu, rc ? "failed" : "ok",
			       load);
		}
	return 0;
}
