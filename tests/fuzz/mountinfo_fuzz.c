/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: any bytes as /proc/self/mountinfo, scanned for the root
 * directory (a stack of one layer, "/", and "/" again as the extra
 * directory), so that escaped, cut and hostile option strings reach every
 * decoder.  A use found or not is fine; a crash or a leak is not, nor a
 * use without its mount point.
 *
 *   clang -fsanitize=fuzzer,address,undefined ... (libFuzzer), or with
 *   tests/fuzz/replay_main.c to run a corpus without libFuzzer
 *   (tests/fuzz/replay.sh).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mount/mountinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct hu_layer root = { .path = "/", .fd = -1 };
	static struct hu_stack s = { .n = 1, .layers = &root };
	struct hu_mount_use use;
	struct hu_error e = { 0 };
	struct stat st;
	FILE *f;
	int fd, rc;

	if (root.fd < 0) {
		if (stat("/", &st) < 0)
			abort();
		root.dev = st.st_dev;
		root.ino = st.st_ino;
		root.fd = 0;
	}
	if (size == 0)
		return 0;
	f = fmemopen((void *)data, size, "r");
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!f || fd < 0)
		abort();
	rc = hu_mountinfo_scan(f, "fuzz", &s, fd, &use, &e);
	if (rc == 1 && (!use.mountpoint || !use.fstype || !use.role))
		abort();
	if (rc != 1 && use.mountpoint)
		abort();
	hu_mount_use_free(&use);
	hu_error_clear(&e);
	fclose(f);
	close(fd);
	return 0;
}
