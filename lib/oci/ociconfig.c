/* SPDX-License-Identifier: MIT */
/*
 * An image's config as hunion writes it: checked against the types the
 * image-spec (config.md) gives its fields before anything is written, so
 * that no image leaves hunion that skopeo, podman or umoci refuse, and
 * changed from the command line (--config.cmd, --config.env...) as umoci
 * config changes it.  A field that is null is taken as absent, as Go's
 * readers take it (Docker writes "Cmd": null).  Fields the spec does not
 * name (Docker's container_config, docker_version...) are left alone.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "oci/oci.h"

/* ---- the values of fields ---- */

bool hu_oci_config_kv_valid(const char *s)
{
	const char *eq = strchr(s, '=');

	return eq && eq != s;
}

static bool digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return n > 0;
}

bool hu_oci_config_port_valid(const char *s)
{
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	long port;

	if (!digits(s, n) || n > 5)
		return false;
	port = strtol(s, NULL, 10);
	if (port < 1 || port > 65535)
		return false;
	return !slash || !strcmp(slash, "/tcp") || !strcmp(slash, "/udp") ||
	       !strcmp(slash, "/sctp");
}

bool hu_oci_platform_valid(const char *s)
{
	struct oci_platform p;

	return oci_platform_parse(s, &p) == 0;
}

/* Two digits at @s in [lo, hi]. */
static bool two(const char *s, int lo, int hi)
{
	int v;

	if (!digits(s, 2))
		return false;
	v = (s[0] - '0') * 10 + (s[1] - '0');
	return v >= lo && v <= hi;
}

/* RFC 3339's date-time: YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM), the
 * form Go's time.RFC3339 reads. */
static bool rfc3339_valid(const char *s)
{
	if (strlen(s) < 20 || !digits(s, 4) || s[4] != '-' ||
	    !two(s + 5, 1, 12) || s[7] != '-' || !two(s + 8, 1, 31) ||
	    s[10] != 'T' || !two(s + 11, 0, 23) || s[13] != ':' ||
	    !two(s + 14, 0, 59) || s[16] != ':' || !two(s + 17, 0, 60))
		return false;
	s += 19;
	if (*s == '.') {
		size_t n = strspn(s + 1, "0123456789");

		if (n == 0)
			return false;
		s += 1 + n;
	}
	if (!strcmp(s, "Z"))
		return true;
	return (*s == '+' || *s == '-') && two(s + 1, 0, 23) && s[3] == ':' &&
	       two(s + 4, 0, 59) && s[6] == '\0';
}

/* ---- the checks: each names the field, as FIELD: must be ... ---- */

/* @o's member @key, NULL when absent or null. */
static json_t *member(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_null(v) ? NULL : v;
}

static int want_string(json_t *o, const char *where, const char *key,
		       bool time, struct hu_error *e)
{
	json_t *v = member(o, key);

	if (v && !json_is_string(v))
		return hu_error_set(e, 0, NULL, "%s%s: must be a string",
				    where, key);
	if (v && time && !rfc3339_valid(json_string_value(v)))
		return hu_error_set(e, 0, NULL, "%s%s: '%.40s' is not an "
				    "RFC 3339 time (2006-01-02T15:04:05Z)",
				    where, key, json_string_value(v));
	return 0;
}

/* An array of strings; @kv: each KEY=VALUE (Env). */
static int want_strings(json_t *o, const char *where, const char *key,
			bool kv, struct hu_error *e)
{
	json_t *v = member(o, key), *s;
	size_t i;

	if (v && !json_is_array(v))
		return hu_error_set(e, 0, NULL, "%s%s: must be an array of "
				    "strings", where, key);
	json_array_foreach(v, i, s) {
		if (!json_is_string(s))
			return hu_error_set(e, 0, NULL, "%s%s: must be an "
					    "array of strings", where, key);
		if (kv && !hu_oci_config_kv_valid(json_string_value(s)))
			return hu_error_set(e, 0, NULL, "%s%s[%zu]: '%.40s' "
					    "is not KEY=VALUE", where, key, i,
					    json_string_value(s));
	}
	return 0;
}

/* An object whose values are strings (Labels). */
static int want_string_map(json_t *o, const char *where, const char *key,
			   struct hu_error *e)
{
	json_t *v = member(o, key), *s;
	const char *k;

	if (v && !json_is_object(v))
		return hu_error_set(e, 0, NULL, "%s%s: must be an object of "
				    "strings", where, key);
	json_object_foreach(v, k, s)
		if (!json_is_string(s))
			return hu_error_set(e, 0, NULL, "%s%s.%.40s: must be "
					    "a string", where, key, k);
	return 0;
}

/* An object whose values are empty objects (ExposedPorts, Volumes);
 * @ports: each key a port. */
static int want_set(json_t *o, const char *where, const char *key,
		    bool ports, struct hu_error *e)
{
	json_t *v = member(o, key), *s;
	const char *k;

	if (v && !json_is_object(v))
		return hu_error_set(e, 0, NULL, "%s%s: must be an object of "
				    "empty objects", where, key);
	json_object_foreach(v, k, s) {
		if (!json_is_object(s) || json_object_size(s) != 0)
			return hu_error_set(e, 0, NULL, "%s%s.%.40s: must be "
					    "an empty object", where, key, k);
		if (ports && !hu_oci_config_port_valid(k))
			return hu_error_set(e, 0, NULL, "%s%s: '%.40s' is no "
					    "port (N, N/tcp, N/udp or "
					    "N/sctp)", where, key, k);
	}
	return 0;
}

static int check_exec(json_t *c, struct hu_error *e)
{
	json_t *x = member(c, "config");
	const char *w = "config.";

	if (x && !json_is_object(x))
		return hu_error_set(e, 0, NULL, "config: must be an object");
	if (!x)
		return 0;
	if (want_strings(x, w, "Cmd", false, e) < 0 ||
	    want_strings(x, w, "Entrypoint", false, e) < 0 ||
	    want_strings(x, w, "Env", true, e) < 0 ||
	    want_set(x, w, "ExposedPorts", true, e) < 0 ||
	    want_set(x, w, "Volumes", false, e) < 0 ||
	    want_string_map(x, w, "Labels", e) < 0 ||
	    want_string(x, w, "User", false, e) < 0 ||
	    want_string(x, w, "WorkingDir", false, e) < 0 ||
	    want_string(x, w, "StopSignal", false, e) < 0)
		return -1;
	return 0;
}

static int check_history(json_t *c, struct hu_error *e)
{
	json_t *h = member(c, "history"), *ent, *empty;
	char where[48];
	size_t i;

	if (h && !json_is_array(h))
		return hu_error_set(e, 0, NULL, "history: must be an array "
				    "of objects");
	json_array_foreach(h, i, ent) {
		snprintf(where, sizeof(where), "history[%zu].", i);
		if (!json_is_object(ent))
			return hu_error_set(e, 0, NULL, "history[%zu]: must "
					    "be an object", i);
		if (want_string(ent, where, "created", true, e) < 0 ||
		    want_string(ent, where, "created_by", false, e) < 0 ||
		    want_string(ent, where, "author", false, e) < 0 ||
		    want_string(ent, where, "comment", false, e) < 0)
			return -1;
		empty = member(ent, "empty_layer");
		if (empty && !json_is_boolean(empty))
			return hu_error_set(e, 0, NULL, "%sempty_layer: must "
					    "be true or false", where);
	}
	return 0;
}

static int config_check(json_t *c, struct hu_error *e)
{
	if (want_string(c, "", "architecture", false, e) < 0 ||
	    want_string(c, "", "os", false, e) < 0 ||
	    want_string(c, "", "variant", false, e) < 0 ||
	    want_string(c, "", "os.version", false, e) < 0 ||
	    want_strings(c, "", "os.features", false, e) < 0 ||
	    want_string(c, "", "author", false, e) < 0 ||
	    want_string(c, "", "created", true, e) < 0 ||
	    check_exec(c, e) < 0 || check_history(c, e) < 0)
		return -1;
	return 0;
}

int hu_oci_config_check(const char *buf, size_t len, struct hu_error *e)
{
	json_t *c = oci_json_load(buf, len, NULL, e);
	int rc;

	if (!c)
		return -1;
	rc = config_check(c, e);
	json_decref(c);
	return rc;
}

/* ---- the changes of the command line ---- */

static int set_strings(json_t *x, const char *key, const char **v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_string(v[i])) < 0) {
			json_decref(a);
			a = NULL;
		}
	return a ? json_object_set_new(x, key, a) : -1;
}

/* What @x.@key holds is added to: a container of type @t, made when
 * absent or null.  NULL when out of memory, and (@wrong) when it holds
 * another type: left so for the check to name. */
static json_t *container_at(json_t *x, const char *key, json_type t,
			    bool *wrong)
{
	json_t *o = member(x, key);

	*wrong = o && json_typeof(o) != t;
	if (o)
		return *wrong ? NULL : o;
	o = t == JSON_ARRAY ? json_array() : json_object();
	if (o && json_object_set_new(x, key, o) < 0)
		return NULL;
	return o;
}

/* Env KEY=VALUE: replaces its KEY's entry, as umoci does, else appended. */
static int add_env(json_t *env, const char *kv)
{
	size_t klen = (size_t)(strchr(kv, '=') - kv) + 1, i;
	const char *v;
	json_t *s;

	json_array_foreach(env, i, s)
		if ((v = json_string_value(s)) && !strncmp(v, kv, klen))
			return json_array_set_new(env, i, json_string(kv));
	return json_array_append_new(env, json_string(kv));
}

static int add_label(json_t *labels, const char *kv)
{
	const char *eq = strchr(kv, '=');
	char *key = strndup(kv, (size_t)(eq - kv));
	int rc = key ? json_object_set_new(labels, key, json_string(eq + 1)) :
		 -1;

	free(key);
	return rc;
}

/* @c's os/architecture[/variant] into @p: false when it has no os or
 * no architecture. */
static bool platform_of(json_t *c, struct oci_platform *p)
{
	const char *os = json_string_value(member(c, "os"));
	const char *arch = json_string_value(member(c, "architecture"));
	const char *v = json_string_value(member(c, "variant"));

	memset(p, 0, sizeof(*p));
	if (!os || !arch)
		return false;
	oci_copy_field(p->os, sizeof(p->os), os);
	oci_copy_field(p->arch, sizeof(p->arch), arch);
	oci_copy_field(p->variant, sizeof(p->variant), v ? v : "");
	return true;
}

/* @ed's platform against an image's own, whose layers are built for it:
 * refused when they differ, -1 (a relabelled image would not run). */
static int platform_keep(json_t *c, const struct hu_oci_config_edit *ed,
			 bool *keep, struct hu_error *e)
{
	struct oci_platform want, have;

	*keep = false;
	if (!ed->platform || !ed->platform_of_layers || !platform_of(c, &have))
		return 0;
	if (oci_platform_parse(ed->platform, &want) < 0 ||
	    !oci_platform_match(&want, &have))
		return hu_error_set(e, 0, NULL, "platform: %s/%s%s%s, not the "
				    "'%.64s' asked (its layers are built for "
				    "it)", have.os, have.arch, *have.variant ?
				    "/" : "", have.variant, ed->platform);
	*keep = true;
	return 0;
}

static int set_platform(json_t *c, const char *s)
{
	struct oci_platform p;

	if (oci_platform_parse(s, &p) < 0)
		return -1;
	json_object_del(c, "variant");
	if (json_object_set_new(c, "os", json_string(p.os)) < 0 ||
	    json_object_set_new(c, "architecture", json_string(p.arch)) < 0)
		return -1;
	return *p.variant ? json_object_set_new(c, "variant",
						json_string(p.variant)) : 0;
}

static int set_string(json_t *o, const char *key, const char *v)
{
	return v ? json_object_set_new(o, key, json_string(v)) : 0;
}

/* The additions of @ed (Env, Labels, ExposedPorts, Volumes) to @x. */
static int add(json_t *x, const struct hu_oci_config_edit *ed)
{
	json_t *env = NULL, *labels = NULL, *ports = NULL, *vols = NULL;
	bool wrong;
	int rc = 0;

	if (ed->nenv && !(env = container_at(x, "Env", JSON_ARRAY, &wrong)))
		return wrong ? 0 : -1;
	if (ed->nlabels &&
	    !(labels = container_at(x, "Labels", JSON_OBJECT, &wrong)))
		return wrong ? 0 : -1;
	if (ed->nports &&
	    !(ports = container_at(x, "ExposedPorts", JSON_OBJECT, &wrong)))
		return wrong ? 0 : -1;
	if (ed->nvolumes &&
	    !(vols = container_at(x, "Volumes", JSON_OBJECT, &wrong)))
		return wrong ? 0 : -1;
	for (size_t i = 0; rc == 0 && i < ed->nenv; i++)
		rc = add_env(env, ed->env[i]);
	for (size_t i = 0; rc == 0 && i < ed->nlabels; i++)
		rc = add_label(labels, ed->labels[i]);
	for (size_t i = 0; rc == 0 && i < ed->nports; i++)
		rc = json_object_set_new(ports, ed->ports[i], json_object());
	for (size_t i = 0; rc == 0 && i < ed->nvolumes; i++)
		rc = json_object_set_new(vols, ed->volumes[i], json_object());
	return rc;
}

/* @ed into @c: what it replaces is replaced whatever was there; what it
 * adds to is left as it is when of a wrong type, for the check to name
 * (-1: out of memory). */
static int edit(json_t *c, const struct hu_oci_config_edit *ed,
		bool keep_platform)
{
	bool wrong;
	json_t *x = container_at(c, "config", JSON_OBJECT, &wrong);
	int rc = 0;

	if (!x)
		return wrong ? 0 : -1;
	if (ed->ncmd)
		rc = set_strings(x, "Cmd", ed->cmd, ed->ncmd);
	if (rc == 0 && ed->nentrypoint)
		rc = set_strings(x, "Entrypoint", ed->entrypoint,
				 ed->nentrypoint);
	if (rc == 0)
		rc = add(x, ed);
	if (rc == 0)
		rc = set_string(x, "User", ed->user);
	if (rc == 0)
		rc = set_string(x, "WorkingDir", ed->workingdir);
	if (rc == 0)
		rc = set_string(c, "author", ed->author);
	if (rc == 0 && ed->platform && !keep_platform)
		rc = set_platform(c, ed->platform);
	return rc;
}

/* Each value given is one the config may hold. */
static int edit_check(const struct hu_oci_config_edit *ed,
		      struct hu_error *e)
{
	for (size_t i = 0; i < ed->nenv; i++)
		if (!hu_oci_config_kv_valid(ed->env[i]))
			return hu_error_set(e, 0, NULL, "config.Env: '%.40s' "
					    "is not KEY=VALUE", ed->env[i]);
	for (size_t i = 0; i < ed->nlabels; i++)
		if (!hu_oci_config_kv_valid(ed->labels[i]))
			return hu_error_set(e, 0, NULL, "config.Labels: "
					    "'%.40s' is not KEY=VALUE",
					    ed->labels[i]);
	for (size_t i = 0; i < ed->nports; i++)
		if (!hu_oci_config_port_valid(ed->ports[i]))
			return hu_error_set(e, 0, NULL, "config.ExposedPorts: "
					    "'%.40s' is no port", ed->ports[i]);
	if (ed->platform && !hu_oci_platform_valid(ed->platform))
		return hu_error_set(e, 0, NULL, "platform '%.64s': not "
				    "os/arch[/variant]", ed->platform);
	return 0;
}

int hu_oci_config_apply(const char *base, const struct hu_oci_config_edit *ed,
			char **out, struct hu_error *e)
{
	json_t *c;
	bool keep;
	int rc = -1;

	*out = NULL;
	if (edit_check(ed, e) < 0)
		return -1;
	c = base ? oci_json_load(base, strlen(base), NULL, e) : json_object();
	if (!c)
		return base ? -1 : hu_error_set(e, ENOMEM, NULL,
						"out of memory");
	/* the result is checked: a field the options replace may be
	 * repaired by them */
	if (platform_keep(c, ed, &keep, e) < 0)
		goto out;
	if (edit(c, ed, keep) < 0) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	if (config_check(c, e) < 0)
		goto out;
	*out = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
	rc = *out ? 0 : hu_error_set(e, ENOMEM, NULL, "out of memory");
out:
	json_decref(c);
	return rc;
}
