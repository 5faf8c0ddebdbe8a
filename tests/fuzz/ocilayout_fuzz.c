/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: any bytes as an image layout's JSON documents: parsed as
 * an index (index.json, a nested index), a manifest, and a config for the
 * layers the manifest gave; and the bytes up to a first newline as an
 * operand oci:DIR[:REF] and a platform.  Errors are fine; a crash or a
 * leak is not, and what parses must hold what the parsers promise
 * (digests valid, layer types known, as many diff_ids as layers).
 *
 *   clang -fsanitize=fuzzer,address,undefined ... (libFuzzer), or with
 *   tests/fuzz/replay_main.c to run a corpus without libFuzzer
 *   (tests/fuzz/replay.sh).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hunion.h"
#include "oci/oci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void operand(const char *s, size_t n)
{
	char *arg = malloc(n + 5), *layout, *ref;
	struct hu_error e = { 0 };
	struct oci_platform p;

	if (!arg)
		return;
	memcpy(arg, "oci:", 4);
	memcpy(arg + 4, s, n);
	arg[n + 4] = '\0';
	if (hu_oci_operand_parse(arg, &layout, &ref, &e) == 0) {
		if (!*layout)
			abort();
		free(layout);
		free(ref);
	}
	hu_error_clear(&e);
	(void)oci_platform_parse(arg + 4, &p);
	free(arg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	const char *nl = memchr(data, '\n', size);
	struct hu_oci_image img = { .layout_fd = -1 };
	struct hu_error e = { 0 };
	struct oci_index x;

	operand(buf, nl ? (size_t)(nl - buf) : size);
	if (oci_index_parse(buf, size, "fuzz", 0, &x, &e) == 0) {
		for (size_t i = 0; i < x.n; i++)
			if (!oci_digest_valid(x.v[i].desc.digest))
				abort();
		oci_index_free(&x);
	}
	hu_error_clear(&e);
	if (oci_manifest_parse(buf, size, "fuzz", &img, &e) == 0) {
		for (size_t i = 0; i < img.nlayers; i++)
			if (!oci_media_type(img.layers[i].media_type))
				abort();
	} else {
		img.nlayers = 0;
	}
	hu_error_clear(&e);
	if (oci_config_parse(buf, size, "fuzz", &img, &e) == 0 &&
	    !img.diff_ids && img.nlayers)
		abort();
	hu_error_clear(&e);
	free(img.layers);
	free(img.layer_urls);
	free(img.diff_ids);
	return 0;
}
