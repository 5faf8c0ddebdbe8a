/* SPDX-License-Identifier: MIT */
/* hunion flatten -o FILE LAYER...: the merged view as one tarball, or with
 * --base N the squashed layer of the layers above the bottom N. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"

struct flatten_args {
	const struct cmd *c;
	struct layer_opts lo;
	const char *out, *base;
	struct tar_args tar;
};

static int flatten_opt(void *ctx, const struct parsed_opt *o)
{
	struct flatten_args *a = ctx;
	int rc = layer_opt(a->c, &a->lo, o);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (tar_opt(&a->tar, o))
		return 0;
	if (!strcmp(o->name, "output"))
		a->out = o->arg;
	else if (!strcmp(o->name, "base"))
		a->base = o->arg;
	return 0;
}

/* The changes of the layers above the bottom @base ones. */
static int write_base(const struct hu_stack *s, size_t base,
		      bool opaque_markers, const struct hu_report *r,
		      struct hu_tarout *t, struct hu_error *e)
{
	struct hu_changes_opts co = { .base = base, .report = r };

	return hu_changes_write_tar(s, &co, opaque_markers, t, e);
}

static void print_summary(const struct flatten_args *a,
			  const struct hu_flatten_stats *st,
			  const struct hu_digests *d)
{
	const char *name = strcmp(a->out, "-") ? a->out : "standard output";

	if (!a->base)
		fprintf(stderr, "%s: %llu entries: %llu directories, %llu "
			"files (%llu bytes), %llu symlinks, %llu special "
			"files, %llu hard links, %llu skipped\n",
			front.cmdname, (unsigned long long)st->entries + 1,
			(unsigned long long)st->dirs,
			(unsigned long long)st->files,
			(unsigned long long)st->bytes,
			(unsigned long long)st->symlinks,
			(unsigned long long)st->specials,
			(unsigned long long)st->hardlinks,
			(unsigned long long)st->skipped);
	fprintf(stderr, "%s: wrote %s: %s, %llu bytes, %s, diffID %s\n",
		front.cmdname, name, d->media_type,
		(unsigned long long)d->size, d->digest, d->diff_id);
}

/* Write the tarball into @out (and its descriptor into @desc). */
static int flatten(struct flatten_args *a, const struct hu_stack *s,
		   const struct hu_tarout_opts *to, struct hu_outfile *out,
		   struct hu_outfile *desc, struct hu_error *e)
{
	struct hu_report report = front_report();
	struct hu_flatten_stats st = { 0 };
	struct hu_tarout *t;
	struct hu_digests d;
	char json[512];
	size_t n;
	int rc;

	if (hu_tarout_open(&t, out->fd, to, e) < 0)
		return -1;
	if (a->base)
		rc = write_base(s, strtoul(a->base, NULL, 10),
				a->tar.opaque_markers, &report, t, e);
	else
		rc = hu_flatten_write_tar(s, &report, t, &st, e);
	front_progress_done();
	if (rc < 0) {
		hu_tarout_abort(t);
		return -1;
	}
	if (hu_tarout_close(t, &d, e) < 0)
		return -1;
	if (desc->name) {
		n = hu_descriptor_json(&d, json, sizeof(json));
		if (hu_outfile_write(desc, json, n, e) < 0)
			return -1;
	}
	if (hu_outfile_commit(out, e) < 0)
		return -1;
	if (desc->name && hu_outfile_commit(desc, e) < 0)
		return -1;
	if (front.verbosity > 0)
		print_summary(a, &st, &d);
	return 0;
}

/* Check what needs the number of layers; -1 after a usage error. */
static int check_args(struct flatten_args *a, int nlayers)
{
	long long v;

	if (a->base && !parse_num(a->base, 1, nlayers - 1, &v))
		return cmd_usage_error(a->c, nlayers < 2 ?
				       "--base needs at least two layers" :
				       "invalid --base '%s' (1 to %d: the "
				       "layers kept as context)", a->base,
				       nlayers - 1);
	if (a->tar.opaque_markers && !a->base)
		return cmd_usage_error(a->c, "--opaque-markers needs --base");
	if (!strcmp(a->out, "-") && isatty(STDOUT_FILENO))
		return cmd_usage_error(a->c, "refusing to write a tarball to "
				       "a terminal");
	if (a->tar.descriptor && !strcmp(a->tar.descriptor, a->out))
		return cmd_usage_error(a->c, "--descriptor names the output");
	return 0;
}

int cmd_flatten(const struct cmd *c, int argc, char **argv)
{
	struct flatten_args a = { .c = c };
	struct hu_tarout_opts to = { 0 };
	struct hu_outfile out = { .fd = -1, .dirfd = -1 };
	struct hu_outfile desc = { .fd = -1, .dirfd = -1 };
	struct hu_report report = front_report();
	struct hu_error e = { 0 };
	struct hu_stack s;
	int first = cmd_parse(c, argc, argv, flatten_opt, &a), rc = -1;

	if (first < 0)
		return EXIT_USAGE;
	if (!a.out)
		return cmd_usage_error(c, "-o FILE is required"), EXIT_USAGE;
	if (first >= argc)
		return cmd_usage_error(c, "no layers given"), EXIT_USAGE;
	if (tar_args_resolve(c, &a.tar, a.out, &to) < 0 ||
	    check_args(&a, argc - first) < 0)
		return EXIT_USAGE;
	a.lo.stack.report = &report;
	if (hu_stack_open(&s, argv + first, argc - first, &a.lo.stack,
			  &e) < 0) {
		print_error(&e);
		hu_error_clear(&e);
		return EXIT_TROUBLE;
	}
	if (hu_outfile_open(&out, a.out, &s, &e) == 0 &&
	    (!a.tar.descriptor ||
	     hu_outfile_open(&desc, a.tar.descriptor, &s, &e) == 0)) {
		rc = flatten(&a, &s, &to, &out, &desc, &e);
		if (rc < 0 && !e.path)
			hu_error_prefix(&e, strcmp(a.out, "-") ? a.out :
					"standard output");
	}
	if (rc < 0) {
		print_error(&e);
		hu_outfile_abort(&desc);
		hu_outfile_abort(&out);
	}
	hu_error_clear(&e);
	hu_stack_close(&s);
	return rc < 0 ? EXIT_TROUBLE : EXIT_OK;
}
