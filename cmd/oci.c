/* SPDX-License-Identifier: MIT */
/*
 * hunion oci ls|rm|gc: the images of an OCI image layout, a tag removed,
 * and the blobs none of them references removed.  Parsing and printing only; lib/oci/
 * does the work.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

struct oci_cmd_args {
	const struct cmd *c;
	struct layer_opts lo;	/* --json, -n, -v, -q */
};

static int oci_cmd_opt(void *ctx, const struct parsed_opt *o)
{
	struct oci_cmd_args *a = ctx;

	return layer_opt(a->c, &a->lo, o) < 0 ? -1 : 0;
}

/* The one operand DIR: its index, or -1 after a usage error. */
static int parse(struct oci_cmd_args *a, const struct cmd *c, int argc,
		 char **argv)
{
	int first;

	a->c = c;
	first = cmd_parse(c, argc, argv, oci_cmd_opt, a);
	if (first < 0)
		return -1;
	if (argc - first != 1)
		return cmd_usage_error(c, argc - first ? "one layout at a "
				       "time" : "no layout given");
	return first;
}

/* ---- ls ---------------------------------------------------------------- */

static void print_platform(const struct hu_oci_entry *en)
{
	if (!en->os && !en->arch) {
		fputs("-", stdout);
		return;
	}
	printf("%s/%s", en->os ? en->os : "?", en->arch ? en->arch : "?");
	if (en->variant)
		printf("/%s", en->variant);
}

static void json_member(const char *key, const char *v, bool first)
{
	printf("%s\"%s\":", first ? "" : ",", key);
	if (v)
		json_print_string(stdout, v);
	else
		fputs("null", stdout);
}

static int print_entry(void *ctx, const struct hu_oci_entry *en,
		       struct hu_error *e)
{
	const bool *json = ctx;

	if (!*json) {
		printf("%s\t%s\t", en->tag ? en->tag : "-",
		       en->digest ? en->digest : "-");
		print_platform(en);
		putchar('\n');
		return 0;
	}
	putchar('{');
	json_member("tag", en->tag, true);
	json_member("digest", en->digest, false);
	json_member("mediaType", en->media_type, false);
	printf(",\"size\":%llu", (unsigned long long)en->size);
	json_member("os", en->os, false);
	json_member("architecture", en->arch, false);
	if (en->variant)
		json_member("variant", en->variant, false);
	puts("}");
	return 0;
}

int cmd_oci_ls(const struct cmd *c, int argc, char **argv)
{
	struct oci_cmd_args a = { 0 };
	struct hu_error e = { 0 };
	int first = parse(&a, c, argc, argv);

	if (first < 0)
		return EXIT_USAGE;
	if (hu_oci_list(argv[first], print_entry, &a.lo.json, &e) < 0) {
		print_error(&e);
		hu_error_clear(&e);
		return EXIT_TROUBLE;
	}
	return EXIT_OK;
}

/* ---- rm ---------------------------------------------------------------- */

int cmd_oci_rm(const struct cmd *c, int argc, char **argv)
{
	struct oci_cmd_args a = { 0 };
	struct hu_error e = { 0 };
	int first = parse(&a, c, argc, argv), rc;
	const char *s, *colon;
	char *dir;

	if (first < 0)
		return EXIT_USAGE;
	/* DIR:TAG, or the operand oci:DIR:TAG as it is written */
	s = argv[first];
	if (strncmp(s, "oci:", 4) == 0)
		s += 4;
	colon = strrchr(s, ':');
	if (!colon || colon == s || !colon[1]) {
		cmd_usage_error(c, "DIR:TAG: a layout and a tag");
		return EXIT_USAGE;
	}
	dir = strndup(s, (size_t)(colon - s));
	if (!dir) {
		hu_error_set(&e, ENOMEM, s, "out of memory");
		print_error(&e);
		hu_error_clear(&e);
		return EXIT_TROUBLE;
	}
	rc = hu_oci_rm(dir, colon + 1, a.lo.dry_run, &e);
	free(dir);
	if (rc < 0) {
		print_error(&e);
		hu_error_clear(&e);
		return EXIT_TROUBLE;
	}
	if (a.lo.dry_run || front.verbosity > 0)
		fprintf(front_steps(a.lo.dry_run), "%s tag %s\n",
			a.lo.dry_run ? "would remove" : "removed", colon + 1);
	return EXIT_OK;
}

/* ---- gc ---------------------------------------------------------------- */

static void print_removed(void *ctx, const char *name, uint64_t size)
{
	const struct oci_cmd_args *a = ctx;

	if (a->lo.dry_run || front.verbosity > 0)
		fprintf(front_steps(a->lo.dry_run), "%s %s (%llu %s)\n",
			a->lo.dry_run ? "would remove" : "removed", name,
			(unsigned long long)size, plural(size, "byte", "bytes"));
}

/* A name gc cannot remove: said, and gc goes on. */
static void print_failed(void *ctx, const struct hu_error *why)
{
	print_error(why);
}

/* Said once, so that a gc that seems to hang says why. */
static void print_waiting(void *ctx, const char *dir)
{
	if (front.verbosity >= 0)
		fprintf(stderr, "%s: %s: waiting for the hunion runs writing "
			"into it\n", front.cmdname, dir);
}

int cmd_oci_gc(const struct cmd *c, int argc, char **argv)
{
	struct oci_cmd_args a = { 0 };
	struct hu_oci_gc_opts o = { .removed = print_removed,
				    .failed = print_failed,
				    .waiting = print_waiting, .ctx = &a };
	struct hu_oci_gc_stats st;
	struct hu_error e = { 0 };
	int first = parse(&a, c, argc, argv), rc;

	if (first < 0)
		return EXIT_USAGE;
	o.dry_run = a.lo.dry_run;
	rc = hu_oci_gc(argv[first], &o, &st, &e);
	fflush(stdout);
	/* the summary of a sweep, also of one with names left */
	if ((rc == 0 || st.failed) && front.verbosity >= 0)
		fprintf(stderr, "%s: %s %llu %s (%llu %s), kept %llu %s\n",
			front.cmdname, a.lo.dry_run ? "would remove" :
			"removed", (unsigned long long)st.removed,
			plural(st.removed, "file", "files"),
			(unsigned long long)st.bytes_removed,
			plural(st.bytes_removed, "byte", "bytes"),
			(unsigned long long)st.kept,
			plural(st.kept, "blob", "blobs"));
	if (rc < 0) {
		print_error(&e);
		hu_error_clear(&e);
		return EXIT_TROUBLE;
	}
	return EXIT_OK;
}
