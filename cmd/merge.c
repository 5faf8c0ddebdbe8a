/* SPDX-License-Identifier: MIT */
/*
 * hunion merge -o OUT LAYER...: the merged view as a new plain tree.
 * hunion merge --into LAYER...: the top layer merged down into the one
 * beneath it, in place.
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"

struct merge_args {
	const struct cmd *c;
	struct layer_opts lo;
	const char *out;
	bool link, into, keep_upper, force;
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
	else if (!strcmp(o->name, "into"))
		a->into = true;
	else if (!strcmp(o->name, "keep-upper"))
		a->keep_upper = true;
	else if (!strcmp(o->name, "force"))
		a->force = true;
	return 0;
}

/* What merge -o wrote, for the final progress lines: the entries its
 * summary counts, and their bytes. */
static void finish_stats(const struct hu_merge_stats *st)
{
	progress_finish(st->dirs + st->files + st->symlinks + st->specials +
			st->hardlinks, st->bytes);
}

static void print_stats(const struct merge_args *a,
			const struct hu_merge_stats *st, size_t layers)
{
	FILE *to = front_steps(a->lo.dry_run);

#define N(n, one, many) (unsigned long long)(n), plural(n, one, many)
	fprintf(to, "%s %s: %llu %s, %llu %s (%llu %s), %llu %s, %llu %s, "
		"%llu %s", a->lo.dry_run ? "would write" : "wrote", a->out,
		N(st->dirs, "directory", "directories"),
		N(st->files, "file", "files"), N(st->bytes, "byte", "bytes"),
		N(st->symlinks, "symlink", "symlinks"),
		N(st->specials, "special file", "special files"),
		N(st->hardlinks, "hard link", "hard links"));
#undef N
	if (st->skipped)
		fprintf(to, ", %llu skipped", (unsigned long long)st->skipped);
	fprintf(to, " from %zu %s\n", layers, plural(layers, "layer", "layers"));
}

/* -n: the plan; -v: each step as it is done. */
static void print_step(void *ctx, const char *what, const char *path)
{
	FILE *to = front_steps(*(const bool *)ctx);

	fprintf(to, "%s ", what);
	print_path_escaped(to, *path ? path : ".");
	putc('\n', to);
}

static void print_into_stats(const struct merge_args *a,
			     const struct hu_stack *s,
			     const struct hu_mergedown_stats *st)
{
	fprintf(front_steps(a->lo.dry_run), "%s %s into %s: %llu moved, %llu copied, %llu removed, "
	       "%llu directories merged, %llu markers kept, %llu redirects "
	       "and metacopy files resolved\n",
	       a->lo.dry_run ? "would merge" : "merged",
	       s->layers[s->n - 1].path, s->layers[s->n - 2].path,
	       (unsigned long long)st->moved, (unsigned long long)st->copied,
	       (unsigned long long)st->removed, (unsigned long long)st->dirs,
	       (unsigned long long)st->markers,
	       (unsigned long long)st->prepared);
}

static int merge_into(struct merge_args *a, struct hu_stack *s,
		      const struct hu_report *report)
{
	struct hu_mergedown_opts o = {
		.keep_upper = a->keep_upper, .force = a->force,
		.dry_run = a->lo.dry_run, .report = report,
		.step = (front.verbosity > 0 || a->lo.dry_run) ?
			print_step : NULL, .ctx = &a->lo.dry_run,
	};
	struct hu_mergedown_stats st;
	struct hu_error e = { 0 };
	int rc = hu_merge_down(s, &o, &st, &e);

	if (rc < 0)
		front_progress_done();
	else
		progress_finish(PROGRESS_UNKNOWN, PROGRESS_UNKNOWN);
	if (rc < 0)
		print_error(&e);
	else if (st.kept_before && front.verbosity >= 0)
		fprintf(stderr, "%s: %s was merged into %s by an earlier 'merge --into "
		       "--keep-upper' (the record union.mergedown-kept on its "
		       "root says so): nothing to do\n", front.cmdname,
		       s->layers[s->n - 1].path, s->layers[s->n - 2].path);
	else if (front.verbosity > 0 || a->lo.dry_run)
		print_into_stats(a, s, &st);
	hu_error_clear(&e);
	return rc < 0 ? EXIT_TROUBLE : EXIT_OK;
}

/* Tarballs alone: read straight into OUT (mergetar.c). */
static int merge_stream(struct merge_args *a, char *const layers[], size_t n,
			const struct hu_merge_opts *mo)
{
	struct hu_merge_stats st;
	struct hu_error e = { 0 };
	int rc = hu_merge_stream(layers, n, a->out, &a->lo.stack, mo, &st,
				 &e);

	if (rc < 0)
		front_progress_done();
	else
		finish_stats(&st);
	if (rc < 0)
		print_error(&e);
	else if (front.verbosity > 0)
		print_stats(a, &st, n);
	hu_error_clear(&e);
	return rc < 0 ? EXIT_TROUBLE : EXIT_OK;
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

	if (first < 0 ||
	    layer_operands(c, &a.lo, &argc, &argv, first, 0) < 0)
		return EXIT_USAGE;
	if (a.into && (a.out || a.link))
		return cmd_usage_error(c, "--into merges in place: no -o, no "
				       "--link"), EXIT_USAGE;
	if (!a.into && (a.keep_upper || a.force))
		return cmd_usage_error(c, "--keep-upper and --force go with "
				       "--into"), EXIT_USAGE;
	if (a.into && argc - first < 2)
		return cmd_usage_error(c, "--into needs two layers at least"),
			EXIT_USAGE;
	if (!a.out && !a.into)
		return cmd_usage_error(c, "-o OUT or --into is required"),
			EXIT_USAGE;
	if (first >= argc)
		return cmd_usage_error(c, "no layers given"), EXIT_USAGE;
	if (a.into && refuse_images(c, argc, argv, first, "merge --into") < 0)
		return EXIT_USAGE;
	a.lo.stack.report = &report;
	mo.data = a.link ? HU_DATA_LINK : HU_DATA_COPY;
	mo.dry_run = a.lo.dry_run;
	if (!a.into && hu_merge_can_stream((const char *const *)argv + first,
					   (size_t)(argc - first), &a.lo.stack,
					   &mo))
		return merge_stream(&a, argv + first, (size_t)(argc - first),
				    &mo);
	/* --into reads the layers beneath the target only where the upper
	 * leads: their formats are detected there, not by a walk of each.
	 * -o reads the bottom layer whole, but what its format changes is
	 * only which of its own entries are markers: it is detected if the
	 * walk meets one (a base image seldom has any), as flatten does,
	 * which saves a walk of it before the merge's own. */
	if (a.into && a.lo.stack.format == HU_FMT_AUTO)
		a.lo.stack.defer_below = (size_t)(argc - first) - 2;
	else if (a.lo.stack.format == HU_FMT_AUTO)
		a.lo.stack.defer_below = 1;
	/* the upper's detection tells whether phase 1 has anything to do */
	a.lo.stack.find_refs = a.into;
	if (hu_stack_open(&s, argv + first, argc - first, &a.lo.stack,
			  &e) < 0) {
		print_error(&e);
		hu_error_clear(&e);
		return EXIT_TROUBLE;
	}
	if (a.into) {
		rc = merge_into(&a, &s, &report);
		hu_stack_close(&s);
		return rc;
	}
	warn_live_layers(&s, &report);
	rc = hu_merge_tree(&s, a.out, &mo, &st, &e);
	if (rc < 0)
		front_progress_done();
	else
		finish_stats(&st);
	if (rc < 0)
		print_error(&e);
	else if (front.verbosity > 0 || a.lo.dry_run)
		print_stats(&a, &st, s.n);
	hu_error_clear(&e);
	hu_stack_close(&s);
	return rc < 0 ? EXIT_TROUBLE : EXIT_OK;
}
