/* SPDX-License-Identifier: MIT */
/* Writing OCI images: the oci:DIR:TAG operand, a tag moved in index.json,
 * the config and manifest JSON (keys sorted, history, rootfs, a base
 * config's own entries), a layout made and a blob put in it. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "oci/ociwrite.h"
#include "testutil.h"

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(ociwrite, .fini = teardown);

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"

/* ---- oci:DIR:TAG --------------------------------------------------------- */

Test(ociwrite, operand_dir_is_all_before_the_last_colon)
{
	struct hu_error e = { 0 };
	char *dir = NULL, *tag = NULL;

	cr_assert_eq(hu_ociout_parse("oci:a:b:v1.0", &dir, &tag, &e), 1);
	cr_expect_str_eq(dir, "a:b");
	cr_expect_str_eq(tag, "v1.0");
	free(dir);
	free(tag);
	cr_expect_eq(hu_ociout_parse("out.tar", &dir, &tag, &e), 0);
}

Test(ociwrite, operand_refuses_a_missing_or_invalid_tag)
{
	static const char *const bad[] = {
		"oci:dir", "oci::t", "oci:dir:", "oci:dir:.t", "oci:dir:-t",
		"oci:dir:a/b", "oci:dir:a@b",
	};
	char long_tag[160] = "oci:d:";

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct hu_error e = { 0 };
		char *dir = NULL, *tag = NULL;

		cr_expect_eq(hu_ociout_parse(bad[i], &dir, &tag, &e), -1,
			     "%s", bad[i]);
		hu_error_clear(&e);
	}
	memset(long_tag + 6, 'a', 129);
	{
		struct hu_error e = { 0 };
		char *dir = NULL, *tag = NULL;

		cr_expect_eq(hu_ociout_parse(long_tag, &dir, &tag, &e), -1);
		hu_error_clear(&e);
		long_tag[6 + 128] = '\0';	/* 128: the most allowed */
		cr_expect_eq(hu_ociout_parse(long_tag, &dir, &tag, &e), 1);
		free(dir);
		free(tag);
	}
}

/* ---- index.json ---------------------------------------------------------- */

static json_t *desc(const char *digest)
{
	return json_pack("{s:s, s:s, s:i}", "mediaType", HU_OCI_MT_MANIFEST,
			 "digest", digest, "size", 10);
}

static char *dump(const struct hu_ociw_index *ix)
{
	return json_dumps(ix->j, JSON_COMPACT);
}

/* index.json's text parsed as a writer parses it. */
static void index_of(const char *text, struct hu_ociw_index *ix)
{
	struct hu_error e = { 0 };

	cr_assert_eq(hu_ociw_index_parse(text, strlen(text), "lay",
					 OCI_INDEX_KEEP_UNREADABLE, ix, &e),
		     0, "%s", e.msg);
}

#define ENTRY(d) "{\"mediaType\":\"" HU_OCI_MT_MANIFEST "\",\"digest\":\"" \
	d "\",\"size\":10"

Test(ociwrite, set_tag_moves_the_tag_and_its_entry)
{
	struct hu_error e = { 0 };
	struct hu_ociw_index ix;

	index_of("{\"schemaVersion\":2,\"manifests\":["
		 ENTRY(D1) ",\"annotations\":{\"" HU_OCI_REF_NAME
		 "\":\"t\",\"other\":\"x\"}},"
		 ENTRY(D2) ",\"annotations\":{\"" HU_OCI_REF_NAME
		 "\":\"u\"}}]}", &ix);
	cr_assert_eq(hu_ociw_index_set_tag(&ix, "t", desc(D3), &e), 0);
	/* the image t named leaves the index, as umoci and skopeo do */
	tu_expect_str(dump(&ix),
		"{\"schemaVersion\":2,\"manifests\":["
		ENTRY(D2) ",\"annotations\":{\"" HU_OCI_REF_NAME "\":\"u\"}},"
		ENTRY(D3) ",\"annotations\":{\"" HU_OCI_REF_NAME
		"\":\"t\"}}]}");
	/* the entries parsed again: the tag moved */
	cr_expect_eq(ix.x.n, 2);
	cr_expect_str_eq(ix.x.v[1].tag, "t");
	hu_ociw_index_free(&ix);
}

Test(ociwrite, set_tag_keeps_an_untagged_entry_someone_else_wrote)
{
	struct hu_error e = { 0 };
	struct hu_ociw_index ix;

	index_of("{\"manifests\":[" ENTRY(D1) ",\"annotations\":{\""
		 HU_OCI_REF_NAME "\":\"t\"}}," ENTRY(D2) "}]}", &ix);
	/* D2 untagged holds its image; D1 tagged again: one entry */
	cr_assert_eq(hu_ociw_index_set_tag(&ix, "t", desc(D1), &e), 0);
	cr_assert_eq(hu_ociw_index_set_tag(&ix, "v", desc(D2), &e), 0);
	cr_assert_eq(hu_ociw_index_set_tag(&ix, "v", desc(D3), &e), 0);
	tu_expect_str(dump(&ix),
		"{\"manifests\":[" ENTRY(D2) "},"
		ENTRY(D1) ",\"annotations\":{\"" HU_OCI_REF_NAME "\":\"t\"}},"
		ENTRY(D3) ",\"annotations\":{\"" HU_OCI_REF_NAME
		"\":\"v\"}}]}");
	hu_ociw_index_free(&ix);
}

Test(ociwrite, rm_tag_removes_its_entries_and_refuses_a_tag_not_there)
{
	struct hu_error e = { 0 };
	struct hu_ociw_index ix;

	index_of("{\"manifests\":[" ENTRY(D1) ",\"annotations\":{\""
		 HU_OCI_REF_NAME "\":\"t\"}}," ENTRY(D2) "},"
		 ENTRY(D1) ",\"annotations\":{\"" HU_OCI_REF_NAME
		 "\":\"u\"}}]}", &ix);
	cr_assert_eq(hu_ociw_index_rm_tag(&ix, "t", &e), 0);
	tu_expect_str(dump(&ix),
		"{\"manifests\":[" ENTRY(D2) "},"
		ENTRY(D1) ",\"annotations\":{\"" HU_OCI_REF_NAME
		"\":\"u\"}}]}");
	cr_expect_eq(ix.x.n, 2);
	cr_expect_eq(hu_ociw_index_rm_tag(&ix, "t", &e), -1);
	cr_expect(strstr(e.msg, "no image tagged t") != NULL, "%s", e.msg);
	hu_error_clear(&e);
	hu_ociw_index_free(&ix);
}

Test(ociwrite, index_without_manifests_is_refused_and_umoci_init_s_is_empty)
{
	struct hu_error e = { 0 };
	struct hu_ociw_index ix;
	const char *bad = "{\"manifests\":{}}";

	cr_expect_eq(hu_ociw_index_parse(bad, strlen(bad), "lay", 0, &ix, &e),
		     -1);
	cr_expect(strstr(e.msg, "manifests") != NULL, "%s", e.msg);
	cr_expect_str_eq(e.path, "lay");
	hu_error_clear(&e);
	index_of("{\"schemaVersion\":2,\"manifests\":null}", &ix);
	cr_expect_eq(ix.x.n, 0);
	hu_ociw_index_free(&ix);
}

Test(ociwrite, set_tag_keeps_entries_it_cannot_read)
{
	struct hu_error e = { 0 };
	struct hu_ociw_index ix;

	index_of("{\"manifests\":[1,\"x\",{\"annotations\":5},"
		 "{\"digest\":7,\"annotations\":{\"" HU_OCI_REF_NAME
		 "\":\"t\"}}]}", &ix);
	cr_expect(ix.x.v[0].unreadable && ix.x.v[3].unreadable);
	cr_assert_eq(hu_ociw_index_set_tag(&ix, "t", desc(D1), &e), 0);
	/* the tag is taken from an entry it cannot read too, which goes */
	cr_expect_eq(json_array_size(json_object_get(ix.j, "manifests")), 4);
	cr_expect_str_eq(ix.x.v[3].tag, "t");
	cr_expect(!ix.x.v[3].unreadable);
	hu_ociw_index_free(&ix);
}

Test(ociwrite, index_without_keep_refuses_an_entry_it_cannot_read)
{
	struct hu_error e = { 0 };
	struct hu_ociw_index ix;
	const char *bad = "{\"manifests\":[{\"digest\":\"sha512:00\","
			  "\"mediaType\":\"m\",\"size\":1}]}";

	cr_expect_eq(hu_ociw_index_parse(bad, strlen(bad), "lay", 0, &ix, &e),
		     -1);
	cr_expect(strstr(e.msg, "sha512:00") != NULL, "%s", e.msg);
	hu_error_clear(&e);
}

/* ---- config and manifest ---------------------------------------------------- */

static struct hu_ociw_layer layer(const char *digest, const char *diff_id,
				  char *created_by)
{
	struct hu_ociw_layer l = { .size = 42, .created_by = created_by };

	strcpy(l.media_type, "application/vnd.oci.image.layer.v1.tar+gzip");
	strcpy(l.digest, digest);
	strcpy(l.diff_id, diff_id);
	return l;
}

Test(ociwrite, minimal_config_is_the_hosts_platform_with_sorted_keys)
{
	struct hu_ociw_layer ls[2] = { layer(D1, D2, "base"),
				       layer(D3, D1, NULL) };
	const char *os, *arch, *variant;
	struct hu_error e = { 0 };
	char *out, want[1024];

	hu_ociw_host_platform(&os, &arch, &variant);
	cr_assert_eq(hu_ociw_config_json(NULL, NULL, ls, 2, 1300000000, &out,
					 &e), 0);
	snprintf(want, sizeof(want),
		 "{\"architecture\":\"%s\",\"config\":{},"
		 "\"created\":\"2011-03-13T07:06:40Z\",\"history\":["
		 "{\"created\":\"2011-03-13T07:06:40Z\",\"created_by\":\"base\"},"
		 "{\"created\":\"2011-03-13T07:06:40Z\",\"created_by\":\"hunion\"}"
		 "],\"os\":\"linux\",\"rootfs\":{\"diff_ids\":[\"" D2 "\",\""
		 D1 "\"],\"type\":\"layers\"}%s%s%s}", arch,
		 variant ? ",\"variant\":\"" : "", variant ? variant : "",
		 variant ? "\"" : "");
	tu_expect_str(out, want);
}

Test(ociwrite, host_platform_uses_goarch_names)
{
	const char *os, *arch, *variant;

	hu_ociw_host_platform(&os, &arch, &variant);
	cr_expect_str_eq(os, "linux");
#if defined(__x86_64__)
	cr_expect_str_eq(arch, "amd64");
#endif
	cr_expect_neq(strcmp(arch, "x86_64"), 0);
}

Test(ociwrite, base_config_keeps_its_settings_not_its_layers)
{
	struct hu_ociw_layer ls[1] = { layer(D1, D3, "squash") };
	struct hu_error e = { 0 };
	char *out;

	cr_assert_eq(hu_ociw_config_json(
		"{\"os\":\"linux\",\"architecture\":\"arm64\","
		"\"config\":{\"Cmd\":[\"sh\"]},\"created\":\"x\","
		"\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"" D2 "\"]},"
		"\"history\":[{\"created_by\":\"ENV a\",\"empty_layer\":true},"
		"{\"created_by\":\"ADD\"}]}", "base.json", ls, 1, 0, &out,
		&e), 0);
	tu_expect_str(out,
		"{\"architecture\":\"arm64\",\"config\":{\"Cmd\":[\"sh\"]},"
		"\"created\":\"1970-01-01T00:00:00Z\",\"history\":["
		"{\"created_by\":\"ENV a\",\"empty_layer\":true},"
		"{\"created\":\"1970-01-01T00:00:00Z\",\"created_by\":\"squash\"}"
		"],\"os\":\"linux\",\"rootfs\":{\"diff_ids\":[\"" D3 "\"],"
		"\"type\":\"layers\"}}");
}

Test(ociwrite, base_config_must_be_an_object)
{
	struct hu_error e = { 0 };
	char *out = NULL;

	cr_expect_eq(hu_ociw_config_json("[1]", "c.json", NULL, 0, 0, &out,
					 &e), -1);
	cr_expect_str_eq(e.path, "c.json");
	hu_error_clear(&e);
	cr_expect_eq(hu_ociw_config_json("{\"history\":1}", "c.json", NULL, 0,
					 0, &out, &e), -1);
	hu_error_clear(&e);
}

Test(ociwrite, manifest_lists_config_and_layers_with_sorted_keys)
{
	struct hu_ociw_layer ls[1] = { layer(D1, D2, NULL) };
	struct hu_error e = { 0 };
	char *out;

	cr_assert_eq(hu_ociw_manifest_json(D3, 7, ls, 1, &out, &e), 0);
	tu_expect_str(out,
		"{\"config\":{\"digest\":\"" D3 "\",\"mediaType\":\""
		HU_OCI_MT_CONFIG "\",\"size\":7},\"layers\":[{\"digest\":\""
		D1 "\",\"mediaType\":\"application/vnd.oci.image.layer.v1."
		"tar+gzip\",\"size\":42}],\"mediaType\":\"" HU_OCI_MT_MANIFEST
		"\",\"schemaVersion\":2}");
}

/* ---- a layout ---------------------------------------------------------------- */

Test(ociwrite, layout_is_made_and_a_blob_put_once)
{
	struct hu_ociw_layout l;
	struct hu_error e = { 0 };
	char digest[72], path[4096];

	cr_assert_eq(hu_ociw_layout_open(&l, tu_path("lay"), true, LOCK_SH,
					 NULL, NULL, &e), 0, "%s", e.msg);
	cr_expect_str_eq(tu_read("lay/oci-layout"),
			 "{\"imageLayoutVersion\":\"1.0.0\"}");
	cr_expect_str_eq(tu_read("lay/index.json"), HU_OCIW_INDEX_EMPTY);
	cr_assert_eq(hu_ociw_blob_put(&l, "abc", 3, digest, &e), 0);
	cr_expect_str_eq(digest, "sha256:ba7816bf8f01cfea414140de5dae2223b0"
			 "0361a396177a9cb410ff61f20015ad");
	cr_assert_eq(hu_ociw_blob_put(&l, "abc", 3, digest, &e), 0);
	snprintf(path, sizeof(path), "lay/blobs/sha256/%s", digest + 7);
	cr_expect_str_eq(tu_read(path), "abc");
	hu_ociw_layout_close(&l);
}

Test(ociwrite, layout_refuses_a_directory_that_is_none)
{
	struct hu_ociw_layout l;
	struct hu_error e = { 0 };

	tu_file("notlay/x", "x");
	cr_expect_eq(hu_ociw_layout_open(&l, tu_path("notlay"), true,
					 LOCK_SH, NULL, NULL, &e), -1);
	cr_expect(strstr(e.msg, "not an OCI image layout") != NULL, "%s",
		  e.msg);
	hu_error_clear(&e);
	cr_expect(!tu_exists("notlay/oci-layout"));
}

/* ---- the hook for image layers ------------------------------------------------ */

Test(ociwrite, image_layer_blob_is_taken_as_it_is_and_checked)
{
	struct hu_ociout_opts o = { .command = "test", .created_set = true };
	struct hu_oci_desc ld[3] = { { .size = 12 }, { .size = 1 },
				     { .size = 12 } };
	char diff_ids[3][72] = { D1, D2, D3 }, src_path[4096], d[72];
	struct hu_ociw_layout src;
	struct hu_error e = { 0 };
	struct hu_oci_image im;
	struct hu_ociout *w;
	struct hu_oci_desc m;
	struct hu_layer l = { .image_layer = 0 };
	char *man;

	snprintf(src_path, sizeof(src_path), "%s", tu_path("src"));
	cr_assert_eq(hu_ociw_layout_open(&src, src_path, true, LOCK_SH, NULL,
					 NULL, &e),
		     0);
	/* gzip's magic first: the bytes its media type says */
	cr_assert_eq(hu_ociw_blob_put(&src, "\x1f\x8blayerbytes", 12, d, &e),
		     0);
	strcpy(ld[0].media_type,
	       "application/vnd.docker.image.rootfs.diff.tar.gzip");
	strcpy(ld[0].digest, d);
	/* a blob whose bytes are not its name's */
	strcpy(ld[1].media_type, "application/vnd.oci.image.layer.v1.tar");
	strcpy(ld[1].digest, D3);
	tu_file("src/blobs/sha256/"
		"3333333333333333333333333333333333333333333333333333333333333333",
		"x");
	/* the same gzip bytes under a zstd label */
	strcpy(ld[2].media_type, "application/vnd.oci.image.layer.v1.tar+zstd");
	strcpy(ld[2].digest, d);
	im = (struct hu_oci_image){ .layout = src_path,
				    .layout_fd = src.dirfd, .nlayers = 3,
				    .layers = ld, .diff_ids = diff_ids,
				    .config_json = (char *)
		"{\"history\":[{\"created_by\":\"ENV\",\"empty_layer\":true},"
		"{\"created_by\":\"ADD base\"}]}" };
	l.image = &im;

	cr_assert_eq(hu_ociout_open(&w, tu_path("dst"), &o, &e), 0);
	cr_expect_eq(hu_ociout_reuse_layer(w, &l, "from src", &e), 1,
		     "%s", e.msg);
	l.image_layer = 1;
	cr_expect_eq(hu_ociout_reuse_layer(w, &l, "bad", &e), -1);
	cr_expect(strstr(e.msg, D3) != NULL, "%s", e.msg);
	hu_error_clear(&e);
	l.image_layer = 2;
	cr_expect_eq(hu_ociout_reuse_layer(w, &l, "mislabelled", &e), -1);
	cr_expect(strstr(e.msg, "its media type says zstd, its bytes are "
			 "gzip") != NULL, "%s", e.msg);
	hu_error_clear(&e);
	cr_assert_eq(hu_ociout_commit(w, "t", &m, &e), 0, "%s", e.msg);
	hu_ociout_close(w);
	hu_ociw_layout_close(&src);

	/* the blob copied; the manifest names it with OCI's media type */
	snprintf(src_path, sizeof(src_path), "dst/blobs/sha256/%s", d + 7);
	cr_expect_str_eq(tu_read(src_path), "\x1f\x8blayerbytes");
	cr_expect(!tu_exists("dst/blobs/sha256/3333333333333333333333333333"
			     "333333333333333333333333333333333333"));
	snprintf(src_path, sizeof(src_path), "dst/blobs/sha256/%s",
		 m.digest + 7);
	man = tu_read(src_path);
	cr_expect(strstr(man, "\"mediaType\":\"application/vnd.oci.image."
			 "layer.v1.tar+gzip\",\"size\":12") != NULL, "%s", man);
	/* its history entry the source image's */
	json_t *mj = json_loads(man, 0, NULL);
	const char *cd = json_string_value(json_object_get(
		json_object_get(mj, "config"), "digest"));

	snprintf(src_path, sizeof(src_path), "dst/blobs/sha256/%s", cd + 7);
	cr_expect(strstr(tu_read(src_path), "\"created_by\":\"ADD base\"") !=
		  NULL, "%s", tu_read(src_path));
	json_decref(mj);
}

/* ---- gc ------------------------------------------------------------------------ */

static void count_removed(void *ctx, const char *name, uint64_t size)
{
	(*(int *)ctx)++;
}

/* A blob of @text put in @l; its digest in @d. */
static void put(struct hu_ociw_layout *l, const char *text, char d[72])
{
	struct hu_error e = { 0 };

	cr_assert_eq(hu_ociw_blob_put(l, text, strlen(text), d, &e), 0);
}

Test(ociwrite, gc_walks_nested_indexes_and_docker_manifests)
{
	char layer[72], config[72], man[72], list[72], stray[72], path[4096];
	char text[1024];
	struct hu_oci_gc_stats st;
	struct hu_ociw_layout l;
	struct hu_error e = { 0 };
	struct hu_ociw_index ix;
	int removed = 0;

	cr_assert_eq(hu_ociw_layout_open(&l, tu_path("lay"), true, LOCK_SH,
					 NULL, NULL, &e), 0);
	put(&l, "layer", layer);
	put(&l, "{}", config);
	snprintf(text, sizeof(text), "{\"schemaVersion\":2,\"config\":{"
		 "\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":2},"
		 "\"layers\":[{\"mediaType\":\"%s\",\"digest\":\"%s\","
		 "\"size\":5}]}", HU_OCI_MT_CONFIG, config,
		 "application/vnd.oci.image.layer.v1.tar", layer);
	put(&l, text, man);
	snprintf(text, sizeof(text), "{\"manifests\":[{\"mediaType\":\""
		 HU_DOCKER_MT_MANIFEST "\",\"digest\":\"%s\",\"size\":"
		 "%zu}]}", man, strlen(text));
	put(&l, text, list);
	put(&l, "stray", stray);
	snprintf(text, sizeof(text), "{\"manifests\":[{\"mediaType\":\""
		 HU_OCI_MT_INDEX "\",\"digest\":\"%s\",\"size\":%zu}]}",
		 list, strlen(text));
	index_of(text, &ix);
	cr_assert_eq(hu_ociw_index_write(&l, &ix, &e), 0);
	hu_ociw_index_free(&ix);
	hu_ociw_layout_close(&l);

	struct hu_oci_gc_opts o = { .removed = count_removed,
				    .ctx = &removed };

	cr_assert_eq(hu_oci_gc(tu_path("lay"), &o, &st, &e), 0, "%s", e.msg);
	cr_expect_eq(removed, 1);
	cr_expect_eq(st.kept, 4);
	snprintf(path, sizeof(path), "lay/blobs/sha256/%s", stray + 7);
	cr_expect(!tu_exists(path));
	snprintf(path, sizeof(path), "lay/blobs/sha256/%s", layer + 7);
	cr_expect(tu_exists(path));
}

Test(ociwrite, gc_refuses_a_manifest_that_is_not_its_digest)
{
	struct hu_oci_gc_stats st;
	struct hu_ociw_layout l;
	struct hu_error e = { 0 };
	char stray[72];
	struct hu_ociw_index ix;

	cr_assert_eq(hu_ociw_layout_open(&l, tu_path("lay"), true, LOCK_SH,
					 NULL, NULL, &e), 0);
	put(&l, "stray", stray);
	tu_file("lay/blobs/sha256/"
		"3333333333333333333333333333333333333333333333333333333333333333",
		"{}");
	index_of("{\"manifests\":[{\"mediaType\":\"" HU_OCI_MT_MANIFEST
		 "\",\"digest\":\"" D3 "\",\"size\":2}]}", &ix);
	cr_assert_eq(hu_ociw_index_write(&l, &ix, &e), 0);
	hu_ociw_index_free(&ix);
	hu_ociw_layout_close(&l);
	struct hu_oci_gc_opts o = { .dry_run = false };

	cr_expect_eq(hu_oci_gc(tu_path("lay"), &o, &st, &e), -1);
	cr_expect(strstr(e.msg, "sha256") != NULL, "%s", e.msg);
	hu_error_clear(&e);
	cr_expect_eq(st.removed, 0);
}

static void longest_removed(void *ctx, const char *name, uint64_t size)
{
	size_t *n = ctx;

	if (strlen(name) > *n)
		*n = strlen(name);
}

Test(ociwrite, gc_names_a_long_leftover_whole)
{
	struct hu_oci_gc_stats st;
	struct hu_ociw_layout l;
	struct hu_error e = { 0 };
	char name[300] = "lay/blobs/sha256/" HU_OCIW_TMP;
	size_t longest = 0;

	cr_assert_eq(hu_ociw_layout_open(&l, tu_path("lay"), true, LOCK_SH,
					 NULL, NULL, &e), 0);
	hu_ociw_layout_close(&l);
	/* a name of 255 bytes, the most a directory entry holds */
	memset(name + strlen(name), 'x', 255 - strlen(HU_OCIW_TMP));
	tu_file(name, "");
	struct hu_oci_gc_opts o = { .dry_run = true,
				    .removed = longest_removed,
				    .ctx = &longest };

	cr_assert_eq(hu_oci_gc(tu_path("lay"), &o, &st, &e), 0, "%s", e.msg);
	cr_expect_eq(longest, strlen("blobs/sha256/") + 255);
}
