/* SPDX-License-Identifier: MIT */
/*
 * The command table: one entry per (sub)command with its options.  It is at
 * once the parser, the --help text, and the source of the shell
 * completions (hunion __complete); tests/cli/doc-sync checks the man pages
 * against it.
 */
#ifndef HUNION_CMD_H
#define HUNION_CMD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hunion.h"

/* Exit codes outside fsck and diff. */
enum { EXIT_OK = 0, EXIT_TROUBLE = 1, EXIT_USAGE = 2 };

/*
 * Whether an option takes an argument, and how often it may be given:
 *  OPT_NONE      a flag (-v, --json);
 *  OPT_REQUIRED  takes an argument, once: given again it is a usage error
 *                ("-o a -o b"), so that no value is silently dropped;
 *  OPT_REPEATED  takes an argument and may be given again (--severity
 *                ID=LEVEL, KEY=VALUE lists): on_opt sees each one, in
 *                order, and keeps them all.
 * A non-zero arg means "takes an argument".
 */
enum opt_arg { OPT_NONE = 0, OPT_REQUIRED, OPT_REPEATED };

struct cmd_opt {
	const char *long_name;
	char short_name;	/* 0 when none */
	enum opt_arg arg;
	const char *arg_name;	/* for help: "OUT", "FORMAT" */
	const char *values;	/* '|'-separated choices (completion, and
				 * listed by --help), or "@dir" / "@file" /
				 * "@layer" for paths; may be NULL */
	const char *help;
};

struct cmd;
typedef int (*cmd_fn)(const struct cmd *c, int argc, char **argv);

struct cmd {
	const char *name;
	cmd_fn run;			/* NULL for a group with subcommands */
	const char *summary;		/* one line */
	const char *usage;		/* operands after the options */
	const struct cmd_opt *opts;	/* terminated by a zeroed entry */
	const struct cmd *subs;		/* terminated by a zeroed entry */
	const char *operands;		/* "@dir" / "@file" / "@layer" (a
					 * directory or a tarball by its
					 * name), "@command" (the names of
					 * the commands): completion hint */
	const char *man;		/* its man page, "hunion-merge(1)",
					 * named by --help; NULL for none */
};

extern const struct cmd hunion_cmds[];	/* the top-level table */
const struct cmd *cmd_top(void);	/* "hunion" itself, holding them */

/* Options shared by commands that read layers. */
#define OPT_FORMAT { "format", 0, OPT_REQUIRED, "FORMAT", \
	"auto|union|overlay|oci", "layer format (default: detect per layer)" }
#define OPT_PLATFORM { "platform", 0, OPT_REQUIRED, "OS/ARCH[/VARIANT]", \
	NULL, "the image of an index an operand oci:DIR[:REF] reads " \
	"(default: the host's)" }
/* flatten and diff: --platform also names the platform of an image
 * written (-o oci:DIR:TAG). */
#define OPT_PLATFORM_OUT { "platform", 0, OPT_REQUIRED, "OS/ARCH[/VARIANT]", \
	NULL, "the image of an index an operand oci:DIR[:REF] reads " \
	"(default: the host's); with -o oci:DIR:TAG also the platform " \
	"written" }
/* diff, fsck and flatten: where the path indexes of tarball and image layers are
 * kept (tar/pindex.h). */
#define OPT_CACHE { "cache-dir", 0, OPT_REQUIRED, "DIR", "@dir", \
	"keep the path indexes of tarball and image layers in DIR " \
	"(default: $XDG_CACHE_HOME/hunion)" }, \
	{ "no-cache", 0, OPT_NONE, NULL, NULL, \
	"read tarball and image layers afresh, keep no path index" }
#define OPT_USERXATTR { "userxattr", 0, OPT_NONE, NULL, NULL, \
	"markers live under user.* instead of trusted.*" }
/* A stack as overlayfs's mount options and podman inspect's
 * GraphDriver.Data give it: layer_operands() puts the layers in. */
#define OPT_LAYERDIRS { "lowerdir", 0, OPT_REQUIRED, "TOP:...:BOTTOM", \
	"@dir", "layers beneath the operands, top first as overlayfs's " \
	"lowerdir= (':' between, '\\' escapes)" }, \
	{ "upperdir", 0, OPT_REQUIRED, "DIR", "@dir", \
	"with --lowerdir, no layer operands: the top layer" }
#define OPT_HELP { "help", 'h', OPT_NONE, NULL, NULL, "show this help" }
#define OPT_VERBOSE { "verbose", 'v', OPT_NONE, NULL, NULL, \
	"say more about what is done" }
#define OPT_QUIET { "quiet", 'q', OPT_NONE, NULL, NULL, \
	"print errors only, no warnings" }
#define OPT_DRY_RUN { "dry-run", 'n', OPT_NONE, NULL, NULL, \
	"show what would be done, change nothing" }
#define OPT_JSON { "json", 0, OPT_NONE, NULL, NULL, \
	"one JSON object per line" }
#define OPT_PROGRESS { "progress", 0, OPT_REQUIRED, "WHEN", \
	"auto|always|never", "progress on stderr: on a terminal (auto), " \
	"also as a line every 10 s elsewhere (always), or not" }, \
	{ "progress-fd", 0, OPT_REQUIRED, "FD", NULL, \
	"JSON progress lines on file descriptor FD" }
/* The image written by -o oci:DIR:TAG (flatten, diff --oci). */
#define OPT_OCI_OUT \
	{ "config", 0, OPT_REQUIRED, "FILE", "@file", \
	  "with -o oci:DIR:TAG: the image config to start from (JSON)" }, \
	{ "config.cmd", 0, OPT_REPEATED, "ARG", NULL, \
	  "Cmd: one argument each time given (the list replaces Cmd)" }, \
	{ "config.entrypoint", 0, OPT_REPEATED, "ARG", NULL, \
	  "Entrypoint: one argument each time given (replaces it)" }, \
	{ "config.env", 0, OPT_REPEATED, "KEY=VALUE", NULL, \
	  "set an Env variable (replaces KEY's entry; repeatable)" }, \
	{ "config.label", 0, OPT_REPEATED, "KEY=VALUE", NULL, \
	  "set a label (repeatable)" }, \
	{ "config.exposedports", 0, OPT_REPEATED, "PORT[/PROTO]", NULL, \
	  "add an exposed port, tcp, udp or sctp (repeatable)" }, \
	{ "config.volume", 0, OPT_REPEATED, "PATH", NULL, \
	  "add a volume (repeatable)" }, \
	{ "config.user", 0, OPT_REQUIRED, "USER", NULL, \
	  "the User a container runs as" }, \
	{ "config.workingdir", 0, OPT_REQUIRED, "DIR", NULL, \
	  "the WorkingDir a container starts in" }, \
	{ "author", 0, OPT_REQUIRED, "TEXT", NULL, \
	  "the image's author (and of the history entries written)" }, \
	{ "history", 0, OPT_REQUIRED, "TEXT", NULL, \
	  "with -o oci:DIR:TAG: created_by of the top layer's history entry" }
#define OPT_END { NULL, 0, OPT_NONE, NULL, NULL, NULL }

/* ---- option parsing (common.c) --------------------------------------- */

/* One parsed option: the long name it matched and its argument. */
struct parsed_opt {
	const char *name;
	const char *arg;
};

/*
 * Parse @argv against @c's option table (argv[0] is the command name).
 * Calls @on_opt for each option, wherever it is: options may follow
 * operands (GNU getopt permutes argv so that the operands come last, in
 * their order); "--" ends the options.  Handles -h/--help itself (prints
 * help, exits 0).  Returns the index of the first operand, or -1 after
 * printing a usage error.
 */
int cmd_parse(const struct cmd *c, int argc, char **argv,
	      int (*on_opt)(void *ctx, const struct parsed_opt *o), void *ctx);
void cmd_help(const struct cmd *c, FILE *to);
/* Print "hunion CMD: message" and the usage line; returns -1. */
int cmd_usage_error(const struct cmd *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Shared front-end state: program name, verbosity, how errors look. */
struct front {
	const char *cmdname;	/* "hunion merge" */
	int verbosity;		/* -1 quiet, 0 normal, 1 verbose */
	bool progress;		/* stderr is a terminal */
	bool warned_owner;
	int trouble;		/* exit code for trouble: 1, diff's 2 */
	bool keep_exit;		/* after a signal, exit with the command's
				 * status (fsck's 32), not die of it */
};
extern struct front front;

/* atexit(): fail the command, with a message, if its standard output could
 * not be written. */
void front_close_stdout(void);

/* Where the lines of -n and -v go: the plan of a dry run is what the
 * user asked for, on standard output; the steps of a real run are
 * chatter, on standard error with the warnings. */
FILE *front_steps(bool dry_run);
/* @one or @many, as @n says: "1 entry", "2 entries". */
const char *plural(unsigned long long n, const char *one, const char *many);

/* Print "hunion CMD: PATH: message: strerror(err)" to stderr. */
void print_error(const struct hu_error *e);
/* A hu_report that prints warnings (unless quiet) and progress in the
 * forms asked for (progress.c). */
struct hu_report front_report(void);
void front_report_warn(void *ctx, const struct hu_error *w);
/* Clear the terminal's progress line, before any other output. */
void front_progress_done(void);
/* Around the open and read of an input that may block (--config naming a
 * FIFO nobody writes): true lets SIGINT, SIGTERM and SIGHUP interrupt
 * the call (EINTR, the run then stops: hu_eintr_retry()), false goes back
 * to restarting calls, which the rest of a run needs.  False when a
 * signal came already: do not start the call. */
bool front_interruptible(bool on);

/* ---- progress (progress.c) --------------------------------------------- */
enum progress_mode { PROGRESS_AUTO = 0, PROGRESS_ALWAYS, PROGRESS_NEVER };
#define PROGRESS_UNKNOWN UINT64_MAX
/* Take --progress, --progress-fd or fsck's -C: 1, 0 if @o is none of
 * them, -1 after a usage error. */
int progress_opt(const struct cmd *c, const struct parsed_opt *o);
/* After the options of a command that has --progress: start the clock,
 * pick the forms, catch SIGUSR1.  @device names the run in -C lines. */
void progress_start(const struct cmd *c, const char *device);
/* The run is over: what it moved aside is removed
 * (progress_remove_aside()), the line cleared, the final lines written
 * with the summary's own counts (@entries, @written bytes;
 * PROGRESS_UNKNOWN: as last reported, or not known). */
void progress_finish(uint64_t entries, uint64_t written);
/* Remove what the run moved aside (hu_aside_remove()), the phase "cleaning
 * up" drawn at once with each one's path.  progress_finish() calls it
 * first, so the work of every command is done before the clean-up. */
int progress_remove_aside(void (*removed)(void *ctx, const char *path),
			  void *ctx, struct hu_error *e);
/* Where the library counts the bytes it moves, for the lines above
 * (front_report() gives it too; hu_tarout_opts.bytes takes it). */
struct hu_progress_bytes *progress_bytes(void);

/* Layer options shared by every command that reads layers. */
struct layer_opts {
	struct hu_stack_opts stack;
	bool json;
	bool dry_run;
	const char *lowerdir, *upperdir;	/* --lowerdir, --upperdir */
	const char *cache_dir;	/* --cache-dir */
	bool no_cache;		/* --no-cache */
};
/* Refuse an operand oci:DIR[:REF] among @argv[@first..@argc) for a
 * command (@what) that changes its layers or mounts them: -1 after
 * printing why. */
int refuse_images(const struct cmd *c, int argc, char **argv, int first,
		  const char *what);
/* Do the operands @ops (@n) hold a tarball or an image, whose layers a
 * command may read from their path index? */
bool operands_have_tarballs(char *const *ops, int n);
/* The cache of path indexes (--cache-dir DIR, else the default one; none
 * with --no-cache) into lo->stack.pcache.  A default one that cannot be
 * opened is a warning, and the indexes are made afresh; DIR is an
 * error (-1 with @e). */
int layer_cache_open(struct layer_opts *lo, struct hu_error *e);
/* After the command's own work: the cache trimmed to its bound (a
 * failure a warning) and closed. */
void layer_cache_close(struct layer_opts *lo);
/* -v: each layer of @s read from its path index, and whether the index
 * was read from the cache or made. */
void note_indexes(const struct hu_stack *s);
/* -v: each index layer whose tarball was read again from its start. */
void note_restarts(const struct hu_stack *s);
/* Handle --format, --platform, --userxattr, -v, -q, --json, -n,
 * --lowerdir, --upperdir, --cache-dir, --no-cache: returns 1 if @o was one of them, 0 if not, -1
 * on a bad value. */
int layer_opt(const struct cmd *c, struct layer_opts *lo,
	      const struct parsed_opt *o);

/* The stack of a command, bottom first, in *@argv[@first, *@argc -
 * @after): --lowerdir's layers beneath the layer operands, --upperdir's
 * on top (then there may be none), the @after operands that are no
 * layers (mount's MOUNTPOINT) last.  0, or -1 after a usage error. */
int layer_operands(const struct cmd *c, const struct layer_opts *lo,
		   int *argc, char ***argv, int first, int after);

/* Warn (through @r) when a layer of @s that merge -o, diff or flatten
 * reads is written by a mounted overlay: the result may be torn. */
void warn_live_layers(const struct hu_stack *s, const struct hu_report *r);

/* The one JSON writer of strings: valid UTF-8 whatever @s holds (a byte
 * that is not UTF-8 is written as the text \xNN), so that every parser
 * takes it.  For text that hunion writes itself. */
void json_print_string(FILE *f, const char *s);
/* Member "@key":@s for a name read from disk, which may hold any bytes:
 * when @s is not UTF-8, "@key_b64" follows with its bytes in base64, the
 * one way back to them (hunion(1), JSON OUTPUT). */
void json_field(FILE *f, const char *key, const char *s);
/* A path for a line-oriented listing: C-style escapes for control bytes,
 * backslash and non-UTF-8, so no name can forge a line. */
void print_path_escaped(FILE *f, const char *s);

/* The tarball options of flatten and diff --oci (tarargs.c). */
struct tar_args {
	const char *compress;	/* NULL or "auto": from the output's name */
	const char *level, *threads, *descriptor, *clamp;
	bool opaque_markers;
	bool layer;		/* an OCI layer (diff --oci): a media type
				 * must say its compression */
};
/* Take @o if it is one of them: 1, else 0. */
int tar_opt(struct tar_args *t, const struct parsed_opt *o);
/* Check them into @to (SOURCE_DATE_EPOCH too); -1 after a usage error.
 * The compression is what @out's name says (hu_compress_for_path()):
 * --compress may only agree with it, and a name of a compression that
 * cannot be written is refused.  @out NULL: an image's layer, gzip
 * unless --compress says otherwise.  An image's layer, t->layer and
 * --descriptor take only the compressions with an OCI media type. */
int tar_args_resolve(const struct cmd *c, const struct tar_args *t,
		     const char *out, struct hu_tarout_opts *to);
/* --clamp-mtime @clamp (NULL: not given) and SOURCE_DATE_EPOCH, the
 * same for every output: *@on and *@max, the time newer mtimes become;
 * @sde (may be NULL) gets SOURCE_DATE_EPOCH, -1 when not set.  -1 after
 * a usage error. */
int clamp_resolve(const struct cmd *c, const char *clamp, bool *on,
		  int64_t *max, long long *sde);
/* SOURCE_DATE_EPOCH @sde into @v: whole seconds, at most the end of
 * year 9999; -1 after a usage error. */
int sde_parse(const struct cmd *c, const char *sde, long long *v);
/* Stream the entries of a tarball into @t. */
typedef int (*tar_fill_fn)(void *ctx, struct hu_tarout *t,
			   struct hu_error *e);
/* Write the tarball @path ("-": standard output) and the descriptor the
 * options ask for, built beside them and renamed in when complete; on
 * failure nothing is left and @e names the output.  @d: the digests, for
 * a caller that says them (NULL: none computed but the descriptor's). */
int tar_write(const struct tar_args *ta, const char *path,
	      const struct hu_stack *s, const struct hu_tarout_opts *to,
	      tar_fill_fn fill, void *ctx, struct hu_digests *d,
	      struct hu_error *e);
/* Rename the output @f[0] in; with the digests @d (NULL: none), its
 * descriptor @f[1] written and renamed in with it (hu_outfile_commit2). */
int commit_with_descriptor(struct hu_outfile f[2], const struct hu_digests *d,
			   struct hu_error *e);
/* -n: the tarball @path that tar_write() would have written (@d, @to),
 * with @entries (PROGRESS_UNKNOWN: not said) and its descriptor, on
 * standard output (tarargs.c); and the image of @nlayers layers that
 * -o oci:DIR:TAG would get (ociout.c). */
void print_would_write(const struct tar_args *ta, const char *path,
		       const struct hu_tarout_opts *to,
		       const struct hu_digests *d, uint64_t entries);
struct oci_args;
void print_would_write_image(const struct oci_args *oa, size_t nlayers,
			     const struct hu_tarout_opts *to);
/* -o erofs:FILE of flatten (erofsargs.c). */
struct erofs_args {
	const char *block_size, *uuid;	/* --block-size, --uuid */
};
/* Does @out name an EROFS image (erofs:FILE)? */
bool erofs_output(const char *out);
/* Take @o if it is --block-size or --uuid: 1, else 0. */
int erofs_opt(struct erofs_args *a, const struct parsed_opt *o);
/* Check them, and of the tarball options @t what an image takes
 * (--clamp-mtime, SOURCE_DATE_EPOCH, --descriptor), into @eo; the others
 * refused.  -1 after a usage error. */
int erofs_args_resolve(const struct cmd *c, const struct erofs_args *a,
		       const struct tar_args *t, const char *out,
		       struct hu_erofs_out_opts *eo);
/* Write the image of @s that @out (erofs:FILE) names, and @descriptor
 * (NULL: none) beside it, renamed in together when complete; on failure
 * nothing is left and @e names the image.  @d: its digest, for a caller
 * that says it (NULL: none computed but the descriptor's).  @dry_run: the
 * image made in an unnamed file, then dropped. */
int erofs_write(const char *out, const char *descriptor,
		const struct hu_stack *s, const struct hu_erofs_out_opts *eo,
		const struct hu_report *r, struct hu_flatten_stats *st,
		struct hu_digests *d, bool dry_run, struct hu_error *e);
/* -o oci:DIR:TAG of flatten and diff --oci (ociout.c). */
struct oci_args {
	const char *config, *history;	/* --config FILE, --history TEXT */
	/* --config.*, --author; the command sets .platform from
	 * --platform, which names the platform written too */
	struct hu_oci_config_edit edit;
	const char *first_opt;		/* the first of them given */
	char *dir, *tag;		/* from oci:DIR:TAG */
	char *config_text;		/* FILE's JSON and edit, checked */
};
/* Take @o if it is --config, --config.*, --author or --history: 1, 0
 * when it is none, -1 after a usage error. */
int oci_opt(const struct cmd *c, struct oci_args *oa,
	    const struct parsed_opt *o);
/* 1 when @out is oci:DIR:TAG (checked, --config read, the tarball
 * options resolved into @to with gzip the default), 0 when it is no
 * image, -1 after a usage error. */
int oci_args_resolve(const struct cmd *c, struct oci_args *oa,
		     const char *out, struct tar_args *ta,
		     struct hu_tarout_opts *to);
void oci_args_free(struct oci_args *oa);
/* The image to write: the bottom @nkeep layers of the stack each as an
 * OCI layer over those beneath (an image's blob as it is), then the top
 * layer @fill streams. */
struct oci_write {
	size_t nkeep;
	const char *command;		/* created_by's default */
	bool opaque_markers;
	const struct hu_tarout_opts *to;
	tar_fill_fn fill;
	void *ctx;
};
int oci_write(const struct oci_args *oa, const struct hu_stack *s,
	      const struct oci_write *ow, struct hu_error *e);

/* A whole decimal number in [min, max]. */
bool parse_num(const char *s, long long min, long long max, long long *out);

int cmd_merge(const struct cmd *c, int argc, char **argv);
int cmd_diff(const struct cmd *c, int argc, char **argv);
int cmd_flatten(const struct cmd *c, int argc, char **argv);
int cmd_whiteout_ls(const struct cmd *c, int argc, char **argv);
int cmd_whiteout_add(const struct cmd *c, int argc, char **argv);
int cmd_whiteout_rm(const struct cmd *c, int argc, char **argv);
int cmd_whiteout_opaque(const struct cmd *c, int argc, char **argv);
int cmd_whiteout_convert(const struct cmd *c, int argc, char **argv);
int cmd_fsck(const struct cmd *c, int argc, char **argv);
int cmd_mount(const struct cmd *c, int argc, char **argv);
int cmd_umount(const struct cmd *c, int argc, char **argv);
/* main() of mount.union and mount.hunion, mount(8)'s helpers (argv[0]). */
int cmd_mount_helper(int argc, char **argv);
int cmd_oci_ls(const struct cmd *c, int argc, char **argv);
int cmd_oci_rm(const struct cmd *c, int argc, char **argv);
int cmd_oci_gc(const struct cmd *c, int argc, char **argv);
int cmd_complete(const struct cmd *c, int argc, char **argv);
int cmd_clean(const struct cmd *c, int argc, char **argv);

#endif /* HUNION_CMD_H */
