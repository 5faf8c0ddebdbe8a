/* SPDX-License-Identifier: MIT */
/*
 * An LD_PRELOAD shim for tests: HU_STOP_RENAME=N stops the process
 * (SIGSTOP) just before its Nth renameat2(2), so that a test can hold a
 * run between two renames and do something else meanwhile, with no
 * timing.  Build: cc -shared -fPIC -o stoprename.so stoprename.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

int renameat2(int olddirfd, const char *oldpath, int newdirfd,
	      const char *newpath, unsigned int flags)
{
	static int (*real)(int, const char *, int, const char *,
			   unsigned int);
	static long seen;
	const char *at = getenv("HU_STOP_RENAME");

	if (!real)
		real = (int (*)(int, const char *, int, const char *,
				unsigned int))dlsym(RTLD_NEXT, "renameat2");
	if (at && __atomic_add_fetch(&seen, 1, __ATOMIC_SEQ_CST) ==
	    strtol(at, NULL, 10))
		raise(SIGSTOP);
	return real(olddirfd, oldpath, newdirfd, newpath, flags);
}
