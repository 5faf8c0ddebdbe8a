/* SPDX-License-Identifier: MIT */
/* -o oci:DIR:TAG of flatten and diff --oci (OPT_OCI_OUT in cmd.h): an
 * image written into a layout through lib/oci, its lower layers each the
 * OCI layer `diff --oci` writes over those beneath (or an image's blob as
 * it is), its top layer what the command fills; its config --config
 * FILE's, the bottom image's or a minimal one, with the --config.*
 * options over it (lib/oci/ociconfig.c), checked before anything is
 * written. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

/* One more value of a repeatable option, pointing into argv. */
static int push(const struct cmd *c, const char ***v, size_t *n,
		const char *arg)
{
	const char **p = realloc(*v, (*n + 1) * sizeof(**v));

	if (!p)
		return cmd_usage_error(c, "out of memory");
	p[(*n)++] = arg;
	*v = p;
	return 0;
}

/* --config.NAME: the list or value of the edit it changes. */
static int config_opt(const struct cmd *c, struct hu_oci_config_edit *ed,
		      const char *name, const char *arg)
{
	if (!strcmp(name, "cmd"))
		return push(c, &ed->cmd, &ed->ncmd, arg);
	if (!strcmp(name, "entrypoint"))
		return push(c, &ed->entrypoint, &ed->nentrypoint, arg);
	if (!strcmp(name, "env") || !strcmp(name, "label")) {
		if (!hu_oci_config_kv_valid(arg))
			return cmd_usage_error(c, "invalid --config.%s '%s' "
					       "(KEY=VALUE)", name, arg);
		return *name == 'e' ? push(c, &ed->env, &ed->nenv, arg) :
		       push(c, &ed->labels, &ed->nlabels, arg);
	}
	if (!strcmp(name, "exposedports")) {
		if (!hu_oci_config_port_valid(arg))
			return cmd_usage_error(c, "invalid --config."
					       "exposedports '%s' (PORT, "
					       "PORT/tcp, PORT/udp or "
					       "PORT/sctp; 1 to 65535)", arg);
		return push(c, &ed->ports, &ed->nports, arg);
	}
	if (!strcmp(name, "volume"))
		return push(c, &ed->volumes, &ed->nvolumes, arg);
	if (!strcmp(name, "user"))
		ed->user = arg;
	else if (!strcmp(name, "workingdir"))
		ed->workingdir = arg;
	return 0;
}

int oci_opt(const struct cmd *c, struct oci_args *oa,
	    const struct parsed_opt *o)
{
	if (!strcmp(o->name, "config"))
		oa->config = o->arg;
	else if (!strcmp(o->name, "history"))
		oa->history = o->arg;
	else if (!strcmp(o->name, "author"))
		oa->edit.author = o->arg;
	else if (!strncmp(o->name, "config.", 7)) {
		if (config_opt(c, &oa->edit, o->name + 7, o->arg) < 0)
			return -1;
	} else
		return 0;
	if (!oa->first_opt)
		oa->first_opt = o->name;
	return 1;
}

/* --config FILE: read and checked before anything is written, then the
 * --config.* changes over it, checked again. */
static int read_config(const struct cmd *c, struct oci_args *oa)
{
	struct hu_error e = { 0 };
	json_error_t je;
	json_t *j = NULL;
	char *text;
	int rc;

	/* a FIFO, say, that nobody writes: a signal ends the wait */
	if (front_interruptible(true))
		j = json_load_file(oa->config, JSON_REJECT_DUPLICATES, &je);
	front_interruptible(false);
	if (!j && hu_interrupted()) {
		fprintf(stderr, "%s: --config %s: interrupted\n",
			front.cmdname, oa->config);
		return -1;
	}
	if (!j && je.line < 0)	/* not read */
		return cmd_usage_error(c, "--config: %s", je.text);
	if (!j)
		return cmd_usage_error(c, "--config %s: %s (line %d)",
				       oa->config, je.text, je.line);
	if (!json_is_object(j)) {
		json_decref(j);
		return cmd_usage_error(c, "--config %s: not a JSON object",
				       oa->config);
	}
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!text)
		return cmd_usage_error(c, "out of memory");
	rc = hu_oci_config_apply(text, &oa->edit, &oa->config_text, &e);
	free(text);
	if (rc < 0)
		cmd_usage_error(c, "--config %s: %s", oa->config, e.msg);
	hu_error_clear(&e);
	return rc;
}

/* The --config.* changes alone, over an empty config: their values are
 * checked before anything is read or written. */
static int check_edit(const struct cmd *c, const struct oci_args *oa)
{
	struct hu_error e = { 0 };
	char *text;
	int rc = hu_oci_config_apply(NULL, &oa->edit, &text, &e);

	if (rc < 0)
		cmd_usage_error(c, "%s", e.msg);
	free(text);
	hu_error_clear(&e);
	return rc;
}

int oci_args_resolve(const struct cmd *c, struct oci_args *oa,
		     const char *out, struct tar_args *ta,
		     struct hu_tarout_opts *to)
{
	struct hu_error e = { 0 };
	int rc = out ? hu_ociout_parse(out, &oa->dir, &oa->tag, &e) : 0;

	if (rc < 0) {
		cmd_usage_error(c, "%s: %s", e.path, e.msg);
		hu_error_clear(&e);
		return -1;
	}
	if (rc == 0 && oa->first_opt)
		return cmd_usage_error(c, "--%s needs -o oci:DIR:TAG",
				       oa->first_opt);
	if (rc == 0)
		return 0;
	if (ta->descriptor)
		return cmd_usage_error(c, "--descriptor: an image holds its "
				       "descriptors (-o oci:...)");
	if (oa->config ? read_config(c, oa) < 0 : check_edit(c, oa) < 0)
		return -1;
	/* An image's layers are gzip unless --compress says otherwise: the
	 * media type every reader takes. */
	if (tar_args_resolve(c, ta, NULL, to) < 0)
		return -1;
	return 1;
}

void oci_args_free(struct oci_args *oa)
{
	free(oa->dir);
	free(oa->tag);
	free(oa->config_text);
	free(oa->edit.cmd);
	free(oa->edit.entrypoint);
	free(oa->edit.env);
	free(oa->edit.labels);
	free(oa->edit.ports);
	free(oa->edit.volumes);
}

/* A config of the image read that is no config to write: the image
 * named (its layout and REF), as "LAYOUT:REF: config: ...". */
static int oci_error_config(struct hu_error *e, const struct hu_oci_image *im)
{
	char *msg = e->msg;	/* taken whole: messages are not cut */

	e->msg = NULL;
	hu_error_clear(e);
	hu_error_set(e, 0, im->layout, "%s%sits config: %s",
		     im->ref ? im->ref : "", im->ref ? ": " : "",
		     msg ? msg : "");
	free(msg);
	return -1;
}

/* Layer @i of the stack as diff --oci writes it over those beneath. */
struct lower_fill {
	struct hu_stack sub;
	struct hu_changes_opts co;
	bool opaque_markers;
};

static int fill_lower(void *ctx, struct hu_tarout *t, struct hu_error *e)
{
	struct lower_fill *f = ctx;

	return hu_changes_write_tar(&f->sub, &f->co, f->opaque_markers, t, e);
}

static int write_lower(struct hu_ociout *w, const struct hu_stack *s,
		       size_t i, const struct oci_write *ow,
		       struct hu_error *e)
{
	struct hu_report report = front_report();
	struct lower_fill f = {
		.sub = { .n = i + 1, .layers = s->layers,
			 .problems = s->problems, .images = s->images,
			 .nimages = s->nimages },
		.co = { .base = i, .report = &report },
		.opaque_markers = ow->opaque_markers,
	};
	struct hu_digests d;
	char *by;
	int rc;

	if (asprintf(&by, "hunion: layer %s", s->layers[i].path) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	/* The hook for image layers: their blobs as they are. */
	rc = hu_ociout_reuse_layer(w, &s->layers[i], by, e);
	if (rc == 0)
		rc = hu_ociout_layer(w, ow->to, fill_lower, &f, by, &d, e);
	front_progress_done();
	free(by);
	if (rc >= 0 && front.verbosity > 0)
		fprintf(stderr, "%s: layer %zu: %s\n", front.cmdname, i,
			s->layers[i].path);
	return rc < 0 ? -1 : 0;
}

int oci_write(const struct oci_args *oa, const struct hu_stack *s,
	      const struct oci_write *ow, struct hu_error *e)
{
	const struct hu_layer *bottom = &s->layers[0];
	struct hu_ociout_opts o = {
		.config = oa->config_text, .config_name = oa->config,
		.history = oa->history, .command = ow->command, .stack = s,
	};
	const char *sde = getenv("SOURCE_DATE_EPOCH");
	struct hu_ociout *w;
	struct hu_oci_desc m;
	struct hu_digests d;
	char *config = NULL;
	int rc = -1;

	/* The bottom image's config (env, entrypoint, cmd, labels) is the
	 * new image's, unless --config gives one; the --config.* changes
	 * go over it (--config's text has them already). */
	if (!o.config && bottom->image) {
		struct hu_oci_config_edit ed = oa->edit;

		ed.platform_of_layers = true;
		if (hu_oci_config_apply(bottom->image->config_json, &ed,
					&config, e) < 0)
			return oci_error_config(e, bottom->image);
		o.config = config;
		o.config_name = bottom->image->layout;
	} else if (!o.config) {
		if (hu_oci_config_apply(NULL, &oa->edit, &config, e) < 0)
			return -1;
		o.config = config;
	}
	if (sde && *sde) {
		o.created_set = true;
		o.created = strtoll(sde, NULL, 10);	/* checked by
							 * tar_args_resolve */
	}
	if (hu_ociout_open(&w, oa->dir, &o, e) < 0) {
		free(config);
		return -1;
	}
	for (size_t i = 0; i < ow->nkeep; i++)
		if (write_lower(w, s, i, ow, e) < 0)
			goto out;
	if (hu_ociout_layer(w, ow->to, ow->fill, ow->ctx, NULL, &d, e) < 0)
		goto out;
	front_progress_done();
	if (hu_ociout_commit(w, oa->tag, &m, e) < 0)
		goto out;
	if (front.verbosity > 0)
		fprintf(stderr, "%s: wrote oci:%s:%s: top layer %s, diffID "
			"%s; manifest %s\n", front.cmdname, oa->dir, oa->tag,
			d.digest, d.diff_id, m.digest);
	rc = 0;
out:
	hu_ociout_close(w);
	free(config);
	return rc;
}

void print_would_write_image(const struct oci_args *oa, size_t nlayers,
			     const struct hu_tarout_opts *to)
{
	printf("would write oci:%s:%s: an image of %zu %s, %s\n", oa->dir,
	       oa->tag, nlayers, plural(nlayers, "layer", "layers"),
	       hu_compress_name(to->compress));
}
