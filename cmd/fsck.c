/* SPDX-License-Identifier: MIT */
/*
 * hunion fsck [-n|-p|-y] LAYER...: find (and repair) the problems of the
 * top layer against those beneath, or of every layer.  One line per
 * problem, then a summary; --json one object each.  Exit status as
 * fsck(8), ORed: 0 clean, 1 corrected, 4 left uncorrected, 8 operational
 * error, 16 usage error, 32 interrupted.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

enum {
	FSCK_OK = 0, FSCK_CORRECTED = 1, FSCK_UNCORRECTED = 4,
	FSCK_ERROR = 8, FSCK_USAGE = 16, FSCK_INTERRUPTED = 32,
};

struct fsck_args {
	const struct cmd *c;
	struct layer_opts lo;
	struct hu_fsck_opts fo;
	enum hu_severity sev[HU_PB_COUNT];
	int modes;		/* how many of -n, -p, -y were given */
};

static int parse_severity(struct fsck_args *a, const char *arg)
{
	const char *eq = strchr(arg, '=');
	enum hu_problem_id id;
	enum hu_severity sev;
	char *name;

	if (!eq)
		return cmd_usage_error(a->c, "--severity takes ID=LEVEL, not "
				       "'%s'", arg);
	name = strndup(arg, eq - arg);
	if (!name)
		return cmd_usage_error(a->c, "out of memory");
	if (hu_problem_parse(name, &id) < 0) {
		cmd_usage_error(a->c, "unknown problem ID '%s' (see "
				"hunion-fsck(8))", name);
		free(name);
		return -1;
	}
	free(name);
	if (hu_severity_parse(eq + 1, &sev) < 0)
		return cmd_usage_error(a->c, "unknown level '%s' (choose "
				       "ignore, info, warning or error)",
				       eq + 1);
	a->sev[id] = sev;
	return 0;
}

static int fsck_opt(void *ctx, const struct parsed_opt *o)
{
	struct fsck_args *a = ctx;
	int rc = layer_opt(a->c, &a->lo, o);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (!strcmp(o->name, "no")) {
		a->fo.mode = HU_FSCK_CHECK;
		a->modes++;
	} else if (!strcmp(o->name, "preen")) {
		a->fo.mode = HU_FSCK_PREEN;
		a->modes++;
	} else if (!strcmp(o->name, "yes")) {
		a->fo.mode = HU_FSCK_YES;
		a->modes++;
	} else if (!strcmp(o->name, "all-layers")) {
		a->fo.all_layers = true;
	} else if (!strcmp(o->name, "vacuum")) {
		a->fo.vacuum = true;
	} else if (!strcmp(o->name, "repair-lowers")) {
		a->fo.repair_lowers = true;
	} else if (!strcmp(o->name, "force")) {
		a->fo.force = true;
	} else if (!strcmp(o->name, "workdir")) {
		a->fo.workdir = o->arg;
	} else if (!strcmp(o->name, "severity")) {
		return parse_severity(a, o->arg);
	}
	return 0;
}

/* ---- output --------------------------------------------------------------- */

static const char *action_json(enum hu_fsck_action a)
{
	switch (a) {
	case HU_FSCK_REPAIRED: return "repaired";
	case HU_FSCK_WOULD: return "would-repair";
	case HU_FSCK_FAILED: return "failed";
	default: return "left";
	}
}

static void print_error_text(FILE *f, const struct hu_error *why)
{
	if (why->path && *why->path) {
		print_path_escaped(f, why->path);
		fputs(": ", f);
	}
	fputs(hu_error_has_msg(why) ? why->msg : "failed", f);
	if (why->err)
		fprintf(f, ": %s", strerror(why->err));
}

static void print_json(const struct hu_fsck_finding *f,
		       const struct hu_problem_info *pi)
{
	printf("{\"id\":\"%s\",\"severity\":\"%s\",", pi->id,
	       hu_severity_name(f->severity));
	json_field(stdout, "layer", f->layer ? f->layer : "");
	putchar(',');
	json_field(stdout, "path", *f->path ? f->path : ".");
	fputs(",\"message\":", stdout);
	json_print_string(stdout, pi->message);
	putchar(',');
	if (f->detail)
		json_field(stdout, "detail", f->detail);
	else
		fputs("\"detail\":null", stdout);
	printf(",\"action\":\"%s\",\"repair\":", action_json(f->action));
	json_print_string(stdout, pi->action);
	if (f->action == HU_FSCK_FAILED && f->why) {
		char *text = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&text, &len);

		if (m) {
			print_error_text(m, f->why);
			fclose(m);
		}
		fputs(",\"error\":", stdout);
		json_print_string(stdout, text ? text : f->why->msg);
		free(text);
	}
	puts("}");
}

static void print_action(const struct fsck_args *a,
			 const struct hu_fsck_finding *f,
			 const struct hu_problem_info *pi)
{
	switch (f->action) {
	case HU_FSCK_REPAIRED:
		printf(" -- repaired: %s", pi->action);
		return;
	case HU_FSCK_WOULD:
		printf(" -- would repair: %s", pi->action);
		return;
	case HU_FSCK_FAILED:
		fputs(" -- repair failed: ", stdout);
		print_error_text(stdout, f->why);
		return;
	default:
		break;
	}
	if (a->fo.mode == HU_FSCK_CHECK || f->severity < HU_SEV_WARNING)
		return;
	if (pi->repair == HU_REPAIR_NONE)
		fputs(" -- left: no repair", stdout);
	else if (pi->repair == HU_REPAIR_DESTRUCTIVE &&
		 a->fo.mode == HU_FSCK_PREEN)
		fputs(" -- left: needs -y", stdout);
	else
		fputs(" -- left: not repaired in this layer", stdout);
}

static int print_finding(void *ctx, const struct hu_fsck_finding *f,
			 struct hu_error *e)
{
	const struct fsck_args *a = ctx;
	const struct hu_problem_info *pi = hu_problem_info(f->id);

	front_progress_done();	/* -C 0's bar, on stdout too */
	if (a->lo.json) {
		print_json(f, pi);
		return 0;
	}
	printf("%s %s ", pi->id, hu_severity_name(f->severity));
	print_path_escaped(stdout, f->layer ? f->layer : "-");
	putchar(' ');
	print_path_escaped(stdout, *f->path ? f->path : ".");
	printf(": %s", pi->message);
	if (f->detail) {
		fputs(" (", stdout);
		print_path_escaped(stdout, f->detail);
		putchar(')');
	}
	print_action(a, f, pi);
	putchar('\n');
	return 0;
}

static int exit_status(const struct hu_fsck_stats *st)
{
	/* a failed repair is left uncorrected, an info finding's too
	 * (--vacuum asked for it) */
	return (st->repaired ? FSCK_CORRECTED : 0) |
	       (st->left || st->failed ? FSCK_UNCORRECTED : 0);
}

/* @stopped: interrupted, @st counting what was found and done so far. */
static void print_summary(const struct fsck_args *a, const char *top,
			  const struct hu_fsck_stats *st, bool stopped,
			  int rc)
{
	uint64_t problems = st->found[HU_SEV_ERROR] +
			    st->found[HU_SEV_WARNING] +
			    st->found[HU_SEV_INFO];

	if (a->lo.json) {
		fputs("{\"summary\":{", stdout);
		json_field(stdout, "layer", top);
		printf(",\"all_layers\":%s,\"entries\":%llu,\"errors\":%llu,"
		       "\"warnings\":%llu,\"info\":%llu,\"repaired\":%llu,"
		       "\"left\":%llu,\"failed\":%llu,\"dry_run\":%s,"
		       "\"interrupted\":%s,\"exit\":%d}}\n",
		       a->fo.all_layers ? "true" : "false",
		       (unsigned long long)st->entries,
		       (unsigned long long)st->found[HU_SEV_ERROR],
		       (unsigned long long)st->found[HU_SEV_WARNING],
		       (unsigned long long)st->found[HU_SEV_INFO],
		       (unsigned long long)st->repaired,
		       (unsigned long long)st->left,
		       (unsigned long long)st->failed,
		       a->fo.dry_run ? "true" : "false",
		       stopped ? "true" : "false", rc);
		return;
	}
	print_path_escaped(stdout, top);
	if (a->fo.all_layers)
		fputs(" (all layers)", stdout);
	fputs(stopped ? ": interrupted, " : ": ", stdout);
	if (!problems) {
		printf("%s, %llu %s checked\n",
		       stopped ? "clean so far" : "clean",
		       (unsigned long long)st->entries,
		       plural(st->entries, "entry", "entries"));
		return;
	}
	printf("%llu %s checked, %llu problem%s (%llu error%s, "
	       "%llu warning%s, %llu info): %llu %s, %llu left",
	       (unsigned long long)st->entries,
	       plural(st->entries, "entry", "entries"),
	       (unsigned long long)problems,
	       problems == 1 ? "" : "s",
	       (unsigned long long)st->found[HU_SEV_ERROR],
	       st->found[HU_SEV_ERROR] == 1 ? "" : "s",
	       (unsigned long long)st->found[HU_SEV_WARNING],
	       st->found[HU_SEV_WARNING] == 1 ? "" : "s",
	       (unsigned long long)st->found[HU_SEV_INFO],
	       (unsigned long long)st->repaired,
	       a->fo.dry_run ? "would be repaired" : "repaired",
	       (unsigned long long)st->left);
	if (st->failed)
		printf(" (%llu repair%s failed)", (unsigned long long)st->failed,
		       st->failed == 1 ? "" : "s");
	putchar('\n');
}

/* ---- the command ------------------------------------------------------- */

static int check_args(struct fsck_args *a, int nops)
{
	const struct cmd *c = a->c;

	if (a->modes > 1)
		return cmd_usage_error(c, "-n, -p and -y exclude each other");
	if (nops < 1)
		return cmd_usage_error(c, "no layers given");
	if (a->fo.repair_lowers && !a->fo.all_layers)
		return cmd_usage_error(c, "--repair-lowers needs "
				       "--all-layers");
	if (a->fo.vacuum && a->fo.mode == HU_FSCK_CHECK)
		return cmd_usage_error(c, "--vacuum repairs: it needs -p or "
				       "-y");
	if (a->lo.dry_run && a->fo.mode == HU_FSCK_CHECK)
		return cmd_usage_error(c, "--dry-run shows repairs: it needs "
				       "-p or -y");
	return 0;
}

int cmd_fsck(const struct cmd *c, int argc, char **argv)
{
	struct fsck_args a = { .c = c };
	struct hu_report report;
	struct hu_fsck_stats st = { 0 };
	struct hu_error e = { 0 };
	int first, rc;

	front.trouble = FSCK_ERROR;
	front.keep_exit = true;	/* interrupted: exit 32, not the signal */
	for (unsigned i = 0; i < HU_PB_COUNT; i++)
		a.sev[i] = hu_problem_info(i)->severity;
	first = cmd_parse(c, argc, argv, fsck_opt, &a);
	if (first < 0 ||
	    layer_operands(c, &a.lo, &argc, &argv, first, 0) < 0 ||
	    check_args(&a, argc - first) < 0)
		return FSCK_USAGE;
	report = front_report();
	if (a.lo.json)
		front.progress = false;	/* a line would tear them */
	a.lo.stack.report = &report;
	a.fo.dry_run = a.lo.dry_run;
	a.fo.severity = a.sev;
	a.fo.finding = print_finding;
	a.fo.ctx = &a;
	a.fo.report = &report;
	/* Tarball and image layers read from their path index (the cache,
	 * or made in one pass), never unpacked: what fsck reads of them is
	 * names and metadata, a tarball it checks it reads again itself
	 * (fsck_tar.c), and the copy-up compare reads a few files' bytes
	 * from the stream.  Not with --vacuum, which removes a copy-up on
	 * that compare: it reads from an unpack, whose blob was checked
	 * whole before. */
	a.lo.stack.index_tars = a.lo.stack.index_top =
		a.lo.stack.index_any_order = !a.fo.vacuum &&
		operands_have_tarballs(argv + first, argc - first);
	if (a.lo.stack.index_tars && layer_cache_open(&a.lo, &e) < 0) {
		print_error(&e);
		hu_error_clear(&e);
		return FSCK_ERROR;
	}
	rc = hu_fsck(argv + first, argc - first, &a.lo.stack, &a.fo, &st,
		     &e);
	layer_cache_close(&a.lo);
	if (rc < 0)
		front_progress_done();
	else
		progress_finish(st.entries, PROGRESS_UNKNOWN);
	if (rc < 0 && !hu_interrupted()) {
		print_error(&e);
		hu_error_clear(&e);
		return FSCK_ERROR;
	}
	if (rc < 0) {
		/* whatever call the signal cut short, the one thing to say;
		 * every repair made is whole, and the summary tells them */
		fprintf(stderr, "%s: interrupted\n", front.cmdname);
		hu_error_clear(&e);
	}
	rc = exit_status(&st) | (rc < 0 ? FSCK_INTERRUPTED : 0);
	print_summary(&a, argv[argc - 1], &st, rc & FSCK_INTERRUPTED, rc);
	return rc;
}
