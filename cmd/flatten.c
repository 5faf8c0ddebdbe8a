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
	struct oci_args oci;	/* -o oci:DIR:TAG */
	struct erofs_args erofs;	/* -o erofs:FILE */
	bool image;
};

static int flatten_opt(void *ctx, const struct parsed_opt *o)
{
	struct flatten_args *a = ctx;
	int rc = layer_opt(a->c, &a->lo, o);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	rc = oci_opt(a->c, &a->oci, o);
	if (rc != 0 || tar_opt(&a->tar, o) || erofs_opt(&a->erofs, o))
		return rc < 0 ? -1 : 0;
	if (!strcmp(o->name, "output"))
		a->out = o->arg;
	else if (!strcmp(o->name, "base"))
		a->base = o->arg;
	return 0;
}

struct flatten_fill {
	const struct flatten_args *a;
	const struct hu_stack *s;
	struct hu_report report;
	struct hu_flatten_stats st;
};

/* The merged view, or with --base the changes of the layers above the
 * bottom N. */
static int fill(void *ctx, struct hu_tarout *t, struct hu_error *e)
{
	struct flatten_fill *f = ctx;
	struct hu_changes_opts co = { .report = &f->report };

	if (!f->a->base)
		return hu_flatten_write_tar(f->s, &f->report, t, &f->st, e);
	co.base = strtoul(f->a->base, NULL, 10);
	return hu_changes_write_tar(f->s, &co, f->a->tar.opaque_markers, t,
				    e);
}

static void print_summary(const struct flatten_args *a,
			  const struct hu_flatten_stats *st,
			  const struct hu_digests *d)
{
	const char *name = strcmp(a->out, "-") ? a->out : "standard output";

#define N(n, one, many) (unsigned long long)(n), plural(n, one, many)
	if (!a->base)
		fprintf(stderr, "%s: %llu %s: %llu %s, %llu %s (%llu %s), "
			"%llu %s, %llu %s, %llu %s, %llu skipped\n",
			front.cmdname, N(st->entries + 1, "entry", "entries"),
			N(st->dirs, "directory", "directories"),
			N(st->files, "file", "files"),
			N(st->bytes, "byte", "bytes"),
			N(st->symlinks, "symlink", "symlinks"),
			N(st->specials, "special file", "special files"),
			N(st->hardlinks, "hard link", "hard links"),
			(unsigned long long)st->skipped);
#undef N
	if (erofs_output(a->out))
		fprintf(stderr, "%s: wrote %s: EROFS image, %llu bytes, %s\n",
			front.cmdname, a->out + strlen("erofs:"),
			(unsigned long long)d->size, d->digest);
	else
		fprintf(stderr, "%s: wrote %s: %s, %llu bytes, %s, diffID "
			"%s\n", front.cmdname, name, d->media_type,
			(unsigned long long)d->size, d->digest, d->diff_id);
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
	if (a->image)
		return 0;
	if (!strcmp(a->out, "-") && isatty(STDOUT_FILENO))
		return cmd_usage_error(a->c, "refusing to write a tarball to "
				       "a terminal");
	if (a->tar.descriptor && !strcmp(a->tar.descriptor, a->out))
		return cmd_usage_error(a->c, "--descriptor names the output");
	return 0;
}

/* -o oci:DIR:TAG: the bottom N layers (--base) each as a layer, then the
 * squashed one. */
static int write_image(struct flatten_args *a, struct flatten_fill *f,
		       const struct hu_tarout_opts *to, struct hu_error *e)
{
	struct oci_write ow = {
		.nkeep = a->base ? strtoul(a->base, NULL, 10) : 0,
		.command = "hunion flatten",
		.opaque_markers = a->tar.opaque_markers,
		.to = to, .fill = fill, .ctx = f,
	};

	return oci_write(&a->oci, f->s, &ow, e);
}

/* Open the stack of the @nops operands @ops as every flatten reads it;
 * -1 after printing why. */
static int open_stack(struct flatten_args *a, struct flatten_fill *f,
		      char **ops, int nops, struct hu_stack *s)
{
	struct hu_error e = { 0 };

	a->lo.stack.report = &f->report;
	/* The layers kept as context are read only where the layers above
	 * touch them: detect their format on demand.  Without --base the
	 * bottom layer, usually the largest, is read whole, but what its
	 * format changes is only which of its own entries are markers: it
	 * is detected only if the walk meets one (a base image seldom has
	 * any), which saves a walk of it before the flatten's own. */
	a->lo.stack.defer_below = a->base ? strtoul(a->base, NULL, 10) : 1;
	/* Tarball and image layers read from their path index, each
	 * file's bytes forward from its tarball: no layer unpacked, unless
	 * its tarball's order is not the view's.  --base writes the layers
	 * it keeps through their own walks: those are unpacked. */
	a->lo.stack.index_tars = a->lo.stack.index_data =
		!a->base && operands_have_tarballs(ops, nops);
	if ((a->lo.stack.index_tars && layer_cache_open(&a->lo, &e) < 0) ||
	    hu_stack_open(s, ops, (size_t)nops, &a->lo.stack, &e) < 0) {
		print_error(&e);
		hu_error_clear(&e);
		layer_cache_close(&a->lo);
		return -1;
	}
	note_indexes(s);
	return 0;
}

/* -o erofs:FILE: the merged view as one EROFS image. */
static int flatten_erofs(struct flatten_args *a, struct flatten_fill *f,
			 int nops, char **ops)
{
	struct hu_erofs_out_opts eo;
	struct hu_error e = { 0 };
	struct hu_digests d;
	struct hu_stack s;
	int rc;

	if (a->base)
		return cmd_usage_error(a->c, "--base writes a layer's "
				       "changes: an EROFS image holds the "
				       "whole merged tree"), EXIT_USAGE;
	if (erofs_args_resolve(a->c, &a->erofs, &a->tar, a->out, &eo) < 0)
		return EXIT_USAGE;
	if (open_stack(a, f, ops, nops, &s) < 0)
		return EXIT_TROUBLE;
	warn_live_layers(&s, &f->report);
	rc = erofs_write(a->out, a->tar.descriptor, &s, &eo, &f->report,
			 &f->st, a->lo.dry_run || front.verbosity > 0 ? &d :
			 NULL, a->lo.dry_run, &e);
	progress_finish(rc >= 0 ? f->st.entries + 1 : PROGRESS_UNKNOWN,
			PROGRESS_UNKNOWN);
	if (rc < 0)
		print_error(&e);
	else if (a->lo.dry_run)
		printf("would write %s: EROFS image, %llu %s, %llu bytes, "
		       "digest %s\n", a->out + strlen("erofs:"),
		       (unsigned long long)f->st.entries + 1,
		       plural(f->st.entries + 1, "entry", "entries"),
		       (unsigned long long)d.size, d.digest);
	else if (front.verbosity > 0)
		print_summary(a, &f->st, &d);
	if (rc >= 0)
		note_restarts(&s);
	hu_error_clear(&e);
	hu_stack_close(&s);
	layer_cache_close(&a->lo);
	return rc < 0 ? EXIT_TROUBLE : EXIT_OK;
}

int cmd_flatten(const struct cmd *c, int argc, char **argv)
{
	struct flatten_args a = { .c = c };
	struct flatten_fill f = { .a = &a, .report = front_report() };
	struct hu_tarout_opts to = { 0 };
	struct hu_error e = { 0 };
	struct hu_digests d;
	struct hu_stack s;
	int first = cmd_parse(c, argc, argv, flatten_opt, &a), rc;
	bool image_operand = false;

	if (first < 0 ||
	    layer_operands(c, &a.lo, &argc, &argv, first, 0) < 0)
		return EXIT_USAGE;
	if (!a.out)
		return cmd_usage_error(c, "-o FILE is required"), EXIT_USAGE;
	if (first >= argc)
		return cmd_usage_error(c, "no layers given"), EXIT_USAGE;
	/* an image operand counts its layers: --base is checked against
	 * them once the stack is open */
	for (int i = first; i < argc; i++)
		image_operand = image_operand || hu_oci_operand(argv[i]);
	a.oci.edit.platform = a.lo.stack.platform;
	rc = oci_args_resolve(c, &a.oci, a.out, &a.tar, &to);
	a.image = rc > 0;
	if (rc == 0 && erofs_output(a.out)) {
		oci_args_free(&a.oci);
		return flatten_erofs(&a, &f, argc - first, argv + first);
	}
	if (rc == 0 && (a.erofs.block_size || a.erofs.uuid))
		rc = cmd_usage_error(c, "--%s needs -o erofs:FILE",
				     a.erofs.block_size ? "block-size" :
				     "uuid");
	if (rc < 0 || (!a.image && tar_args_resolve(c, &a.tar, a.out,
						     &to) < 0) ||
	    check_args(&a, image_operand ? INT_MAX : argc - first) < 0) {
		oci_args_free(&a.oci);
		return EXIT_USAGE;
	}
	if (open_stack(&a, &f, argv + first, argc - first, &s) < 0) {
		oci_args_free(&a.oci);
		return EXIT_TROUBLE;
	}
	if (image_operand && check_args(&a, (int)s.n) < 0) {
		hu_stack_close(&s);
		oci_args_free(&a.oci);
		return EXIT_USAGE;
	}
	warn_live_layers(&s, &f.report);
	f.s = &s;
	if (a.image && a.lo.dry_run) {
		/* the bottom N (--base) each a layer, then the squashed one */
		print_would_write_image(&a.oci, a.base ?
					strtoul(a.base, NULL, 10) + 1 : 1, &to);
		rc = 0;
	} else if (a.image) {
		rc = write_image(&a, &f, &to, &e);
	} else {
		/* -n: the whole tarball made, its bytes counted and hashed,
		 * none written */
		hu_dry_run(a.lo.dry_run);
		rc = tar_write(&a.tar, a.out, &s, &to, fill, &f,
			       a.lo.dry_run || front.verbosity > 0 ? &d :
			       NULL, &e);
		hu_dry_run(false);
	}
	/* The bytes written: the live count, every byte that reached the
	 * output, which is the tarball's size (d.size); the progress-fd
	 * case holds the two equal.  The entries: the summary's, an
	 * image's layer's too. */
	if (rc >= 0 && !a.base)
		progress_finish(f.st.entries + 1, PROGRESS_UNKNOWN);
	else
		progress_finish(PROGRESS_UNKNOWN, PROGRESS_UNKNOWN);
	if (rc < 0)
		print_error(&e);
	else if (a.lo.dry_run && !a.image)
		print_would_write(&a.tar, a.out, &to, &d, a.base ?
				  PROGRESS_UNKNOWN : f.st.entries + 1);
	else if (front.verbosity > 0 && !a.image)
		print_summary(&a, &f.st, &d);
	if (rc >= 0)
		note_restarts(&s);
	hu_error_clear(&e);
	hu_stack_close(&s);
	layer_cache_close(&a.lo);
	oci_args_free(&a.oci);
	return rc < 0 ? EXIT_TROUBLE : EXIT_OK;
}
