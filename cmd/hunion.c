/* SPDX-License-Identifier: MIT */
/* hunion: the multicall front end and its one command table. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cmd.h"

#ifndef HUNION_VERSION
#define HUNION_VERSION "0.1"
#endif

static const struct cmd_opt merge_opts[] = {
	{ "output", 'o', OPT_REQUIRED, "OUT", "@dir",
	  "write the merged view as a new tree OUT (must not exist)" },
	{ "link", 0, OPT_NONE, NULL, NULL,
	  "hard-link regular files to their source instead of copying" },
	{ "into", 0, OPT_NONE, NULL, NULL,
	  "merge the top layer down into the one beneath it, in place" },
	{ "keep-upper", 0, OPT_NONE, NULL, NULL,
	  "with --into: copy, and leave the top layer as it is" },
	{ "force", 0, OPT_NONE, NULL, NULL,
	  "with --into: go on while the upper or the target is part of a "
	  "mounted overlay, or may be" },
	OPT_LAYERDIRS, OPT_FORMAT, OPT_PLATFORM, OPT_USERXATTR, OPT_DRY_RUN, OPT_VERBOSE, OPT_QUIET, OPT_PROGRESS,
	OPT_HELP, OPT_END
};

static const struct cmd_opt wh_ls_opts[] = {
	OPT_JSON, OPT_FORMAT, OPT_USERXATTR, OPT_HELP, OPT_END
};

static const struct cmd_opt wh_edit_opts[] = {
	OPT_FORMAT, OPT_USERXATTR, OPT_DRY_RUN, OPT_VERBOSE, OPT_QUIET,
	OPT_HELP, OPT_END
};

static const struct cmd_opt wh_opaque_opts[] = {
	{ "clear", 0, OPT_NONE, NULL, NULL,
	  "remove the opaque marker instead of setting it" },
	OPT_FORMAT, OPT_USERXATTR, OPT_DRY_RUN, OPT_VERBOSE, OPT_QUIET,
	OPT_HELP, OPT_END
};

static const struct cmd_opt wh_convert_opts[] = {
	{ "to", 't', OPT_REQUIRED, "FORMAT", "union|overlay|oci",
	  "the format to write (required)" },
	{ "output", 'o', OPT_REQUIRED, "NEWLAYER", "@dir",
	  "write the converted layer as a new directory NEWLAYER" },
	{ "in-place", 0, OPT_NONE, NULL, NULL,
	  "rewrite the markers of LAYER itself" },
	{ "to-userxattr", 0, OPT_NONE, NULL, NULL,
	  "write markers under user.* instead of trusted.*" },
	OPT_FORMAT, OPT_USERXATTR, OPT_DRY_RUN, OPT_VERBOSE, OPT_QUIET, OPT_PROGRESS,
	OPT_HELP, OPT_END
};

#define OPT_TAR_OUT \
	{ "compress", 0, OPT_REQUIRED, "ALGO", "auto|none|gzip|zstd|xz|bzip2", \
	  "compression (default: auto, from the file name)" }, \
	{ "level", 0, OPT_REQUIRED, "N", NULL, "compression level" }, \
	{ "threads", 0, OPT_REQUIRED, "N", NULL, \
	  "zstd worker threads (default and at most: the online cores)" }, \
	{ "descriptor", 0, OPT_REQUIRED, "FILE", "@file", \
	  "write the OCI descriptor (mediaType, digest, size, diffID) as JSON" }, \
	{ "clamp-mtime", 0, OPT_REQUIRED, "T", NULL, \
	  "clamp newer mtimes to T seconds (default: $SOURCE_DATE_EPOCH)" }, \
	{ "opaque-markers", 0, OPT_NONE, NULL, NULL, \
	  "write .wh..wh..opq for opaque directories, not whiteouts of the " \
	  "lower names" }

static const struct cmd_opt flatten_opts[] = {
	{ "output", 'o', OPT_REQUIRED, "FILE", "@file",
	  "the tarball to write (- for standard output), oci:DIR:TAG "
	  "for an image, or erofs:FILE for an EROFS image" },
	{ "base", 0, OPT_REQUIRED, "N", NULL,
	  "keep the bottom N layers as context: write the squashed layer of "
	  "the ones above" },
	{ "block-size", 0, OPT_REQUIRED, "N", "512|1024|2048|4096",
	  "with -o erofs:FILE: the image's block size (default 4096)" },
	{ "uuid", 0, OPT_REQUIRED, "KIND", "zero|content",
	  "with -o erofs:FILE: the image's UUID, all zeros (default) or "
	  "from its content" },
	OPT_TAR_OUT, OPT_OCI_OUT, OPT_LAYERDIRS, OPT_FORMAT, OPT_PLATFORM_OUT,
	OPT_USERXATTR, OPT_CACHE, OPT_DRY_RUN,
	OPT_VERBOSE, OPT_QUIET, OPT_PROGRESS, OPT_HELP, OPT_END
};

static const struct cmd_opt diff_opts[] = {
	{ "recursive", 'r', OPT_NONE, NULL, NULL,
	  "also list the contents of added and deleted directories" },
	OPT_JSON,
	{ "exact", 0, OPT_NONE, NULL, NULL,
	  "compare content and metadata; drop copy-ups that changed nothing" },
	{ "trees", 0, OPT_NONE, NULL, NULL,
	  "compare two plain trees OLD NEW" },
	{ "oci", 0, OPT_NONE, NULL, NULL,
	  "write the changes as an OCI layer tarball (with -o)" },
	{ "output", 'o', OPT_REQUIRED, "FILE", "@file",
	  "the tarball to write with --oci (- for standard output), or "
	  "oci:DIR:TAG for an image" },
	{ "exit-code", 0, OPT_NONE, NULL, NULL,
	  "exit 1 when there are changes, with -o too (a listing always "
	  "does)" },
	OPT_TAR_OUT, OPT_OCI_OUT, OPT_LAYERDIRS, OPT_FORMAT, OPT_PLATFORM_OUT,
	OPT_USERXATTR, OPT_CACHE, OPT_DRY_RUN, OPT_VERBOSE,
	OPT_QUIET, OPT_PROGRESS, OPT_HELP, OPT_END
};

static const struct cmd_opt fsck_opts[] = {
	{ "no", 'n', OPT_NONE, NULL, NULL,
	  "check only, change nothing (the default)" },
	{ "preen", 'p', OPT_NONE, NULL, NULL,
	  "repair what cannot lose data (safe repairs)" },
	{ "yes", 'y', OPT_NONE, NULL, NULL, "repair every problem it can" },
	{ "dry-run", 0, OPT_NONE, NULL, NULL,
	  "with -p or -y: show the repairs, make none" },
	OPT_JSON,
	{ "workdir", 0, OPT_REQUIRED, "W", "@dir",
	  "also check the overlay workdir W of the top layer" },
	{ "all-layers", 0, OPT_NONE, NULL, NULL,
	  "check each layer against those beneath, not the top one alone" },
	{ "vacuum", 0, OPT_NONE, NULL, NULL,
	  "with -p or -y: also remove copy-ups identical to what is beneath" },
	{ "severity", 0, OPT_REPEATED, "ID=LEVEL", NULL,
	  "report problem ID as ignore, info, warning or error" },
	{ "repair-lowers", 0, OPT_NONE, NULL, NULL,
	  "with --all-layers: repair the lower layers too" },
	{ "force", 0, OPT_NONE, NULL, NULL,
	  "with -p or -y: repair where it cannot be known whether a mounted "
	  "overlay uses the layer" },
	OPT_LAYERDIRS, OPT_FORMAT, OPT_PLATFORM, OPT_USERXATTR, OPT_CACHE,
	OPT_VERBOSE, OPT_QUIET, OPT_PROGRESS,
	{ "completion-fd", 'C', OPT_REQUIRED, "FD", NULL,
	  "e2fsck's completion lines (PASS CURRENT MAX DEVICE) on FD, or "
	  "with 0 its bar on standard output (a terminal)" },
	OPT_HELP, OPT_END
};

static const struct cmd_opt mount_opts[] = {
	{ "type", 't', OPT_REQUIRED, "TYPE", "auto|overlay|union|fuse",
	  "the filesystem (default auto: from the layers' format; fuse for "
	  "a non-root user)" },
	{ "workdir", 0, OPT_REQUIRED, "DIR", "@dir",
	  "overlayfs's workdir (default: .UPPER.hunion-work beside the "
	  "upper)" },
	{ "options", 'o', OPT_REQUIRED, "OPTS", NULL,
	  "mount flags (ro: every layer a lower) and filesystem options" },
	{ "force", 0, OPT_NONE, NULL, NULL,
	  "mount despite fsck errors or a layer in use by another mount" },
	{ "fake", 'f', OPT_NONE, NULL, NULL,
	  "check, show the mount(2) call, mount nothing (mount(8)'s -f)" },
	{ "dry-run", 0, OPT_NONE, NULL, NULL, "the same as --fake" },
	{ "no-mtab", 'n', OPT_NONE, NULL, NULL,
	  "mount(8)'s -n: accepted, does nothing (the kernel keeps the "
	  "table: /proc/self/mounts)" },
	OPT_LAYERDIRS, OPT_FORMAT, OPT_USERXATTR, OPT_VERBOSE, OPT_QUIET,
	OPT_HELP, OPT_END
};

static const struct cmd_opt umount_opts[] = {
	{ "lazy", 'l', OPT_NONE, NULL, NULL,
	  "detach now, clean up when no longer busy (MNT_DETACH)" },
	{ "force", 'f', OPT_NONE, NULL, NULL,
	  "force the unmount (MNT_FORCE: a fuse mount's connection is "
	  "aborted; overlayfs does as without it)" },
	OPT_HELP, OPT_END
};

static const struct cmd_opt help_only[] = { OPT_HELP, OPT_END };
static const struct cmd_opt top_opts[] = {
	{ "version", 0, OPT_NONE, NULL, NULL, "print the version and exit" },
	OPT_HELP, OPT_END
};

static const struct cmd_opt oci_ls_opts[] = { OPT_JSON, OPT_HELP, OPT_END };

static const struct cmd_opt oci_rm_opts[] = {
	OPT_DRY_RUN, OPT_VERBOSE, OPT_HELP, OPT_END
};

static const struct cmd_opt clean_opts[] = {
	OPT_DRY_RUN, OPT_VERBOSE, OPT_QUIET, OPT_PROGRESS, OPT_HELP, OPT_END
};

static const struct cmd_opt oci_gc_opts[] = {
	OPT_DRY_RUN, OPT_VERBOSE, OPT_QUIET, OPT_HELP, OPT_END
};

#define CMD_END { NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL }

static int cmd_help_cmd(const struct cmd *c, int argc, char **argv);

static const struct cmd oci_cmds[] = {
	{ "ls", cmd_oci_ls, "list the images of a layout: tags, digests, "
	  "platforms", "DIR", oci_ls_opts, NULL, "@dir", "hunion-oci(1)" },
	{ "rm", cmd_oci_rm, "remove a tag from a layout (oci gc then frees "
	  "its blobs)", "DIR:TAG", oci_rm_opts, NULL, "@dir",
	  "hunion-oci(1)" },
	{ "gc", cmd_oci_gc, "remove the blobs no image of a layout references",
	  "DIR", oci_gc_opts, NULL, "@dir", "hunion-oci(1)" },
	CMD_END
};

static const struct cmd whiteout_cmds[] = {
	{ "ls", cmd_whiteout_ls, "list the whiteouts and opaque directories of a layer",
	  "LAYER", wh_ls_opts, NULL, "@layer", "hunion-whiteout(1)" },
	{ "add", cmd_whiteout_add, "create whiteouts for PATHs in a layer",
	  "LAYER PATH...", wh_edit_opts, NULL, "@dir", "hunion-whiteout(1)" },
	{ "rm", cmd_whiteout_rm, "remove the whiteouts of PATHs from a layer",
	  "LAYER PATH...", wh_edit_opts, NULL, "@dir", "hunion-whiteout(1)" },
	{ "opaque", cmd_whiteout_opaque, "mark directories of a layer opaque (or clear)",
	  "LAYER DIR...", wh_opaque_opts, NULL, "@dir", "hunion-whiteout(1)" },
	{ "convert", cmd_whiteout_convert,
	  "rewrite every marker of a layer into another format",
	  "LAYER", wh_convert_opts, NULL, "@layer", "hunion-whiteout(1)" },
	CMD_END
};

const struct cmd hunion_cmds[] = {
	{ "merge", cmd_merge, "write the merged view of a stack of layers",
	  "-o OUT LAYER... | --into LAYER...", merge_opts, NULL, "@layer",
	  "hunion-merge(1)" },
	{ "diff", cmd_diff, "what the top layer changes over those beneath",
	  "[--trees OLD NEW | LAYER...]", diff_opts, NULL, "@layer",
	  "hunion-diff(1)" },
	{ "flatten", cmd_flatten, "squash a stack of layers into one tarball or image",
	  "-o FILE LAYER...", flatten_opts, NULL, "@layer",
	  "hunion-flatten(1)" },
	{ "fsck", cmd_fsck, "find and repair inconsistent markers and leftovers",
	  "[-n|-p|-y] LAYER...", fsck_opts, NULL, "@layer",
	  "hunion-fsck(8)" },
	{ "mount", cmd_mount, "check a stack of layers, then mount it",
	  "[-t TYPE] [-o OPTS] LAYER... MOUNTPOINT", mount_opts, NULL,
	  "@layer", "hunion-mount(8)" },
	{ "umount", cmd_umount, "unmount a stack; say who keeps it busy",
	  "[-l] [-f] MOUNTPOINT", umount_opts, NULL, "@dir",
	  "hunion-umount(8)" },
	{ "whiteout", NULL, "create, list, remove and convert whiteouts",
	  "ls|add|rm|opaque|convert ...", help_only, whiteout_cmds, NULL,
	  "hunion-whiteout(1)" },
	{ "oci", NULL, "list the images of an OCI layout, remove tags and "
	  "garbage", "ls|rm|gc ...", help_only, oci_cmds, NULL,
	  "hunion-oci(1)" },
	{ "clean", cmd_clean, "remove what killed runs left in TMPDIR "
	  "(unpacked tarball layers)", "[-n] [-v|-q]", clean_opts, NULL, NULL,
	  "hunion-clean(1)" },
	{ "help", cmd_help_cmd, "show the help of a command, as its --help "
	  "does", "[COMMAND [SUBCOMMAND]]", help_only, NULL, "@command",
	  "hunion(1)" },
	{ "__complete", cmd_complete, NULL, "bash|zsh|fish", help_only,
	  NULL, NULL, NULL },
	CMD_END
};

static const struct cmd top = {
	"hunion", NULL, "union/overlay filesystem layers at rest",
	"COMMAND [OPTIONS] [ARGS]", top_opts, hunion_cmds, NULL, "hunion(1)"
};

static void raise_fd_limit(void)
{
	struct rlimit rl;

	/* Deep trees hold one fd per level and layer. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static const struct cmd *find_sub(const struct cmd *group, const char *name)
{
	for (const struct cmd *c = group->subs; c->name; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

/*
 * The edit distance of @a and @b: insertions, deletions, substitutions
 * and swaps of two neighbours (optimal string alignment), each 1, as git's
 * help.c weighs a typo.  SIZE_MAX when out of memory.
 */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), d;
	/* three rows: the one before last (for swaps), the last, this */
	size_t *rows = calloc(3 * (lb + 1), sizeof(*rows));
	size_t *r2, *r1, *r0;

	if (!rows)
		return SIZE_MAX;
	r2 = rows;
	r1 = rows + lb + 1;
	r0 = rows + 2 * (lb + 1);
	for (size_t j = 0; j <= lb; j++)
		r1[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t *t;

		r0[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t best = r1[j - 1] + (a[i - 1] != b[j - 1]);

			if (r1[j] + 1 < best)
				best = r1[j] + 1;
			if (r0[j - 1] + 1 < best)
				best = r0[j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && r2[j - 2] + 1 < best)
				best = r2[j - 2] + 1;
			r0[j] = best;
		}
		t = r2, r2 = r1, r1 = r0, r0 = t;
	}
	d = r1[lb];
	free(rows);
	return d;
}

/* How far @typed is from the command @name: a beginning of it counts as
 * one typo ("white" for "whiteout"). */
static size_t command_distance(const char *typed, const char *name)
{
	size_t len = strlen(typed);

	if (len >= 2 && !strncmp(name, typed, len))
		return 1;
	return edit_distance(typed, name);
}

/* "hunion: 'merg' is not a command", then the visible commands of @group
 * nearest to @typed, if any is near enough: "Did you mean 'merge'?". */
static void not_a_command(const struct cmd *group, const char *prefix,
			  const char *typed)
{
	/* two typos, but not more than half of what was typed */
	size_t best = strlen(typed) / 2 < 2 ? strlen(typed) / 2 : 2;
	const char *sep = "Did you mean ";

	fprintf(stderr, "%s: '%s' is not a command; see '%s --help'\n",
		prefix, typed, prefix);
	if (best == 0)
		return;
	for (const struct cmd *c = group->subs; c->name; c++) {
		size_t d = c->summary ? command_distance(typed, c->name) :
			   SIZE_MAX;

		if (d < best)
			best = d;
	}
	for (const struct cmd *c = group->subs; c->name; c++) {
		if (!c->summary || command_distance(typed, c->name) != best)
			continue;
		fprintf(stderr, "%s'%s'", sep, c->name);
		sep = " or ";
	}
	if (strcmp(sep, "Did you mean "))
		fputs("?\n", stderr);
}

/* Walk down the table: "hunion whiteout ls ..." runs whiteout_cmds' "ls". */
static int dispatch(const struct cmd *group, const char *prefix, int argc,
		    char **argv)
{
	static char name[128];
	const struct cmd *c;

	/* front.cmdname is @prefix already: "hunion", or the static name
	 * the caller made (not @prefix itself, which it frees) */
	if (argc < 2) {
		cmd_help(group, stderr);
		return EXIT_USAGE;
	}
	if (argv[1][0] == '-') {
		if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
			cmd_help(group, stdout);
			return EXIT_OK;
		}
		if (!strcmp(argv[1], "--version") && group == &top) {
			printf("hunion %s\n", HUNION_VERSION);
			return EXIT_OK;
		}
		cmd_usage_error(group, "unknown option '%s'", argv[1]);
		return EXIT_USAGE;
	}
	c = find_sub(group, argv[1]);
	if (!c) {
		not_a_command(group, prefix, argv[1]);
		return EXIT_USAGE;
	}
	snprintf(name, sizeof(name), "%s %s", prefix, c->name);
	front.cmdname = name;
	if (!c->run) {
		char *sub_prefix = strdup(name);
		int rc;

		if (!sub_prefix)
			return EXIT_TROUBLE;
		rc = dispatch(c, sub_prefix, argc - 1, argv + 1);
		free(sub_prefix);
		return rc;
	}
	return c->run(c, argc - 1, argv + 1);
}

static int no_opts(void *ctx, const struct parsed_opt *o)
{
	(void)ctx;
	(void)o;
	return 0;
}

/* hunion help [COMMAND [SUBCOMMAND]]: what "hunion COMMAND --help" says. */
static int cmd_help_cmd(const struct cmd *c, int argc, char **argv)
{
	static char name[128] = "hunion";
	const struct cmd *at = &top;
	int i = cmd_parse(c, argc, argv, no_opts, NULL);

	if (i < 0)
		return EXIT_USAGE;
	for (; i < argc; i++) {
		const struct cmd *sub = at->subs ? find_sub(at, argv[i]) : NULL;

		if (!at->subs) {
			cmd_usage_error(c, "'%s' has no subcommand '%s'", name,
					argv[i]);
			return EXIT_USAGE;
		}
		if (!sub) {
			not_a_command(at, name, argv[i]);
			return EXIT_USAGE;
		}
		snprintf(name + strlen(name), sizeof(name) - strlen(name),
			 " %s", sub->name);
		at = sub;
	}
	front.cmdname = name;
	cmd_help(at, stdout);
	return EXIT_OK;
}

static volatile sig_atomic_t caught;

/* The first signal asks the command to stop and clean up (a temporary
 * output, an unpacked tarball layer); a second one kills at once. */
static void on_signal(int sig)
{
	if (caught) {
		signal(sig, SIG_DFL);
		raise(sig);
	}
	caught = sig;
	hu_interrupt();
}

static const int stop_sigs[] = { SIGINT, SIGTERM, SIGHUP };
static bool stop_caught[3];	/* a handler of ours, not ignored */

/* SA_RESTART: a call a signal interrupts goes on after the handler.  A
 * run that stops still says what it did, whole: fsck's findings and its
 * summary, written to a pipe that was full when the signal came, and
 * waits that must end on a signal do not rely on interrupted calls
 * (flock is taken in naps, outlock.c).  Only an input that may block
 * needs the call interrupted: front_interruptible(). */
static void set_handlers(int flags)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = flags };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++)
		if (stop_caught[i])
			(void)sigaction(stop_sigs[i], &sa, NULL);
}

bool front_interruptible(bool on)
{
	set_handlers(on ? 0 : SA_RESTART);
	return !hu_interrupted();
}

static void catch_signals(void)
{
	for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++) {
		struct sigaction old;

		/* ignored from the start (nohup, a background job of a
		 * script): stay ignored */
		stop_caught[i] = sigaction(stop_sigs[i], NULL, &old) == 0 &&
				 old.sa_handler != SIG_IGN;
	}
	set_handlers(SA_RESTART);
}

int main(int argc, char **argv)
{
	const char *base;
	int rc;

	front.progress = isatty(STDERR_FILENO);
	if (atexit(front_close_stdout) != 0)
		return EXIT_TROUBLE;
	raise_fd_limit();
	catch_signals();
	/* mount(8) runs /sbin/mount.TYPE, a link to this binary */
	base = argc > 0 ? strrchr(argv[0], '/') : NULL;
	base = base ? base + 1 : argc > 0 ? argv[0] : "";
	if (!strcmp(base, "mount.union") || !strcmp(base, "mount.hunion"))
		rc = cmd_mount_helper(argc, argv);
	else
		rc = dispatch(&top, "hunion", argc, argv);
	/* a run that failed still ends its progress forms */
	progress_finish(PROGRESS_UNKNOWN, PROGRESS_UNKNOWN);
	if (caught && !front.keep_exit) {
		/* cleaned up: now die of the signal, as the shell expects */
		signal(caught, SIG_DFL);
		raise(caught);
	}
	return rc;
}

const struct cmd *cmd_top(void)
{
	return &top;
}
