/* SPDX-License-Identifier: MIT */
/*
 * hunion whiteout ls|add|rm|opaque|convert: the markers of one layer by
 * hand.  Parsing and printing only; lib/whiteout/ does
 * the work.
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"

struct wh_args {
	const struct cmd *c;
	struct layer_opts lo;
	bool clear, in_place, to_userxattr;
	const char *out;
	const char *to;
};

static int wh_opt(void *ctx, const struct parsed_opt *o)
{
	struct wh_args *a = ctx;
	int rc = layer_opt(a->c, &a->lo, o);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (!strcmp(o->name, "clear"))
		a->clear = true;
	else if (!strcmp(o->name, "in-place"))
		a->in_place = true;
	else if (!strcmp(o->name, "to-userxattr"))
		a->to_userxattr = true;
	else if (!strcmp(o->name, "output"))
		a->out = o->arg;
	else if (!strcmp(o->name, "to"))
		a->to = o->arg;
	return 0;
}

/* Parse the options; the index of LAYER, or -1 after a usage error.
 * @min_operands counts LAYER. */
static int parse(struct wh_args *a, const struct cmd *c, int argc,
		 char **argv, int min_operands, const char *missing)
{
	int first;

	memset(a, 0, sizeof(*a));
	a->c = c;
	first = cmd_parse(c, argc, argv, wh_opt, a);
	if (first < 0)
		return -1;
	if (argc - first < min_operands)
		return cmd_usage_error(c, "%s", argc - first ? missing :
				       "no layer given");
	return first;
}

static int fail(const struct hu_error *e)
{
	print_error(e);
	return EXIT_TROUBLE;
}

/* "union", or "union under user.*" for markers under user.* */
static void print_format(FILE *f, enum hu_format fmt, bool userxattr)
{
	fputs(hu_format_name(fmt), f);
	if (userxattr && fmt != HU_FMT_OCI)
		fputs(" under user.*", f);
}

/* ---- ls ---------------------------------------------------------------- */

static int print_marker(void *ctx, const struct hu_wh_marker *m,
			struct hu_error *e)
{
	const bool *json = ctx;

	if (*json) {
		printf("{\"type\":\"%s\",", hu_wh_kind_name(m->kind));
		json_field(stdout, "path", m->path);
		printf(",\"format\":\"%s\"", hu_format_name(m->format));
		if (m->target) {
			putchar(',');
			json_field(stdout, "target", m->target);
		}
		puts("}");
		return 0;
	}
	printf("%s ", hu_wh_kind_name(m->kind));
	print_path_escaped(stdout, m->path);
	switch (m->kind) {
	case HU_WH_REDIRECT:
		fputs(" -> ", stdout);
		print_path_escaped(stdout, m->target);
		break;
	case HU_WH_METACOPY:
		break;
	default:
		printf(" (%s)", hu_format_name(m->format));
		break;
	}
	putchar('\n');
	return 0;
}

int cmd_whiteout_ls(const struct cmd *c, int argc, char **argv)
{
	struct hu_report report = front_report();
	struct hu_error e = { 0 };
	struct wh_args a;
	struct hu_layer l;
	int first = parse(&a, c, argc, argv, 1, ""), rc;

	if (first < 0)
		return EXIT_USAGE;
	if (argc - first > 1)
		return cmd_usage_error(c, "one layer only"), EXIT_USAGE;
	a.lo.stack.report = &report;
	if (hu_layer_open(&l, argv[first], &a.lo.stack, &e) < 0)
		rc = fail(&e);
	else {
		rc = hu_wh_list(&l, print_marker, &a.lo.json, &e) < 0 ?
			fail(&e) : EXIT_OK;
		hu_layer_close(&l);
	}
	hu_error_clear(&e);
	return rc;
}

/* ---- add, rm, opaque --------------------------------------------------- */

enum edit { EDIT_ADD, EDIT_RM, EDIT_OPAQUE };

/* What -v / -n say for one PATH: what was done, or why nothing was. */
static void say(const struct wh_args *a, enum edit op, const char *path,
		enum hu_format f, bool userxattr, int rc)
{
	static const char *const done[][2] = {
		[EDIT_ADD] = { "added", "would add" },
		[EDIT_RM] = { "removed", "would remove" },
		[EDIT_OPAQUE] = { "set", "would set" },
	};
	FILE *to = front_steps(a->lo.dry_run);
	const char *what;

	if (rc == 1 && front.verbosity <= 0)
		return;
	if (rc == 0 && front.verbosity <= 0 && !a->lo.dry_run)
		return;
	if (rc == 1)
		what = op == EDIT_ADD ? "already a whiteout" :
		       a->clear ? "already not opaque" : "already opaque";
	else if (op == EDIT_OPAQUE && a->clear)
		what = a->lo.dry_run ? "would clear" : "cleared";
	else
		what = done[op][a->lo.dry_run];
	fprintf(to, "%s ", op == EDIT_OPAQUE ? "opaque" : "whiteout");
	print_path_escaped(to, path);
	fprintf(to, ": %s", what);
	if (rc == 0) {
		fputs(" (", to);
		print_format(to, f, userxattr);
		fputc(')', to);
	}
	fputc('\n', to);
}

/* A layer with no markers yet takes the format the kernel mounts, unless
 * --format chose: say which, and why, as it decides what mounts it. */
static void say_format(const struct wh_args *a, const struct hu_layer *l,
		       enum edit op, enum hu_format f)
{
	if (l->format != HU_FMT_NONE || a->lo.stack.format != HU_FMT_AUTO ||
	    front.verbosity < 0)
		return;
	fprintf(stderr, "%s: ", front.cmdname);
	print_path_escaped(stderr, l->path);
	fprintf(stderr, ": no markers yet: %s %s %s (the kernel has %s union "
		"filesystem; --format chooses)\n",
		a->lo.dry_run ? "would write" : "writing", hu_format_name(f),
		op == EDIT_ADD ? "whiteouts" : "opaque markers",
		f == HU_FMT_UNION ? "the" : "no");
}

static int edit(const struct cmd *c, int argc, char **argv, enum edit op)
{
	struct hu_stack_opts so;
	struct hu_wh_edit eo;
	struct hu_error e = { 0 };
	struct wh_args a;
	struct hu_layer l;
	enum hu_format f;
	int first, rc = EXIT_OK;

	first = parse(&a, c, argc, argv, 2, op == EDIT_OPAQUE ?
		      "no directory given" : "no path given");
	if (first < 0)
		return EXIT_USAGE;
	/* Always detect: --format only chooses for a layer with no markers
	 * and must otherwise agree with what the layer holds. */
	so = (struct hu_stack_opts){ .format = HU_FMT_AUTO,
				     .userxattr = a.lo.stack.userxattr };
	if (hu_layer_open(&l, argv[first], &so, &e) < 0) {
		rc = fail(&e);
		hu_error_clear(&e);
		return rc;
	}
	if (hu_wh_write_format(&l, a.lo.stack.format, &f, &e) < 0) {
		rc = fail(&e);
		goto out;
	}
	if (op == EDIT_ADD || (op == EDIT_OPAQUE && !a.clear))
		say_format(&a, &l, op, f);
	eo = (struct hu_wh_edit){ f, a.lo.dry_run };
	for (int i = first + 1; i < argc; i++) {
		int r;

		if (op == EDIT_ADD)
			r = hu_wh_add(&l, &eo, argv[i], &e);
		else if (op == EDIT_RM)
			r = hu_wh_remove(&l, &eo, argv[i], &e);
		else
			r = hu_wh_set_opaque(&l, &eo, argv[i], !a.clear, &e);
		if (r < 0)
			rc = fail(&e);
		else
			say(&a, op, argv[i], op == EDIT_RM ? l.format : f,
			    l.userxattr, r);
	}
out:
	hu_error_clear(&e);
	hu_layer_close(&l);
	return rc;
}

int cmd_whiteout_add(const struct cmd *c, int argc, char **argv)
{
	return edit(c, argc, argv, EDIT_ADD);
}

int cmd_whiteout_rm(const struct cmd *c, int argc, char **argv)
{
	return edit(c, argc, argv, EDIT_RM);
}

int cmd_whiteout_opaque(const struct cmd *c, int argc, char **argv)
{
	return edit(c, argc, argv, EDIT_OPAQUE);
}

/* ---- convert ------------------------------------------------------------ */


static void print_change(void *ctx, const struct hu_wh_marker *m,
			 enum hu_wh_action act)
{
	const struct hu_convert_opts *o = ctx;
	FILE *to = front_steps(o->dry_run);

	fprintf(to, "%s ", hu_wh_kind_name(m->kind));
	print_path_escaped(to, m->path);
	fputs(": ", to);
	print_format(to, m->format, m->userxattr);
	fputs(" -> ", to);
	switch (act) {
	case HU_WH_CONVERTED:
		print_format(to, o->to, o->to_userxattr);
		break;
	case HU_WH_MADE_OPAQUE:
		print_format(to, o->to, o->to_userxattr);
		fputs(", the directory made opaque", to);
		break;
	case HU_WH_DROPPED:
		fputs(m->kind == HU_WH_META ? "dropped (AUFS metadata)" :
		      "dropped (the layer holds the name itself)", to);
		break;
	case HU_WH_DROPPED_HIDDEN:
		fputs("dropped (an opaque directory hides all beneath)", to);
		break;
	}
	fputc('\n', to);
}

static void print_summary(const struct wh_args *a, const char *layer,
			  const struct hu_convert_opts *o,
			  const struct hu_convert_stats *st)
{
	FILE *to = front_steps(a->lo.dry_run);

	print_path_escaped(to, a->out ? a->out : layer);
	fprintf(to, ": %llu marker%s %s ", (unsigned long long)st->converted,
		st->converted == 1 ? "" : "s",
		a->lo.dry_run ? "would be converted to" : "converted to");
	print_format(to, o->to, o->to_userxattr);
	if (st->dropped)
		fprintf(to, ", %llu dropped", (unsigned long long)st->dropped);
	if (a->out && !a->lo.dry_run)
		fprintf(to, ", %llu %s written",
			(unsigned long long)st->entries,
			plural(st->entries, "entry", "entries"));
	fputc('\n', to);
}

static int convert_usage(const struct cmd *c, const struct wh_args *a,
			 int first, int argc, enum hu_format *to)
{
	if (!a->to)
		return cmd_usage_error(c, "--to FORMAT is required");
	if (hu_format_parse(a->to, to) < 0 || *to == HU_FMT_AUTO)
		return cmd_usage_error(c, "invalid --to '%s' (choose union, "
				       "overlay or oci)", a->to);
	if (!a->out == !a->in_place)
		return cmd_usage_error(c, a->out ? "-o and --in-place exclude "
				       "each other" : "one of -o NEWLAYER and "
				       "--in-place is required");
	if (argc - first > 1)
		return cmd_usage_error(c, "one layer only");
	return 0;
}

int cmd_whiteout_convert(const struct cmd *c, int argc, char **argv)
{
	struct hu_report report = front_report();
	struct hu_convert_opts o = { .report = &report,
				     .change = print_change };
	struct hu_convert_stats st;
	struct hu_error e = { 0 };
	struct wh_args a;
	struct hu_layer l;
	int first = parse(&a, c, argc, argv, 1, ""), rc = EXIT_OK;

	if (first < 0 || convert_usage(c, &a, first, argc, &o.to) < 0)
		return EXIT_USAGE;
	o.to_userxattr = a.to_userxattr;
	o.dry_run = a.lo.dry_run;
	o.ctx = &o;
	if (front.verbosity <= 0 && !o.dry_run)
		o.change = NULL;
	a.lo.stack.report = &report;
	if (hu_layer_open(&l, argv[first], &a.lo.stack, &e) < 0) {
		rc = fail(&e);
		hu_error_clear(&e);
		return rc;
	}
	if (hu_wh_convert(&l, a.out, &o, &st, &e) < 0) {
		front_progress_done();
		rc = fail(&e);
		if (st.started) {
			fprintf(stderr, "%s: ", front.cmdname);
			print_path_escaped(stderr, l.path);
			fprintf(stderr, ": partly converted (it reads as "
				"before); run the same command again to "
				"finish\n");
		}
	} else {
		/* in place, the summary counts no entries */
		progress_finish(a.out ? st.entries : PROGRESS_UNKNOWN,
				PROGRESS_UNKNOWN);
		if (front.verbosity > 0 || o.dry_run)
			print_summary(&a, argv[first], &o, &st);
	}
	hu_error_clear(&e);
	hu_layer_close(&l);
	return rc;
}
