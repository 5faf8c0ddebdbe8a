/* SPDX-License-Identifier: MIT */
/* lib/oci/: the operand oci:DIR[:REF], platforms, the parsers, and the
 * choice of an image by REF in a small layout built here. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci/oci.h"
#include "testutil.h"

static void parses(const char *arg, const char *layout, const char *ref)
{
	struct hu_error e = { 0 };
	char *l, *r;

	cr_assert_eq(hu_oci_operand_parse(arg, &l, &r, &e), 0, "%s: %s", arg,
		     e.msg);
	cr_expect_str_eq(l, layout, "%s", arg);
	if (ref)
		cr_expect_str_eq(r ? r : "(none)", ref, "%s", arg);
	else
		cr_expect_null(r, "%s", arg);
	free(l);
	free(r);
}

Test(oci, operand_splits_at_the_last_colon_before_a_tag)
{
	parses("oci:img", "img", NULL);
	parses("oci:img:latest", "img", "latest");
	parses("oci:/a:b/img:v1.2_x-y", "/a:b/img", "v1.2_x-y");
	/* what follows the last ':' is no tag: all of it is DIR */
	parses("oci:/a:b/c", "/a:b/c", NULL);
	/* an empty REF names a DIR holding ':' */
	parses("oci:a:b:", "a:b", NULL);
	parses("oci:x:@sha256:0123456789abcdef0123456789abcdef0123456789abcdef"
	       "0123456789abcdef", "x", "@sha256:0123456789abcdef0123456789"
	       "abcdef0123456789abcdef0123456789abcdef");
}

Test(oci, operand_refusals)
{
	struct hu_error e = { 0 };
	char *l, *r;

	cr_expect(hu_oci_operand("oci:x"));
	cr_expect(!hu_oci_operand("./oci:x"));
	cr_expect_eq(hu_oci_operand_parse("oci:", &l, &r, &e), -1);
	hu_error_clear(&e);
	cr_expect_eq(hu_oci_operand_parse("oci::t", &l, &r, &e), -1);
	hu_error_clear(&e);
	cr_expect_eq(hu_oci_operand_parse("oci:x:@sha256:12", &l, &r, &e), -1);
	hu_error_clear(&e);
}

Test(oci, platform_parse_and_match)
{
	struct oci_platform want, have;

	cr_assert_eq(oci_platform_parse("linux/arm64/v8", &want), 0);
	cr_expect_str_eq(want.variant, "v8");
	cr_expect_eq(oci_platform_parse("linux", &want), -1);
	cr_expect_eq(oci_platform_parse("/amd64", &want), -1);
	cr_expect_eq(oci_platform_parse("linux/arm/v7/x", &want), -1);
	cr_assert_eq(oci_platform_parse("linux/arm64", &want), 0);
	cr_assert_eq(oci_platform_parse("linux/arm64/v8", &have), 0);
	cr_expect(oci_platform_match(&want, &have));
	cr_expect(oci_platform_match(&have, &want));	/* v8 is arm64's none */
	cr_assert_eq(oci_platform_parse("linux/arm/v7", &want), 0);
	cr_assert_eq(oci_platform_parse("linux/arm/v6", &have), 0);
	cr_expect(!oci_platform_match(&want, &have));
	cr_assert_eq(oci_platform_parse("linux/arm", &want), 0);
	cr_expect(oci_platform_match(&want, &have));	/* none asked: any */
	cr_assert_eq(oci_platform_parse("windows/amd64", &have), 0);
	cr_assert_eq(oci_platform_parse("linux/amd64", &want), 0);
	cr_expect(!oci_platform_match(&want, &have));
	oci_platform_host(&have);
	cr_expect_str_eq(have.os, "linux");
	cr_expect(strcmp(have.arch, "x86_64") != 0);	/* Go's names */
}

Test(oci, media_types)
{
	cr_expect_eq(oci_media_type("application/vnd.oci.image.layer.v1.tar"
				    "+zstd")->comp, OCI_COMP_ZSTD);
	cr_expect_eq(oci_media_type("application/vnd.docker.image.rootfs."
				    "foreign.diff.tar.gzip")->kind,
		     OCI_KIND_LAYER);
	cr_expect_null(oci_media_type("application/vnd.oci.image.layer.v1."
				      "tar+gzip+encrypted"));
	cr_expect(oci_media_type_encrypted("application/vnd.oci.image.layer."
					   "v1.tar+gzip+encrypted"));
	cr_expect_eq(oci_media_type("application/vnd.docker.distribution."
				    "manifest.list.v2+json")->kind,
		     OCI_KIND_INDEX);
}

Test(oci, index_parse_refuses_bad_descriptors)
{
	struct hu_error e = { 0 };
	struct oci_index x;
	const char *bad[] = {
		"[]", "{}", "{\"manifests\":{}}",
		"{\"manifests\":[{\"digest\":\"sha256:00\",\"size\":1,"
		"\"mediaType\":\"m\"}]}",
		"{\"manifests\":[{\"digest\":\"sha512:00\",\"size\":1,"
		"\"mediaType\":\"m\"}]}",
		"{\"manifests\":[],\"manifests\":[]}",	/* duplicate key */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(oci_index_parse(bad[i], strlen(bad[i]), "t", 0, &x,
					     &e), -1, "%s", bad[i]);
		hu_error_clear(&e);
	}
}

Test(oci, index_parse_keeps_a_sha512_entry_with_its_tag_platform_and_why)
{
	struct hu_error e = { 0 };
	struct oci_index x;
	char text[512];

	snprintf(text, sizeof(text), "{\"manifests\":[{\"digest\":"
		 "\"sha512:%0128d\",\"mediaType\":\"m\",\"size\":1,"
		 "\"platform\":{\"os\":\"linux\",\"architecture\":"
		 "\"s390x\"},\"annotations\":{\""
		 "org.opencontainers.image.ref.name\":\"t\"}}]}", 0);
	cr_assert_eq(oci_index_parse(text, strlen(text), "index.json",
				     OCI_INDEX_KEEP_UNREADABLE, &x, &e), 0,
		     "%s", e.msg);
	cr_assert_eq(x.n, 1);
	cr_expect(x.v[0].unreadable);
	cr_expect_str_eq(x.v[0].tag, "t");
	cr_expect(x.v[0].has_platform);
	cr_expect_str_eq(x.v[0].platform.arch, "s390x");
	cr_expect(strstr(x.v[0].why, "sha512") != NULL, "%s", x.v[0].why);
	oci_index_free(&x);
	/* without the flag, refused */
	cr_expect_eq(oci_index_parse(text, strlen(text), "index.json", 0, &x,
				     &e), -1);
	hu_error_clear(&e);
}

/* ---- a layout built here: blobs under their digests ---- */

static void put_blob(const char *body, struct hu_oci_desc *d,
		     const char *media_type)
{
	struct hu_error e = { 0 };
	char rel[128];

	cr_assert_eq(oci_sha256(body, strlen(body), d->digest, &e), 0);
	d->size = strlen(body);
	snprintf(d->media_type, sizeof(d->media_type), "%s", media_type);
	snprintf(rel, sizeof(rel), "L/blobs/sha256/%s", d->digest + 7);
	tu_file(rel, body);
}

#define MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define INDEX "application/vnd.oci.image.index.v1+json"

/* A manifest of no layers, its config saying @arch; its descriptor. */
static struct hu_oci_desc image(const char *arch)
{
	struct hu_oci_desc config, m;
	char body[512];

	snprintf(body, sizeof(body), "{\"architecture\":\"%s\",\"os\":"
		 "\"linux\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}",
		 arch);
	put_blob(body, &config, "application/vnd.oci.image.config.v1+json");
	snprintf(body, sizeof(body), "{\"schemaVersion\":2,\"mediaType\":\""
		 MANIFEST "\",\"config\":{\"mediaType\":\"%s\",\"digest\":"
		 "\"%s\",\"size\":%llu},\"layers\":[]}", config.media_type,
		 config.digest, (unsigned long long)config.size);
	put_blob(body, &m, MANIFEST);
	return m;
}

static char *entry(const struct hu_oci_desc *d, const char *tag,
		   const char *arch)
{
	char *s;

	cr_assert(asprintf(&s, "{\"mediaType\":\"%s\",\"digest\":\"%s\","
			   "\"size\":%llu%s%s%s%s%s%s}", d->media_type,
			   d->digest, (unsigned long long)d->size,
			   tag ? ",\"annotations\":{\"org.opencontainers."
			   "image.ref.name\":\"" : "", tag ? tag : "",
			   tag ? "\"}" : "",
			   arch ? ",\"platform\":{\"os\":\"linux\","
			   "\"architecture\":\"" : "", arch ? arch : "",
			   arch ? "\"}" : "") >= 0);
	return s;
}

static void layout(const char *entries)
{
	char body[4096];

	tu_file("L/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");
	snprintf(body, sizeof(body), "{\"schemaVersion\":2,\"manifests\":"
		 "[%s]}", entries);
	tu_file("L/index.json", body);
}

static int open_ref(const char *ref, const char *platform,
		    struct hu_oci_desc *got)
{
	struct hu_oci_image *img;
	struct hu_error e = { 0 };

	if (hu_oci_image_open(AT_FDCWD, tu_path("L"), ref, platform, &img, &e) < 0) {
		hu_error_clear(&e);
		return -1;
	}
	*got = img->manifest;
	hu_oci_image_close(img);
	return 0;
}

Test(oci, ref_by_tag_digest_and_platform, .fini = tu_cleanup)
{
	struct hu_oci_desc a = image("amd64"), b = image("arm64"), got, ix;
	char *ea = entry(&a, NULL, "amd64"), *eb = entry(&b, NULL, "arm64");
	char *ta = entry(&a, "a", NULL), *tb = entry(&b, "b", NULL);
	char body[2048], *tix, *tix2;

	tu_mkdir("L/blobs/sha256");
	/* an index of two platforms, tagged "multi"; two tagged images */
	snprintf(body, sizeof(body), "{\"schemaVersion\":2,\"manifests\":"
		 "[%s,%s]}", ea, eb);
	put_blob(body, &ix, INDEX);
	tix = entry(&ix, "multi", NULL);
	snprintf(body, sizeof(body), "%s,%s,%s", ta, tb, tix);
	layout(body);
	cr_expect_eq(open_ref(NULL, NULL, &got), -1);	/* three: which? */
	cr_assert_eq(open_ref("b", NULL, &got), 0);
	cr_expect_str_eq(got.digest, b.digest);
	snprintf(body, sizeof(body), "@%s", a.digest);
	cr_assert_eq(open_ref(body, NULL, &got), 0);
	cr_expect_str_eq(got.digest, a.digest);
	cr_assert_eq(open_ref("multi", "linux/arm64", &got), 0);
	cr_expect_str_eq(got.digest, b.digest);
	cr_assert_eq(open_ref("multi", "linux/amd64", &got), 0);
	cr_expect_str_eq(got.digest, a.digest);
	cr_expect_eq(open_ref("multi", "linux/s390x", &got), -1);
	cr_expect_eq(open_ref("nosuch", NULL, &got), -1);
	/* one tag on two images: ambiguous */
	tix2 = entry(&b, "a", NULL);
	snprintf(body, sizeof(body), "%s,%s", ta, tix2);
	layout(body);
	cr_expect_eq(open_ref("a", NULL, &got), -1);
	/* the only image: no REF needed */
	layout(tb);
	cr_assert_eq(open_ref(NULL, NULL, &got), 0);
	cr_expect_str_eq(got.digest, b.digest);
	free(ea);
	free(eb);
	free(ta);
	free(tb);
	free(tix);
	free(tix2);
}
