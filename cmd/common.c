/* SPDX-License-Identifier: MIT */
/* What every command shares: option parsing from the table, help, the one
 * place errors are formatted, warnings and progress. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"

struct front front = { .cmdname = "hunion", .trouble = EXIT_TROUBLE };

static size_t count_opts(const struct cmd_opt *o)
{
	size_t n = 0;

	while (o && o[n].long_name)
		n++;
	return n;
}

/* The help line of @o: the option, its help, and its choices when it has
 * a fixed set of them ("--format=FORMAT  ... (auto|union|overlay|oci)"). */
static void help_opt(FILE *to, const struct cmd_opt *o)
{
	char left[64];

	snprintf(left, sizeof(left), "%c%c%c --%s%s%s",
		 o->short_name ? '-' : ' ',
		 o->short_name ? o->short_name : ' ',
		 o->short_name ? ',' : ' ', o->long_name,
		 o->arg ? "=" : "", o->arg ? o->arg_name : "");
	fprintf(to, "  %-26s %s", left, o->help);
	if (o->values && o->values[0] != '@')
		fprintf(to, " (%s)", o->values);
	fputc('\n', to);
}

void cmd_help(const struct cmd *c, FILE *to)
{
	const char *name = front.cmdname ? front.cmdname : "hunion";

	fprintf(to, "usage: %s %s\n", name, c->usage ? c->usage : "");
	if (c->summary)
		fprintf(to, "\n%s\n", c->summary);
	if (c->subs) {
		fprintf(to, "\ncommands:\n");
		for (const struct cmd *s = c->subs; s->name; s++)
			if (s->summary)
				fprintf(to, "  %-10s %s\n", s->name, s->summary);
	}
	if (count_opts(c->opts)) {
		fprintf(to, "\noptions:\n");
		for (const struct cmd_opt *o = c->opts; o->long_name; o++)
			help_opt(to, o);
	}
	if (c->subs && c->man)
		fprintf(to, "\nSee '%s COMMAND --help' and %s.\n", name,
			c->man);
	else if (c->man)
		fprintf(to, "\nSee %s.\n", c->man);
}

int cmd_usage_error(const struct cmd *c, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", front.cmdname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: %s %s\n", front.cmdname,
		c->usage ? c->usage : "");
	return -1;
}

/* getopt_long's '?' (unknown) or ':' (no argument) for the option it
 * just read: a short one is named by optopt (argv[optind - 1] may be
 * another word when it sits inside a cluster such as -vx), a long one by
 * its word, @word. */
static void bad_option(const struct cmd *c, int ch, const char *word)
{
	char shortopt[3] = { '-', (char)optopt, '\0' };
	bool is_long = !strncmp(word, "--", 2);

	if (ch == '?' && optopt)
		is_long = false;
	else if (ch == ':' && (optopt <= 0 || optopt >= 256))
		is_long = true;
	if (ch == '?')
		cmd_usage_error(c, "unknown option '%s'",
				is_long ? word : shortopt);
	else
		cmd_usage_error(c, "option '%s' needs an argument",
				is_long ? word : shortopt);
}

/* An option that takes one argument given a second time: which of the
 * two was meant cannot be known. */
static int given_twice(const struct cmd *c, const struct cmd_opt *o)
{
	char shortopt[4] = { '-', o->short_name, '/', '\0' };

	return cmd_usage_error(c, "option '%s--%s' given twice; it takes "
			       "one %s", o->short_name ? shortopt : "",
			       o->long_name, o->arg_name);
}

int cmd_parse(const struct cmd *c, int argc, char **argv,
	      int (*on_opt)(void *ctx, const struct parsed_opt *o), void *ctx)
{
	size_t n = count_opts(c->opts);
	struct option *lopts = calloc(n + 1, sizeof(*lopts));
	bool *given = calloc(n + 1, sizeof(*given));
	/* No '+': options may follow operands, as with GNU tools; "--"
	 * ends them (and POSIXLY_CORRECT makes the first operand end them). */
	char shorts[128] = ":";
	size_t sl = 1;
	int rc = -1, ch, idx;

	if (!lopts || !given) {
		free(lopts);
		free(given);
		return cmd_usage_error(c, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		const struct cmd_opt *o = &c->opts[i];

		lopts[i] = (struct option){ o->long_name,
			o->arg ? required_argument : no_argument, NULL,
			o->short_name ? o->short_name : 256 + (int)i };
		if (o->short_name && sl + 3 < sizeof(shorts)) {
			shorts[sl++] = o->short_name;
			if (o->arg)
				shorts[sl++] = ':';
		}
	}
	shorts[sl] = '\0';
	optind = 0;	/* glibc: start afresh, permuting */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, shorts, lopts, &idx)) != -1) {
		const struct cmd_opt *o = NULL;
		struct parsed_opt p;

		if (ch == '?' || ch == ':') {
			bad_option(c, ch, argv[optind - 1]);
			goto out;
		}
		for (size_t i = 0; i < n && !o; i++)
			if ((c->opts[i].short_name &&
			     c->opts[i].short_name == ch) || ch == 256 + (int)i)
				o = &c->opts[i];
		if (!o)
			continue;
		if (!strcmp(o->long_name, "help")) {
			cmd_help(c, stdout);
			free(lopts);
			free(given);
			exit(EXIT_OK);
		}
		if (o->arg == OPT_REQUIRED && given[o - c->opts]) {
			given_twice(c, o);
			goto out;
		}
		given[o - c->opts] = true;
		p = (struct parsed_opt){ o->long_name, optarg };
		if (on_opt(ctx, &p) < 0)
			goto out;
	}
	rc = optind;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(c->opts[i].long_name, "progress"))
			progress_start(c, optind < argc ? argv[argc - 1] :
				       NULL);
out:
	free(lopts);
	free(given);
	return rc;
}

FILE *front_steps(bool dry_run)
{
	return dry_run ? stdout : stderr;
}

const char *plural(unsigned long long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

void print_error(const struct hu_error *e)
{
	fprintf(stderr, "%s: ", front.cmdname);
	if (e->path && *e->path) {
		print_path_escaped(stderr, e->path);
		fputs(": ", stderr);
	}
	fputs(hu_error_has_msg(e) ? e->msg : "failed", stderr);
	if (e->err)
		fprintf(stderr, ": %s", strerror(e->err));
	fputc('\n', stderr);
}

/*
 * Registered with atexit() by main(): every command's standard output is
 * checked here, once, after its last printf, as coreutils' close_stdout()
 * does.  A listing that could not be written (a full disk, /dev/full, a
 * closed pipe reader that left EPIPE) must not exit 0.  A stdout that was
 * closed before we started (EBADF) is fine as long as nothing was written.
 */
void front_close_stdout(void)
{
	bool pending = __fpending(stdout) != 0;
	bool failed = ferror(stdout) != 0;
	int err = 0;

	/* The errno of an earlier failed write is gone: only fclose()'s own
	 * is told, and only when no write failed before (else it would
	 * depend on how much was left in the buffer). */
	if (fclose(stdout) != 0 && (pending || errno != EBADF)) {
		err = failed ? 0 : errno;
		failed = true;
	}
	if (!failed)
		return;
	front_progress_done();
	fprintf(stderr, "%s: standard output: cannot write", front.cmdname);
	if (err)
		fprintf(stderr, ": %s", strerror(err));
	fputc('\n', stderr);
	_exit(front.trouble);
}

void front_report_warn(void *ctx, const struct hu_error *w)
{
	(void)ctx;
	if (front.verbosity < 0)
		return;
	front_progress_done();
	fprintf(stderr, "%s: warning: ", front.cmdname);
	if (w->path && *w->path) {
		print_path_escaped(stderr, w->path);
		fputs(": ", stderr);
	}
	fputs(hu_error_has_msg(w) ? w->msg : "", stderr);
	if (w->err)
		fprintf(stderr, ": %s", strerror(w->err));
	fputc('\n', stderr);
}

int refuse_images(const struct cmd *c, int argc, char **argv, int first,
		  const char *what)
{
	for (int i = first; i < argc; i++)
		if (hu_oci_operand(argv[i]))
			return cmd_usage_error(c, "%s: %s cannot take an image "
					       "(its layers are read only, "
					       "from the layout's blobs); "
					       "'hunion merge -o DIR %s' "
					       "makes a tree of it", argv[i],
					       what, argv[i]);
	return 0;
}

bool operands_have_tarballs(char *const *ops, int n)
{
	struct stat st;

	for (int i = 0; i < n; i++)
		if (hu_oci_operand(ops[i]) ||
		    (stat(ops[i], &st) == 0 && S_ISREG(st.st_mode)))
			return true;
	return false;
}

int layer_cache_open(struct layer_opts *lo, struct hu_error *e)
{
	struct hu_error w = { 0 };

	lo->stack.pcache = NULL;
	if (lo->no_cache)
		return 0;
	if (lo->cache_dir)
		return hu_pcache_open(&lo->stack.pcache, lo->cache_dir, e);
	if (hu_pcache_open(&lo->stack.pcache, NULL, &w) < 0) {
		hu_error_prefix(&w, NULL);
		front_report_warn(NULL, &w);
		hu_error_clear(&w);
	}
	return 0;
}

void layer_cache_close(struct layer_opts *lo)
{
	struct hu_error w = { 0 };

	if (!lo->stack.pcache)
		return;
	if (hu_pcache_trim(lo->stack.pcache, &w) < 0)
		front_report_warn(NULL, &w);
	hu_error_clear(&w);
	hu_pcache_close(lo->stack.pcache);
	lo->stack.pcache = NULL;
}

void note_indexes(const struct hu_stack *s)
{
	if (front.verbosity <= 0)
		return;
	for (size_t i = 0; i < s->n; i++) {
		const struct hu_layer *l = &s->layers[i];

		if (!l->pindex && !l->unpacked)
			continue;
		front_progress_done();
		if (l->unpacked)
			fprintf(stderr, "%s: %s: unpacked\n", front.cmdname,
				l->path);
		else
			fprintf(stderr, "%s: %s: path index %s%s\n",
				front.cmdname, l->path, l->pindex_cached ?
				"read from the cache" : "made",
				l->tar_fd >= 0 ? ", data read from the "
				"tarball" : "");
	}
}

void note_restarts(const struct hu_stack *s)
{
	if (front.verbosity <= 0)
		return;
	for (size_t i = 0; i < s->n; i++) {
		unsigned n = hu_layer_restarts(&s->layers[i]);

		if (n)
			fprintf(stderr, "%s: %s: tarball read again from its "
				"start %u time%s (files asked for behind the "
				"position reached)\n", front.cmdname,
				s->layers[i].path, n, n == 1 ? "" : "s");
	}
}

int layer_opt(const struct cmd *c, struct layer_opts *lo,
	      const struct parsed_opt *o)
{
	if (!strcmp(o->name, "format")) {
		if (hu_format_parse(o->arg, &lo->stack.format) < 0) {
			cmd_usage_error(c, "invalid --format '%s' (choose "
					"auto, union, overlay or oci)", o->arg);
			return -1;
		}
	} else if (!strcmp(o->name, "userxattr")) {
		lo->stack.userxattr = true;
	} else if (!strcmp(o->name, "platform")) {
		lo->stack.platform = o->arg;
	} else if (!strcmp(o->name, "verbose")) {
		front.verbosity = 1;
	} else if (!strcmp(o->name, "quiet")) {
		front.verbosity = -1;
	} else if (!strcmp(o->name, "json")) {
		lo->json = true;
	} else if (!strcmp(o->name, "dry-run")) {
		lo->dry_run = true;
	} else if (!strcmp(o->name, "cache-dir")) {
		lo->cache_dir = o->arg;
	} else if (!strcmp(o->name, "no-cache")) {
		lo->no_cache = true;
	} else if (!strcmp(o->name, "lowerdir") ||
		   !strcmp(o->name, "upperdir")) {
		/* once each: cmd_parse() refuses a second one */
		*(o->name[0] == 'l' ? &lo->lowerdir : &lo->upperdir) = o->arg;
	} else {
		return progress_opt(c, o);
	}
	return 1;
}

/* What layer_operands() made lives as long as the argv it replaces. */
static struct hu_mount_spec lowerdir_layers;
static char **stack_argv;

static void free_stack_argv(void)
{
	hu_mount_spec_free(&lowerdir_layers);
	free(stack_argv);
}

int layer_operands(const struct cmd *c, const struct layer_opts *lo,
		   int *argc, char ***argv, int first, int after)
{
	int nops = *argc - first - after, k = 0;
	struct hu_error e = { 0 };
	char **v;

	if (lo->upperdir && !lo->lowerdir)
		return cmd_usage_error(c, "--upperdir goes with --lowerdir "
				       "(the layers beneath it)");
	if (lo->upperdir && nops > 0)
		return cmd_usage_error(c, "--upperdir with layer operands: "
				       "give the layers beneath the upper "
				       "either with --lowerdir (top first) "
				       "or as operands (bottom first, the "
				       "upper last), not both");
	if (!lo->lowerdir)
		return 0;
	if (hu_lowerdir_parse(lo->lowerdir, &lowerdir_layers, &e) < 0) {
		cmd_usage_error(c, "--lowerdir: %s", e.msg);
		hu_error_clear(&e);
		return -1;
	}
	v = calloc((size_t)*argc + lowerdir_layers.n + 2, sizeof(*v));
	if (!v)
		return cmd_usage_error(c, "out of memory");
	stack_argv = v;
	if (atexit(free_stack_argv) != 0)
		return cmd_usage_error(c, "out of memory");
	for (int i = 0; i < first; i++)
		v[k++] = (*argv)[i];
	for (size_t i = 0; i < lowerdir_layers.n; i++)
		v[k++] = lowerdir_layers.layers[i];
	for (int i = first; i < first + nops; i++)
		v[k++] = (*argv)[i];
	if (lo->upperdir)
		v[k++] = (char *)lo->upperdir;
	for (int i = *argc - after; i < *argc; i++)
		v[k++] = (*argv)[i];
	*argc = k;
	*argv = v;
	return 0;
}

void warn_live_layers(const struct hu_stack *s, const struct hu_report *r)
{
	struct hu_error e = { 0 };

	if (hu_warn_mounted(s, NULL, -1, "the result may be torn (read "
			    "while it changes): unmount it first for a "
			    "consistent one", r, &e) < 0)
		front_report_warn(NULL, &e);
	hu_error_clear(&e);
}

/* Decode one UTF-8 sequence at @s; its length, or 0 when invalid. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n;
	unsigned int cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		n = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* The JSON string of @s: valid UTF-8 whatever @s holds.  A byte that is
 * not part of a UTF-8 character is written as the four characters \xNN,
 * as the text listings write it (JSON has no escape for a byte, and a
 * lone surrogate \udcNN is no character: strict parsers refuse it);
 * json_field() then adds the exact bytes. */
void json_print_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	while (*p) {
		size_t n = utf8_len(p);

		if (*p == '"' || *p == '\\') {
			fprintf(f, "\\%c", *p++);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\u%04x", *p++);
		} else if (n == 0) {
			fprintf(f, "\\\\x%02x", *p++);
		} else {
			fwrite(p, 1, n, f);
			p += n;
		}
	}
	fputc('"', f);
}

static bool utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t n; *p; p += n)
		if ((n = utf8_len(p)) == 0)
			return false;
	return true;
}

/* @s in base64 (RFC 4648, with padding), as a JSON string. */
static void json_base64(FILE *f, const char *s)
{
	static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				     "abcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s);

	fputc('"', f);
	for (size_t i = 0; i < len; i += 3) {
		unsigned long v = (unsigned long)p[i] << 16;
		size_t left = len - i;

		if (left > 1)
			v |= (unsigned long)p[i + 1] << 8;
		if (left > 2)
			v |= p[i + 2];
		fputc(digits[v >> 18 & 63], f);
		fputc(digits[v >> 12 & 63], f);
		fputc(left > 1 ? digits[v >> 6 & 63] : '=', f);
		fputc(left > 2 ? digits[v & 63] : '=', f);
	}
	fputc('"', f);
}

void json_field(FILE *f, const char *key, const char *s)
{
	fprintf(f, "\"%s\":", key);
	json_print_string(f, s);
	if (utf8_valid(s))
		return;
	fprintf(f, ",\"%s_b64\":", key);
	json_base64(f, s);
}

void print_path_escaped(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		size_t n = utf8_len(p);

		if (*p == '\\') {
			fputs("\\\\", f);
			p++;
		} else if (*p == '\n') {
			fputs("\\n", f);
			p++;
		} else if (*p == '\t') {
			fputs("\\t", f);
			p++;
		} else if (*p < 0x20 || *p == 0x7f || n == 0) {
			fprintf(f, "\\x%02x", *p++);
		} else {
			fwrite(p, 1, n, f);
			p += n;
		}
	}
}
