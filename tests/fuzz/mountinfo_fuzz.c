/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: any bytes as /proc/self/mountinfo, scanned by
 * hu_mountinfo_dirs() for the root directory, written and read, so that
 * escaped, cut and hostile option strings reach every decoder and every
 * role counts.  The kernel's probe is a fake whose answer (1, 0, -1:
 * cannot tell) the first byte picks.  A use found or not is fine; a crash
 * or a leak is not, nor a use without its mount point, nor an unknown one
 * without the option.
 *
 *   clang -fsanitize=fuzzer,address,undefined ... (libFuzzer), or with
 *   tests/fuzz/replay_main.c to run a corpus without libFuzzer
 *   (tests/fuzz/replay.sh).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mount/mountinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int probe_answer;

static int fake_locked(int fd)
{
	(void)fd;
	errno = EPERM;
	return probe_answer;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hu_mount_use use;
	struct hu_error e = { 0 };
	struct hu_dir_ref d[2];
	FILE *f;
	int fd, rc;

	if (size == 0)
		return 0;
	probe_answer = data[0] % 3 - 1;
	f = fmemopen((void *)data, size, "r");
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!f || fd < 0)
		abort();
	d[0] = (struct hu_dir_ref){ fd, "/", "upper layer", true, false };
	d[1] = (struct hu_dir_ref){ fd, "/", "lower layer", false, false };
	rc = hu_mountinfo_dirs(f, "fuzz", d, 2, fake_locked, &use, &e);
	if (rc > 2)
		abort();
	if (rc == 1 && (!use.mountpoint || !use.fstype || !use.role ||
			!use.layer))
		abort();
	if (rc == 2 && (!use.mountpoint || !use.option))
		abort();
	if (rc == 0 && use.mountpoint)
		abort();
	hu_mount_use_free(&use);
	hu_error_clear(&e);
	fclose(f);
	close(fd);
	return 0;
}
