/* SPDX-License-Identifier: MIT */
/* hunion merge -o OUT LAYER...: the merged view as a new plain tree. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"

struct merge_args {
	const struct cmd *c;
	struct layer_opts lo;
	const char *out;
	bool link;
};

static int merge_opt(void *ctx, const struct parsed_opt *o)
{
	struct merge_args *a = ctx;
	int rc = layer_opt(a->c, &a->lo, o);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (!strcmp(o->name, "output"))
		a->out = o->arg;
	else if (!strcmp(o->name, "link"))
		a->link = true;
	return 0;
}

static void print_stats(const struct merge_args *a,
			const struct hu_merge_stats *st, size_t layers)
{
	printf("%s %s: %llu directories, %llu files (%llu bytes), "
	       "%llu symlinks, %llu special files, %llu hard links",
	       a->lo.dry_run ? "would write" : "wrote", a->out,
	       (unsigned long long)st->dirs, (unsigned long long)st->files,
	       (unsigned long long)st->bytes,
	       (unsigned long long)st->symlinks,
	       (unsigned long long)st->specials,
	       (unsigned long long)st->hardlinks);
	if (st->skipped)
		printf(", %llu skipped", (unsigned long long)st->skipped);
	printf(" from %zu layers\n", layers);
}

int cmd_merge(const struct cmd *c, int argc, char **argv)
{
	struct merge_args a = { .c = c };
	struct hu_report report = front_report();
	struct hu_merge_opts mo = { .report = &report };
	struct hu_merge_stats st;
	struct hu_error e = { 0 };
	struct hu_stack s;
	int first = cmd_parse(c, argc, argv, merge_opt, &a), rc;

	if (first < 0)
		return EXIT_USAGE;
	if (!a.out)
		return cmd_usage_error(c, "-o OUT is required"), EXIT_USAGE;
	if (first >= argc)
		return cmd_usage_error(c, "no layers given"), EXIT_USAGE;
	a.lo.stack.report = &report;
	if (hu_stack_open(&s, argv + first, argc - first, &a.lo.stack,
			  &e) < 0) {
		print_error(&e);
		hu_error_clear(&e);
		return EXIT_TROUBLE;
	}
	mo.data = a.link ? HU_DATA_LINK : HU_DATA_COPY;
	mo.dry_run = a.lo.dry_run;
	rc = hu_merge_tree(&s, a.out, &mo, &st, &e);
	front_progress_done();
	if (rc < 0)
		print_error(&e);
	else if (front.verbosity > 0 || a.lo.dry_run)
		print_stats(&a, &st, s.n);
	hu_error_clear(&e);
	hu_stack_close(&s);
	return rc < 0 ? EXIT_TROUBLE : EXIT_OK;
}
