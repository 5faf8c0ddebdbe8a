/* SPDX-License-Identifier: MIT */
/*
 * An image in an OCI image layout, the operand oci:DIR[:REF]: the operand
 * read, index.json's entry chosen by REF (a tag, or @sha256:...), image
 * indexes (OCI or Docker manifest lists, nested) resolved to a platform,
 * the manifest and config read and verified (blob.c) and parsed
 * (parse.c).  The layer blobs themselves are checked as they are read
 * (tarsrc.c): here only that each is there, a regular file of its size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "internal.h"
#include "oci/oci.h"

/* ---- operands, tags, platforms ---- */

bool oci_tag_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 128 || s[0] == '.' || s[0] == '-')
		return false;
	for (; *s; s++)
		if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') &&
		    !(*s >= '0' && *s <= '9') && !strchr("._-", *s))
			return false;
	return true;
}

bool hu_oci_operand(const char *arg)
{
	return strncmp(arg, "oci:", 4) == 0;
}

int hu_oci_operand_parse(const char *arg, char **layout, char **ref,
			 struct hu_error *e)
{
	const char *s = arg + 4, *at = NULL, *colon = strrchr(s, ':');
	size_t dlen = strlen(s);
	bool has_ref = false;

	*layout = *ref = NULL;
	if (!hu_oci_operand(arg))
		return hu_error_set(e, EINVAL, arg, "not oci:DIR[:REF]");
	for (const char *p = strstr(s, ":@"); p; p = strstr(p + 1, ":@"))
		at = p;
	if (at) {
		if (!oci_digest_valid(at + 2))
			return hu_error_set(e, 0, arg, "'%.80s' is no digest "
					    "(@sha256: and 64 lowercase hex "
					    "digits)", at + 1);
		dlen = (size_t)(at - s);
		*ref = strdup(at + 1);
		has_ref = true;
	} else if (colon && (!colon[1] || oci_tag_valid(colon + 1))) {
		dlen = (size_t)(colon - s);
		has_ref = colon[1] != '\0';
		if (has_ref)
			*ref = strdup(colon + 1);
	}
	if (dlen == 0)
		return free(*ref), *ref = NULL,
		       hu_error_set(e, 0, arg, "no layout directory: "
				    "oci:DIR[:REF]");
	*layout = strndup(s, dlen);
	if (!*layout || (has_ref && !*ref)) {
		free(*layout);
		free(*ref);
		*layout = *ref = NULL;
		return hu_error_set(e, ENOMEM, arg, "out of memory");
	}
	return 0;
}


int oci_platform_parse(const char *s, struct oci_platform *p)
{
	const char *a = strchr(s, '/'), *v;
	size_t n;

	memset(p, 0, sizeof(*p));
	if (!a || a == s)
		return -1;
	v = strchr(a + 1, '/');
	n = (size_t)(a - s);
	if (n >= sizeof(p->os))
		return -1;
	memcpy(p->os, s, n);
	n = v ? (size_t)(v - a - 1) : strlen(a + 1);
	if (n == 0 || n >= sizeof(p->arch))
		return -1;
	memcpy(p->arch, a + 1, n);
	if (v) {
		if (!v[1] || strchr(v + 1, '/') ||
		    strlen(v + 1) >= sizeof(p->variant))
			return -1;
		oci_copy_field(p->variant, sizeof(p->variant), v + 1);
	}
	return 0;
}

void oci_platform_host(struct oci_platform *p)
{
	/* uname's machine names and Go's (GOARCH, with GOARM's variant) */
	static const struct { const char *machine, *arch, *variant; } map[] = {
		{ "x86_64", "amd64", "" }, { "aarch64", "arm64", "" },
		{ "armv7l", "arm", "v7" }, { "armv6l", "arm", "v6" },
		{ "i686", "386", "" }, { "i386", "386", "" },
		{ "ppc64le", "ppc64le", "" }, { "s390x", "s390x", "" },
		{ "riscv64", "riscv64", "" }, { "loongarch64", "loong64", "" },
		{ "mips64", "mips64le", "" },
	};
	struct utsname u;

	memset(p, 0, sizeof(*p));
	oci_copy_field(p->os, sizeof(p->os), "linux");
	if (uname(&u) < 0)
		return;
	oci_copy_field(p->arch, sizeof(p->arch), u.machine);
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (strcmp(u.machine, map[i].machine) == 0) {
			oci_copy_field(p->arch, sizeof(p->arch), map[i].arch);
			oci_copy_field(p->variant, sizeof(p->variant),
				   map[i].variant);
		}
	}
}

/* arm64's only variant is v8: none and "v8" are one. */
static const char *variant_of(const struct oci_platform *p)
{
	if (strcmp(p->arch, "arm64") == 0 && strcmp(p->variant, "v8") == 0)
		return "";
	return p->variant;
}

bool oci_platform_match(const struct oci_platform *want,
			const struct oci_platform *have)
{
	if (strcmp(want->os, have->os) != 0 ||
	    strcmp(want->arch, have->arch) != 0)
		return false;
	return !*variant_of(want) ||
	       strcmp(variant_of(want), variant_of(have)) == 0;
}

static void platform_text(const struct oci_platform *p, char *out,
			  size_t size)
{
	snprintf(out, size, "%s/%s%s%s", p->os, p->arch, *p->variant ? "/" :
		 "", p->variant);
}

/* ---- the image an operand names ---- */

/* "tag=sha256:0123456789ab (linux/amd64), ..." into @out, cut with "..."
 * when it does not fit. */
static void list_text(const struct oci_index *x, char *out, size_t size)
{
	size_t k = 0;

	out[0] = '\0';
	for (size_t i = 0; i < x->n && k + 1 < size; i++) {
		const struct oci_entry *en = &x->v[i];
		char pl[96] = "";
		int w;

		if (en->has_platform) {
			pl[0] = ' ';
			platform_text(&en->platform, pl + 1, sizeof(pl) - 1);
		}
		w = snprintf(out + k, size - k, "%s%s%s%s%.19s%s", i ? ", " :
			     "", en->tag ? en->tag : "", en->tag ? " " : "",
			     en->unreadable ? "(unreadable)" : "@",
			     en->desc.digest, pl);
		if (w < 0 || (size_t)w >= size - k) {
			snprintf(out + (k > 4 ? k : 0),
				 size - (k > 4 ? k : 0), ", ...");
			return;
		}
		k += (size_t)w;
	}
}

static int refuse_choice(const struct oci_index *x, const char *layout,
			 const char *why, struct hu_error *e)
{
	char list[160];

	list_text(x, list, sizeof(list));
	return hu_error_set(e, 0, layout, "%s; it holds: %s", why,
			    x->n ? list : "nothing");
}

/* Entry @en, chosen, read: else why not. */
static int chosen_readable(const struct oci_entry *en, const char *layout,
			   struct hu_error *e)
{
	if (!en->unreadable)
		return 0;
	return hu_error_set(e, 0, layout, "the image%s%s cannot be read: %s",
			    en->tag ? " tagged " : "", en->tag ? en->tag : "",
			    en->why);
}

/* Are @a and @b one image?  An entry unreadable is none we can tell. */
static bool same_image(const struct oci_entry *a, const struct oci_entry *b)
{
	return !a->unreadable && !b->unreadable &&
	       strcmp(a->desc.digest, b->desc.digest) == 0;
}

/* The entry of index.json that @ref names (NULL: the only one).  Only
 * that one must be read: the others, of kinds hunion does not read, are
 * passed by. */
static int choose_top(const struct oci_index *x, const char *layout,
		      const char *ref, const struct oci_entry **out,
		      struct hu_error *e)
{
	const struct oci_entry *found = NULL;
	char why[200];	/* a tag is at most 128 bytes */

	for (size_t i = 0; i < x->n; i++) {
		const struct oci_entry *en = &x->v[i];
		bool hit = !ref ? true : ref[0] == '@' ?
			   !en->unreadable &&
			   strcmp(en->desc.digest, ref + 1) == 0 :
			   en->tag && strcmp(en->tag, ref) == 0;

		if (!hit)
			continue;
		/* one image under two names is one image */
		if (found && !same_image(found, en)) {
			snprintf(why, sizeof(why), ref ? "%s names more than "
				 "one image" : "more than one image: name "
				 "one as oci:DIR:TAG or oci:DIR:@sha256:...",
				 ref);
			return refuse_choice(x, layout, why, e);
		}
		found = en;
	}
	if (!found) {
		snprintf(why, sizeof(why), ref ? "no image %s" : "no image",
			 ref);
		return refuse_choice(x, layout, why, e);
	}
	*out = found;
	return chosen_readable(found, layout, e);
}

struct resolve {
	struct hu_oci_image *img;
	struct oci_platform want;
	bool want_given;
	char chain[OCI_INDEX_DEPTH_MAX + 1][72];	/* indexes passed */
};

static int resolve_desc(struct resolve *r, const struct hu_oci_desc *d,
			size_t depth, struct hu_error *e);

/* The entry of index @x for the platform wanted: the first with the
 * variant asked, else the first that matches. */
static int choose_platform(struct resolve *r, const struct oci_index *x,
			   const struct hu_oci_desc *of, size_t depth,
			   struct hu_error *e)
{
	const struct oci_entry *pick = NULL;
	char want[96], why[256];

	for (size_t i = 0; i < x->n && !pick; i++)
		if (x->v[i].has_platform &&
		    oci_platform_match(&r->want, &x->v[i].platform))
			pick = &x->v[i];
	/* an index of one entry without a platform: that entry */
	if (!pick && x->n == 1 && !x->v[0].has_platform)
		pick = &x->v[0];
	platform_text(&r->want, want, sizeof(want));
	if (!pick) {
		snprintf(why, sizeof(why), "index %.19s...: no image for "
			 "platform %s%s", of->digest, want, r->want_given ?
			 "" : " (the host's; --platform chooses another)");
		return refuse_choice(x, r->img->layout, why, e);
	}
	/* the entry chosen that cannot be read: said so */
	if (pick->unreadable)
		return hu_error_set(e, 0, r->img->layout, "%s (the image "
				    "for %s)", pick->why, want);
	return resolve_desc(r, &pick->desc, depth + 1, e);
}

static int resolve_index(struct resolve *r, const struct hu_oci_desc *d,
			 size_t depth, struct hu_error *e)
{
	struct oci_index x;
	char *buf, what[96];
	size_t len;
	int rc;

	for (size_t i = 0; i < depth; i++)
		if (strcmp(r->chain[i], d->digest) == 0)
			return hu_error_set(e, 0, r->img->layout, "index %s "
					    "names itself, through %zu "
					    "indexes: a cycle, refused",
					    d->digest, depth - i);
	if (depth >= OCI_INDEX_DEPTH_MAX)
		return hu_error_set(e, 0, r->img->layout, "index %s: indexes "
				    "nested deeper than %d: refused",
				    d->digest, OCI_INDEX_DEPTH_MAX);
	oci_copy_field(r->chain[depth], sizeof(r->chain[depth]), d->digest);
	if (oci_doc_read(r->img->layout_fd, r->img->layout, d, &buf, &len,
			 e) < 0)
		return -1;
	snprintf(what, sizeof(what), "index %s", d->digest);
	rc = oci_index_parse(buf, len, what, OCI_INDEX_KEEP_UNREADABLE, &x,
			     e);
	free(buf);
	if (rc < 0)
		return oci_error_in(e, r->img->layout);
	rc = choose_platform(r, &x, d, depth, e);
	oci_index_free(&x);
	return rc;
}

static int resolve_manifest(struct resolve *r, const struct hu_oci_desc *d,
			    struct hu_error *e)
{
	struct hu_oci_image *img = r->img;
	char *buf, what[96];
	size_t len;
	int rc;

	img->manifest = *d;
	if (oci_doc_read(img->layout_fd, img->layout, d, &buf, &len, e) < 0)
		return -1;
	snprintf(what, sizeof(what), "manifest %s", d->digest);
	rc = oci_manifest_parse(buf, len, what, img, e);
	free(buf);
	if (rc < 0)
		return oci_error_in(e, img->layout);
	if (oci_doc_read(img->layout_fd, img->layout, &img->config,
			 &img->config_json, &img->config_len, e) < 0)
		return -1;
	snprintf(what, sizeof(what), "config %s", img->config.digest);
	if (oci_config_parse(img->config_json, img->config_len, what, img,
			     e) < 0)
		return oci_error_in(e, img->layout);
	return 0;
}

static int resolve_desc(struct resolve *r, const struct hu_oci_desc *d,
			size_t depth, struct hu_error *e)
{
	const struct oci_media_type *mt = oci_media_type(d->media_type);

	if (mt && mt->kind == OCI_KIND_INDEX)
		return resolve_index(r, d, depth, e);
	if (mt && mt->kind == OCI_KIND_MANIFEST)
		return resolve_manifest(r, d, e);
	return hu_error_set(e, 0, r->img->layout, "blob %s: media type "
			    "'%.100s' is no image manifest or index hunion "
			    "knows", d->digest, d->media_type);
}

/* Each layer blob there, a regular file of its size (read later). */
static int check_layers(const struct hu_oci_image *img, struct hu_error *e)
{
	for (size_t i = 0; i < img->nlayers; i++) {
		int fd = hu_oci_blob_open(img, &img->layers[i], e);

		if (fd < 0) {
			if (img->layer_urls[i])
				hu_error_set(e, 0, img->layout, "blob %s: a "
					     "layer given by URL only (a "
					     "foreign layer), not in the "
					     "layout: hunion does not fetch "
					     "it", img->layers[i].digest);
			return -1;
		}
		close(fd);
	}
	return 0;
}

static int check_layout_file(int fd, const char *layout, struct hu_error *e)
{
	char *buf;
	size_t len;
	int rc;

	if (oci_file_read(fd, layout, "oci-layout", &buf, &len, e) < 0)
		return -1;
	rc = oci_layout_version_check(buf, len, e);
	free(buf);
	return rc < 0 ? oci_error_in(e, layout) : 0;
}

static int read_top(int fd, const char *layout, struct oci_index *x,
		    struct hu_error *e)
{
	char *buf;
	size_t len;
	int rc;

	if (check_layout_file(fd, layout, e) < 0 ||
	    oci_file_read(fd, layout, "index.json", &buf, &len, e) < 0)
		return -1;
	rc = oci_index_parse(buf, len, "index.json",
			     OCI_INDEX_KEEP_UNREADABLE, x, e);
	free(buf);
	return rc < 0 ? oci_error_in(e, layout) : 0;
}

static int image_read(struct hu_oci_image *img, int dirfd,
		      const char *platform, struct hu_error *e)
{
	struct resolve r = { .img = img, .want_given = platform != NULL };
	const struct oci_entry *top = NULL;
	struct oci_index x;
	int rc;

	if (platform && oci_platform_parse(platform, &r.want) < 0)
		return hu_error_set(e, 0, NULL, "platform '%.64s': not "
				    "os/arch[/variant]", platform);
	if (!platform)
		oci_platform_host(&r.want);
	img->layout_fd = openat(dirfd, img->layout, O_RDONLY | O_DIRECTORY |
				O_CLOEXEC);
	if (img->layout_fd < 0)
		return hu_error_set(e, errno, img->layout, "cannot open the "
				    "image layout");
	if (read_top(img->layout_fd, img->layout, &x, e) < 0)
		return -1;
	rc = choose_top(&x, img->layout, img->ref, &top, e);
	if (rc == 0)
		rc = resolve_desc(&r, &top->desc, 0, e);
	oci_index_free(&x);
	if (rc == 0)
		rc = check_layers(img, e);
	return rc;
}

int hu_oci_image_open(int dirfd, const char *layout, const char *ref,
		      const char *platform, struct hu_oci_image **out,
		      struct hu_error *e)
{
	struct hu_oci_image *img = calloc(1, sizeof(*img));

	*out = NULL;
	if (!img)
		return hu_error_set(e, ENOMEM, layout, "out of memory");
	img->layout_fd = -1;
	img->layout = strdup(layout);
	img->ref = ref ? strdup(ref) : NULL;
	if (!img->layout || (ref && !img->ref)) {
		hu_oci_image_close(img);
		return hu_error_set(e, ENOMEM, layout, "out of memory");
	}
	if (image_read(img, dirfd, platform, e) < 0) {
		hu_oci_image_close(img);
		return -1;
	}
	*out = img;
	return 0;
}

char *hu_oci_layer_name(const struct hu_oci_image *img, size_t k)
{
	char *name;

	/* the operand again: REF after a ':' (a tag, or @sha256:...); the
	 * digest cut, then U+2026 in UTF-8 */
	if (asprintf(&name, "oci:%s%s%s layer %zu/%zu %.19s\xe2\x80\xa6",
		     img->layout, img->ref ? ":" : "",
		     img->ref ? img->ref : "", k + 1, img->nlayers,
		     img->layers[k].digest) < 0)
		return NULL;
	return name;
}

void hu_oci_image_close(struct hu_oci_image *img)
{
	if (!img)
		return;
	if (img->layout_fd >= 0)
		close(img->layout_fd);
	free(img->layout);
	free(img->ref);
	free(img->config_json);
	free(img->layers);
	free(img->layer_urls);
	free(img->diff_ids);
	free(img);
}
