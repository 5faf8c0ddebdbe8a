/* SPDX-License-Identifier: MIT */
/*
 * hunion diff LAYER...: what the top layer changes over those beneath, as
 * a listing (A|M|D PATH, or JSON), or with --oci as an OCI layer tarball.
 * hunion diff --trees OLD NEW: the same between two plain trees.
 * Exit status of a listing as diff(1): 0 no changes, 1 changes, 2 trouble.
 * -o writes its output and exits 0, as flatten does, so that a pipeline
 * under set -e goes on; --exit-code (git's name) brings diff(1)'s 1 back.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"

enum { DIFF_SAME = 0, DIFF_CHANGES = 1, DIFF_TROUBLE = 2 };

struct diff_args {
	const struct cmd *c;
	struct layer_opts lo;
	bool recursive, exact, trees, oci, format_given, exit_code;
	const char *out;
	struct tar_args tar;	/* --oci */
	struct oci_args image;	/* --oci -o oci:DIR:TAG */
	bool to_image;
};

static int diff_opt(void *ctx, const struct parsed_opt *o)
{
	struct diff_args *a = ctx;
	int rc = layer_opt(a->c, &a->lo, o);

	if (rc != 0) {
		a->format_given |= !strcmp(o->name, "format");
		return rc < 0 ? -1 : 0;
	}
	if (!strcmp(o->name, "recursive"))
		a->recursive = true;
	else if (!strcmp(o->name, "exact"))
		a->exact = true;
	else if (!strcmp(o->name, "trees"))
		a->trees = true;
	else if (!strcmp(o->name, "oci"))
		a->oci = true;
	else if (!strcmp(o->name, "exit-code"))
		a->exit_code = true;
	else if (!strcmp(o->name, "output"))
		a->out = o->arg;
	else if ((rc = oci_opt(a->c, &a->image, o)) == 0)
		tar_opt(&a->tar, o);
	return rc < 0 ? -1 : 0;
}

/* ---- the listing --------------------------------------------------------- */

struct listing {
	bool json;
	uint64_t n;
};

static const char *type_name(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR: return "dir";
	case S_IFREG: return "file";
	case S_IFLNK: return "symlink";
	case S_IFCHR: return "char";
	case S_IFBLK: return "block";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "socket";
	default: return "unknown";
	}
}

static void print_what(unsigned what)
{
	static const struct { unsigned bit; const char *name; } names[] = {
		{ HU_DIFF_TYPE, "type" }, { HU_DIFF_CONTENT, "content" },
		{ HU_DIFF_MODE, "mode" }, { HU_DIFF_OWNER, "owner" },
		{ HU_DIFF_MTIME, "mtime" }, { HU_DIFF_XATTRS, "xattrs" },
	};
	const char *sep = "";

	fputs(",\"what\":[", stdout);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (what & names[i].bit) {
			printf("%s\"%s\"", sep, names[i].name);
			sep = ",";
		}
	}
	putchar(']');
}

static void print_json(const struct hu_change *c)
{
	const struct stat *now = c->ent ? &c->ent->st : c->old;

	printf("{\"change\":\"%c\",", (char)c->kind);
	json_field(stdout, "path", *c->path ? c->path : ".");
	printf(",\"type\":\"%s\"", type_name(now->st_mode));
	if (c->kind == HU_CHG_MODIFY) {
		if (c->what & HU_DIFF_TYPE)
			printf(",\"old_type\":\"%s\"",
			       type_name(c->old->st_mode));
		print_what(c->what);
	}
	if (c->opaque)
		fputs(",\"opaque\":true", stdout);
	puts("}");
}

static int print_change(void *ctx, const struct hu_change *c,
			struct hu_error *e)
{
	struct listing *l = ctx;

	l->n++;
	if (l->json) {
		print_json(c);
		return 0;
	}
	printf("%c ", (char)c->kind);
	print_path_escaped(stdout, *c->path ? c->path : ".");
	putchar('\n');
	return 0;
}

/* ---- --oci --------------------------------------------------------------- */

/* Stop the walk at the first change: whether there is one decides the
 * exit status of --oci --exit-code. */
static int found_one(void *ctx, const struct hu_change *c, struct hu_error *e)
{
	*(bool *)ctx = true;
	return hu_error_set(e, 0, NULL, "found");
}

static int any_change(const struct hu_stack *s, const struct hu_changes_opts *o,
		      bool *any, struct hu_error *e)
{
	*any = false;
	if (hu_changes_walk(s, o, found_one, any, e) < 0 && !*any)
		return -1;
	hu_error_clear(e);
	return 0;
}

struct oci_fill {
	const struct diff_args *a;
	const struct hu_stack *s;
	const struct hu_changes_opts *co;
};

static int fill_changes(void *ctx, struct hu_tarout *t, struct hu_error *e)
{
	const struct oci_fill *f = ctx;

	return hu_changes_write_tar(f->s, f->co, f->a->tar.opaque_markers, t,
				    e);
}

static int write_oci(const struct diff_args *a, const struct hu_stack *s,
		     const struct hu_changes_opts *co,
		     const struct hu_tarout_opts *to, struct hu_error *e)
{
	struct oci_fill f = { a, s, co };
	struct oci_write ow = {
		.nkeep = s->n - 1, .command = "hunion diff --oci",
		.opaque_markers = a->tar.opaque_markers, .to = to,
		.fill = fill_changes, .ctx = &f,
	};
	struct hu_digests d;
	bool any = false;
	int rc;

	if (a->exit_code && any_change(s, co, &any, e) < 0)
		return DIFF_TROUBLE;
	if (a->to_image && a->lo.dry_run) {
		/* each layer beneath, then the changes */
		print_would_write_image(&a->image, s->n, to);
		return any ? DIFF_CHANGES : DIFF_SAME;
	}
	if (a->to_image)
		return oci_write(&a->image, s, &ow, e) < 0 ? DIFF_TROUBLE :
		       any ? DIFF_CHANGES : DIFF_SAME;
	/* -n: the whole tarball made, its bytes counted and hashed, none
	 * written */
	hu_dry_run(a->lo.dry_run);
	rc = tar_write(&a->tar, a->out, s, to, fill_changes, &f,
		       a->lo.dry_run ? &d : NULL, e);
	hu_dry_run(false);
	if (rc < 0)
		return DIFF_TROUBLE;
	if (a->lo.dry_run)
		print_would_write(&a->tar, a->out, to, &d, PROGRESS_UNKNOWN);
	return any ? DIFF_CHANGES : DIFF_SAME;
}

/* ---- the command ------------------------------------------------------- */

static int check_args(struct diff_args *a, int nops)
{
	const struct cmd *c = a->c;

	if (a->trees && nops != 2)
		return cmd_usage_error(c, "--trees takes two trees, OLD NEW");
	if (a->trees && (a->format_given || a->lo.stack.userxattr))
		return cmd_usage_error(c, "--trees reads plain trees: no "
				       "--format or --userxattr");
	if (nops < 1)
		return cmd_usage_error(c, "no layers given");
	if (a->oci && !a->out)
		return cmd_usage_error(c, "--oci needs -o FILE");
	if (!a->oci && (a->out || a->tar.compress || a->tar.level ||
			a->tar.threads || a->tar.descriptor || a->tar.clamp ||
			a->tar.opaque_markers))
		return cmd_usage_error(c, "-o and the tarball options need "
				       "--oci");
	if (a->lo.dry_run && !a->oci)
		return cmd_usage_error(c, "-n shows what --oci -o would write: "
				       "it needs --oci");
	if (a->oci && (a->lo.json || a->recursive))
		return cmd_usage_error(c, "--oci writes a tarball: no --json "
				       "or -r");
	if (a->trees && a->oci && !strncmp(a->out, "oci:", 4))
		return cmd_usage_error(c, "--trees compares plain trees: no "
				       "image output");
	if (a->oci && !strcmp(a->out, "-") && isatty(STDOUT_FILENO))
		return cmd_usage_error(c, "refusing to write a tarball to a "
				       "terminal");
	if (a->tar.descriptor && !strcmp(a->tar.descriptor, a->out))
		return cmd_usage_error(c, "--descriptor names the output");
	return 0;
}

/* --trees: each tree a one-layer stack whose names mean nothing more. */
static int open_trees(char **paths, struct hu_stack *old,
		      struct hu_stack *new, const struct hu_report *r,
		      struct hu_error *e)
{
	struct hu_stack_opts so = { .format = HU_FMT_NONE, .userxattr = true,
				    .report = r };

	if (hu_stack_open(old, paths, 1, &so, e) < 0)
		return -1;
	if (hu_stack_open(new, paths + 1, 1, &so, e) < 0) {
		hu_stack_close(old);
		return -1;
	}
	return 0;
}

/* Does the image written (-o oci:) need the data of a lower operand: a
 * tarball file, whose layer is written anew (an image's layers are
 * copied as their blobs are)? */
static bool lower_tarball_written(const struct diff_args *a, char **ops,
				  int nops)
{
	struct stat st;

	if (!a->to_image)
		return false;
	for (int i = 0; i + 1 < nops; i++)
		if (!hu_oci_operand(ops[i]) && stat(ops[i], &st) == 0 &&
		    S_ISREG(st.st_mode))
			return true;
	return false;
}

/* Are the lower tarballs read from their path index?  Where the diff
 * reads no lower file's data: not with --exact (bytes compared), not for
 * a lower tarball that -o oci: writes anew. */
static bool index_lowers(const struct diff_args *a, char **ops, int nops)
{
	return operands_have_tarballs(ops, nops - 1) && !a->exact &&
	       !lower_tarball_written(a, ops, nops);
}

/* The stack, its tarball lowers read from their path index where
 * index_lowers() says, and for --oci not under an overlay top layer with
 * metacopy files (their data lies beneath) or redirects (a file reached
 * through a renamed directory is written whole). */
static int open_stack(struct diff_args *a, char **ops, int nops,
		      struct hu_stack *s, struct hu_error *e)
{
	struct hu_stack_opts so = a->lo.stack;
	const struct hu_layer *top;

	so.index_tars = index_lowers(a, ops, nops);
	so.find_refs = so.index_tars && a->oci;
	if (hu_stack_open(s, ops, nops, &so, e) < 0)
		return -1;
	top = &s->layers[s->n - 1];
	if (!so.find_refs || !hu_layer_is(top, HU_FMT_OVERLAY) ||
	    top->refs == HU_REFS_NONE)
		return 0;
	hu_stack_close(s);
	return hu_stack_open(s, ops, nops, &a->lo.stack, e);
}

static int run(struct diff_args *a, char **ops, int nops,
	       struct hu_error *e)
{
	struct hu_report report = front_report();
	struct hu_changes_opts co = { .exact = a->exact,
				      .recursive = a->recursive,
				      .report = &report };
	struct listing l = { .json = a->lo.json };
	struct hu_stack s, old = { 0 };
	struct hu_tarout_opts to;
	int rc;

	if (a->oci || a->image.first_opt) {
		a->image.edit.platform = a->lo.stack.platform;
		a->tar.layer = true;	/* its tarball is a layer */
		rc = oci_args_resolve(a->c, &a->image, a->oci ? a->out : NULL,
				      &a->tar, &to);
		a->to_image = rc > 0;
		if (rc < 0 || (a->oci && !a->to_image &&
			       tar_args_resolve(a->c, &a->tar, a->out,
						&to) < 0))
			return EXIT_USAGE;
	}
	if (!a->oci)
		front.progress = false;	/* a line would tear the listing */
	a->lo.stack.report = &report;
	if (a->trees) {
		if (open_trees(ops, &old, &s, &report, e) < 0)
			return DIFF_TROUBLE;
		co.old = &old;
		warn_live_layers(&old, &report);
	} else {
		/* Only the top layer is walked whole; the lowers are read
		 * where it touches them, so their format is detected then. */
		a->lo.stack.defer_below = nops - 1;
		if (index_lowers(a, ops, nops) &&
		    layer_cache_open(&a->lo, e) < 0)
			return DIFF_TROUBLE;
		if (open_stack(a, ops, nops, &s, e) < 0) {
			layer_cache_close(&a->lo);
			return DIFF_TROUBLE;
		}
		note_indexes(&s);
		co.base = s.n - 1;
	}
	warn_live_layers(&s, &report);
	if (a->oci) {
		rc = write_oci(a, &s, &co, &to, e);
	} else {
		/* a listing that cannot be written fails at exit
		 * (front_close_stdout()) */
		rc = hu_changes_walk(&s, &co, print_change, &l, e) < 0 ?
			DIFF_TROUBLE : l.n ? DIFF_CHANGES : DIFF_SAME;
	}
	front_progress_done();
	hu_stack_close(&s);
	if (a->trees)
		hu_stack_close(&old);
	layer_cache_close(&a->lo);
	return rc;
}

int cmd_diff(const struct cmd *c, int argc, char **argv)
{
	struct diff_args a = { .c = c };
	struct hu_error e = { 0 };
	int first, rc;

	front.trouble = DIFF_TROUBLE;
	first = cmd_parse(c, argc, argv, diff_opt, &a);
	if (first >= 0 && a.trees && (a.lo.lowerdir || a.lo.upperdir)) {
		cmd_usage_error(c, "--trees compares two plain trees: no "
				"--lowerdir or --upperdir");
		return DIFF_TROUBLE;
	}
	if (first < 0 ||
	    layer_operands(c, &a.lo, &argc, &argv, first, 0) < 0 ||
	    check_args(&a, argc - first) < 0 ||
	    (a.trees && refuse_images(c, argc, argv, first,
				      "diff --trees") < 0))
		return DIFF_TROUBLE;	/* usage: 2, as diff(1) */
	rc = run(&a, argv + first, argc - first, &e);
	if (rc == EXIT_USAGE || rc == DIFF_TROUBLE) {
		if (hu_error_has_msg(&e))
			print_error(&e);
		rc = DIFF_TROUBLE;
	}
	hu_error_clear(&e);
	oci_args_free(&a.image);
	return rc;
}
