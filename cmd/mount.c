/* SPDX-License-Identifier: MIT */
/*
 * hunion mount [-t TYPE] [--workdir W] [-o OPTS] [--force] [-f] [-v]
 *              LAYER... MOUNTPOINT
 * hunion umount [-l] [-f] MOUNTPOINT
 * mount.union / mount.hunion SPEC DIR [-sfnv] [-o OPTS] [-t TYPE.SUB]:
 * the same binary called by mount(8) as its helper for -t union and
 * -t hunion.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

struct mount_args {
	const struct cmd *c;
	struct layer_opts lo;
	struct hu_mount_opts mo;
};

static int mount_opt(void *ctx, const struct parsed_opt *o)
{
	struct mount_args *a = ctx;
	int rc = layer_opt(a->c, &a->lo, o);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (!strcmp(o->name, "type")) {
		if (hu_mount_fs_parse(o->arg, &a->mo.fs) < 0) {
			cmd_usage_error(a->c, "unknown -t '%s' (choose auto, "
					"overlay, union or fuse)", o->arg);
			return -1;
		}
	} else if (!strcmp(o->name, "workdir")) {
		a->mo.workdir = o->arg;
	} else if (!strcmp(o->name, "options")) {
		a->mo.options = o->arg;
	} else if (!strcmp(o->name, "force")) {
		a->mo.force = true;
	} else if (!strcmp(o->name, "fake")) {
		a->lo.dry_run = true;
	}
	/* --no-mtab: mount(8)'s -n, nothing to do; the kernel's
	 * /proc/self/mounts is the only table */
	return 0;
}

/* -v and -n: each step of the preflight, on standard output. */
static void say_step(void *ctx, const char *what, const char *path)
{
	const struct mount_args *a = ctx;

	FILE *to = front_steps(a->mo.dry_run);

	if (front.verbosity <= 0 && !a->mo.dry_run)
		return;
	fprintf(to, "%s ", what);
	print_path_escaped(to, path);
	fputc('\n', to);
}

static void say_problem(void *ctx, const struct hu_fsck_finding *f)
{
	const struct hu_problem_info *pi = hu_problem_info(f->id);

	fprintf(stderr, "%s: ", front.cmdname);
	print_path_escaped(stderr, f->layer ? f->layer : "");
	if (f->path && *f->path) {
		putc('/', stderr);
		print_path_escaped(stderr, f->path);
	}
	fprintf(stderr, ": %s (%s)", pi ? pi->message : "?",
		pi ? pi->id : "?");
	if (f->detail) {
		fputs(": ", stderr);
		print_path_escaped(stderr, f->detail);
	}
	fputc('\n', stderr);
}

/* Open the stack, check it, print the call (-n, -v), mount. */
static int do_mount(struct mount_args *a, char **layers, size_t n,
		    const char *mountpoint, int trouble)
{
	struct hu_report report = front_report();
	struct hu_mount_notes notes = { say_step, say_problem, a };
	struct hu_mount_plan plan;
	struct hu_error e = { 0 };
	struct hu_stack s;
	char *text;
	int rc = trouble;

	if (refuse_images(a->c, (int)n, layers, 0, "mount") < 0)
		return trouble;
	a->lo.stack.report = &report;
	a->mo.dry_run = a->lo.dry_run;
	a->mo.stack_opts = &a->lo.stack;
	a->mo.notes = &notes;
	a->mo.report = &report;
	if (hu_mount_check_fuse(a->mo.fs, &e) < 0 ||
	    hu_stack_open(&s, layers, n, &a->lo.stack, &e) < 0) {
		print_error(&e);
		hu_error_clear(&e);
		return trouble;
	}
	if (hu_mount_prepare(&plan, &s, mountpoint, &a->mo, &e) < 0) {
		print_error(&e);
		goto out;
	}
	if (a->mo.dry_run || front.verbosity > 0) {
		text = hu_mount_plan_text(&plan);
		if (!text) {
			hu_error_set(&e, ENOMEM, NULL, "out of memory");
			print_error(&e);
			goto out_plan;
		}
		fprintf(front_steps(a->mo.dry_run), "%s\n", text);
		free(text);
	}
	if (!a->mo.dry_run && hu_mount_run(&plan, &e) < 0) {
		print_error(&e);
		goto out_plan;
	}
	rc = EXIT_OK;
out_plan:
	hu_mount_plan_free(&plan);
out:
	hu_error_clear(&e);
	hu_stack_close(&s);
	return rc;
}

int cmd_mount(const struct cmd *c, int argc, char **argv)
{
	struct mount_args a = { .c = c };
	int first = cmd_parse(c, argc, argv, mount_opt, &a);

	if (first < 0)
		return EXIT_USAGE;
	/* --lowerdir alone: a read-only mount of lowers, as overlayfs's
	 * lowerdir= without upperdir= */
	a.mo.lower_only = a.lo.lowerdir && !a.lo.upperdir &&
			  argc - first == 1;
	if (layer_operands(c, &a.lo, &argc, &argv, first, 1) < 0)
		return EXIT_USAGE;
	if (argc - first < (a.mo.lower_only ? 2 : 3))
		return cmd_usage_error(c, "give the layers (at least two, "
				       "bottom first) and the mount point"),
		       EXIT_USAGE;
	return do_mount(&a, argv + first, argc - first - 1, argv[argc - 1],
			EXIT_TROUBLE);
}

static int umount_opt(void *ctx, const struct parsed_opt *o)
{
	struct hu_umount_opts *uo = ctx;

	if (!strcmp(o->name, "lazy"))
		uo->lazy = true;
	else if (!strcmp(o->name, "force"))
		uo->force = true;
	return 0;
}

int cmd_umount(const struct cmd *c, int argc, char **argv)
{
	struct hu_umount_opts uo = { 0 };
	struct hu_mount_holder *h;
	struct hu_error e = { 0 };
	size_t n;
	int first = cmd_parse(c, argc, argv, umount_opt, &uo);

	if (first < 0)
		return EXIT_USAGE;
	if (argc - first != 1)
		return cmd_usage_error(c, "give one mount point"), EXIT_USAGE;
	if (hu_umount(argv[first], &uo, &h, &n, &e) == 0)
		return EXIT_OK;
	print_error(&e);
	for (size_t i = 0; i < n; i++) {
		fprintf(stderr, "%s: ", front.cmdname);
		if (h[i].path) {
			fputs("mounted beneath it: ", stderr);
			print_path_escaped(stderr, h[i].path);
		} else {
			fprintf(stderr, "held by process %d (", (int)h[i].pid);
			print_path_escaped(stderr, h[i].comm);
			fprintf(stderr, "): %s", h[i].what);
		}
		fputc('\n', stderr);
	}
	hu_mount_holders_free(h, n);
	hu_error_clear(&e);
	return EXIT_TROUBLE;
}

/* ---- mount(8)'s helper ------------------------------------------------ */

/* mount(8)'s exit codes, which it passes on from its helpers. */
enum { MOUNT_EX_USAGE = 1, MOUNT_EX_FAIL = 32 };

static int helper_usage(const char *name)
{
	fprintf(stderr, "usage: %s SPEC DIR [-sfnv] [-o OPTIONS] [-t "
		"TYPE[.auto|overlay|union|fuse]]\n  OPTIONS: lowerdir=TOP:..."
		":BOTTOM[,upperdir=UPPER[,workdir=WORK]][,...]\n", name);
	return MOUNT_EX_USAGE;
}

/* -t TYPE.SUB: SUB chooses the filesystem as hunion mount's -t does. */
static int helper_type(const char *t, enum hu_mount_fs *fs)
{
	const char *dot = strchr(t, '.');

	return dot ? hu_mount_fs_parse(dot + 1, fs) : 0;
}

int cmd_mount_helper(int argc, char **argv)
{
	const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 :
			   argv[0];
	const char *ops[2] = { NULL, NULL }, *opts = NULL, *type = NULL;
	struct mount_args a = { .c = NULL };
	struct hu_mount_spec sp;
	struct hu_error e = { 0 };
	size_t nops = 0;
	int rc;

	front.cmdname = name;
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];

		if ((!strcmp(s, "-o") || !strcmp(s, "-t")) && i + 1 < argc) {
			*(s[1] == 'o' ? &opts : &type) = argv[++i];
		} else if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
			helper_usage(name);
			return 0;
		} else if (s[0] == '-' && s[1] && strspn(s + 1, "sfnvi") ==
			   strlen(s + 1)) {
			/* -s sloppy, -n no mtab, -i no helper: nothing to
			 * do; -f fake: a dry run; -v verbose */
			a.lo.dry_run |= strchr(s, 'f') != NULL;
			if (strchr(s, 'v'))
				front.verbosity = 1;
		} else if (s[0] != '-' && nops < 2) {
			ops[nops++] = s;
		} else {
			fprintf(stderr, "%s: unknown argument '%s'\n", name, s);
			return helper_usage(name);
		}
	}
	if (nops != 2)
		return helper_usage(name);
	if (type && helper_type(type, &a.mo.fs) < 0) {
		fprintf(stderr, "%s: unknown -t '%s' (TYPE.auto, .overlay, "
			".union or .fuse)\n", name, type);
		return MOUNT_EX_USAGE;
	}
	if (hu_mount_spec_parse(opts, true, &sp, &e) < 0) {
		print_error(&e);
		hu_error_clear(&e);
		return MOUNT_EX_USAGE;
	}
	if (!sp.layers) {
		fprintf(stderr, "%s: -o lowerdir=... is required\n", name);
		hu_mount_spec_free(&sp);
		return MOUNT_EX_USAGE;
	}
	a.mo.source = ops[0];
	a.mo.workdir = sp.workdir;
	a.mo.flags = sp.flags;
	a.mo.options = sp.fs_options;
	a.mo.lower_only = !sp.has_upper;
	rc = do_mount(&a, sp.layers, sp.n, ops[1], MOUNT_EX_FAIL);
	hu_mount_spec_free(&sp);
	return rc;
}
