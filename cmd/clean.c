/* SPDX-License-Identifier: MIT */
/*
 * hunion clean: remove what killed hunion runs left in TMPDIR (tarball
 * layers' unpack directories no live run holds, and what was moved aside
 * there by runs that died before removing it).  A run removes those it
 * meets after its own work; this removes them on purpose, as `oci gc`
 * does for a layout.  Parsing and printing only; lib/ does the work.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cmd.h"

struct clean_args {
	const struct cmd *c;
	struct layer_opts lo;	/* -n, -v, -q, --progress */
	unsigned long long n;
};

static int clean_opt(void *ctx, const struct parsed_opt *o)
{
	struct clean_args *a = ctx;

	return layer_opt(a->c, &a->lo, o) < 0 ? -1 : 0;
}

static void told(void *ctx, const char *path)
{
	struct clean_args *a = ctx;

	a->n++;
	if (a->lo.dry_run || front.verbosity > 0) {
		FILE *f = front_steps(a->lo.dry_run);

		front_progress_done();
		fprintf(f, "%s ", a->lo.dry_run ? "would remove" : "removed");
		print_path_escaped(f, path);
		fputc('\n', f);
	}
}

int cmd_clean(const struct cmd *c, int argc, char **argv)
{
	struct clean_args a = { .c = c };
	struct hu_error e = { 0 };
	char *dir = NULL;
	int first = cmd_parse(c, argc, argv, clean_opt, &a), rc;

	if (first < 0)
		return EXIT_USAGE;
	if (first != argc) {
		cmd_usage_error(c, "no operands (TMPDIR says where)");
		return EXIT_USAGE;
	}
	rc = hu_tmp_clean(a.lo.dry_run, told, &a, &dir, &e);
	if (rc == 0 && !a.lo.dry_run)
		rc = progress_remove_aside(told, &a, &e);
	progress_finish(a.n, PROGRESS_UNKNOWN);
	fflush(stdout);
	if (rc == 0 && front.verbosity >= 0)
		fprintf(stderr, "%s: %s %llu %s of killed runs in %s\n",
			front.cmdname, a.lo.dry_run ? "would remove" :
			"removed", a.n, plural(a.n, "leftover", "leftovers"),
			dir);
	free(dir);
	if (rc < 0) {
		print_error(&e);
		hu_error_clear(&e);
		return EXIT_TROUBLE;
	}
	return EXIT_OK;
}
