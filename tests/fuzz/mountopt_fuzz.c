/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: any bytes as the -o of mount.union (a mount(8) helper's
 * options, outside input).  Errors are fine; a crash or a leak is not,
 * every layer parsed must escape back to a string that parses to it
 * again, and the filesystem options kept must parse to themselves (split
 * at the same ',': none inside quotes or escaped).
 *
 *   clang -fsanitize=fuzzer,address,undefined ... (libFuzzer), or with
 *   tests/fuzz/replay_main.c to run a corpus without libFuzzer
 *   (tests/fuzz/replay.sh).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hunion.h"
#include "mount/mount.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(const char *layer)
{
	size_t n = hu_mountopt_escaped_len(layer, ":,\\");
	char *opt = malloc(n + 10);
	struct hu_mount_spec sp;
	struct hu_error e = { 0 };

	if (!opt)
		return;
	memcpy(opt, "lowerdir=", 9);
	hu_mountopt_escape(opt + 9, layer, ":,\\");
	if (hu_mount_spec_parse(opt, true, &sp, &e) == 0) {
		if (sp.n != 1 || strcmp(sp.layers[0], layer) != 0)
			abort();
		hu_mount_spec_free(&sp);
	} else if (*layer) {
		abort();	/* a non-empty path always parses */
	}
	hu_error_clear(&e);
	free(opt);
}

static void fs_options_again(const char *opts)
{
	struct hu_mount_spec sp;
	struct hu_error e = { 0 };

	if (hu_mount_spec_parse(opts, false, &sp, &e) < 0)
		abort();
	if (sp.flags || !sp.fs_options || strcmp(sp.fs_options, opts) != 0)
		abort();
	hu_mount_spec_free(&sp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	struct hu_mount_spec sp;
	struct hu_error e = { 0 };

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	for (int take = 0; take < 2; take++) {
		if (hu_mount_spec_parse(s, take, &sp, &e) == 0) {
			for (size_t i = 0; i < sp.n; i++)
				round_trip(sp.layers[i]);
			if (sp.fs_options)
				fs_options_again(sp.fs_options);
			hu_mount_spec_free(&sp);
		}
		hu_error_clear(&e);
	}
	free(s);
	return 0;
}
