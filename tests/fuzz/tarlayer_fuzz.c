/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: any bytes as a tarball layer, on top of a small directory
 * layer (so that parents no entry names look beneath).  Errors are fine;
 * a crash, a leak or a private directory left under TMPDIR is not.
 *
 *   clang -fsanitize=fuzzer,address,undefined ... (libFuzzer), or with
 *   tests/fuzz/replay_main.c to run a corpus without libFuzzer
 *   (tests/fuzz/replay.sh).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hunion.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base[64], tmp[96], lower[96];

static void mk(const char *rel, bool dir)
{
	char p[160];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", lower, rel);
	if (dir) {
		mkdir(p, 0755);
		return;
	}
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0)
		close(fd);
}

static void cleanup(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		fprintf(stderr, "tarlayer_fuzz: cannot remove %s\n", base);
}

static void setup(void)
{
	strcpy(base, "/tmp/hunion-fuzz.XXXXXX");
	if (!mkdtemp(base))
		abort();
	snprintf(tmp, sizeof(tmp), "%s/tmp", base);
	snprintf(lower, sizeof(lower), "%s/lower", base);
	if (mkdir(tmp, 0700) < 0 || mkdir(lower, 0755) < 0)
		abort();
	mk("etc", true);
	mk("etc/passwd", false);
	mk("usr", true);
	mk("usr/bin", true);
	mk(".wh.lower-name-is-not-a-whiteout-here", false);
	setenv("TMPDIR", tmp, 1);
	atexit(cleanup);
}

static int on_entry(void *ctx, struct hu_vdir *d, const struct hu_ventry *ent,
		    struct hu_error *e)
{
	size_t *n = ctx;

	(*n)++;
	if (S_ISREG(ent->st.st_mode)) {
		int fd = hu_vdir_open_data(d, ent, NULL, e);

		if (fd < 0)
			return -1;
		close(fd);
	}
	return 1;
}

/* Nothing may stay under TMPDIR once the layer is closed. */
static void check_tmp_empty(void)
{
	DIR *d = opendir(tmp);
	struct dirent *de;

	if (!d)
		abort();
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			fprintf(stderr, "tarlayer_fuzz: left behind: %s/%s\n",
				tmp, de->d_name);
			abort();
		}
	closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct hu_walk_ops ops = { .entry = on_entry };
	struct hu_stack_opts o = { .format = HU_FMT_AUTO };
	struct hu_error e = { 0 };
	struct hu_stack s;
	char path[64], *paths[2] = { lower, path };
	size_t n = 0;
	int fd;

	if (!base[0])
		setup();
	fd = memfd_create("layer", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	for (size_t done = 0; done < size;) {
		ssize_t w = write(fd, data + done, size - done);

		if (w <= 0)
			abort();
		done += (size_t)w;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (hu_stack_open(&s, paths, 2, &o, &e) == 0) {
		(void)hu_view_walk(&s, &ops, &n, &e);
		hu_stack_close(&s);
	}
	hu_error_clear(&e);
	close(fd);
	check_tmp_empty();
	return 0;
}
