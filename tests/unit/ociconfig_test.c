/* SPDX-License-Identifier: MIT */
/* lib/oci/ociconfig.c: an image config checked against the types of
 * image-spec config.md, and the --config.* changes applied over one. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "oci/oci.h"

static void good(const char *json)
{
	struct hu_error e = { 0 };

	cr_expect_eq(hu_oci_config_check(json, strlen(json), &e), 0,
		     "%s: %s", json, e.msg);
	hu_error_clear(&e);
}

static void bad(const char *json, const char *msg)
{
	struct hu_error e = { 0 };

	cr_expect_eq(hu_oci_config_check(json, strlen(json), &e), -1, "%s",
		     json);
	cr_expect_str_eq(e.msg, msg, "%s", json);
	hu_error_clear(&e);
}

Test(ociconfig, the_types_of_the_spec)
{
	good("{}");
	good("{\"os\":\"linux\",\"architecture\":\"arm64\",\"variant\":\"v8\","
	     "\"config\":{\"Cmd\":[\"sh\"],\"Env\":[\"A=\",\"B=1=2\"],"
	     "\"ExposedPorts\":{\"80\":{},\"53/udp\":{},\"1/sctp\":{}},"
	     "\"Volumes\":{\"/v\":{}},\"Labels\":{\"a\":\"\"}}}");
	bad("{\"config\":{\"Cmd\":\"sh\"}}",
	    "config.Cmd: must be an array of strings");
	bad("{\"architecture\":7}", "architecture: must be a string");
	bad("{\"config\":{\"ExposedPorts\":{\"65536\":{}}}}",
	    "config.ExposedPorts: '65536' is no port (N, N/tcp, N/udp or "
	    "N/sctp)");
	bad("{\"history\":[{},{\"empty_layer\":1}]}",
	    "history[1].empty_layer: must be true or false");
}

Test(ociconfig, null_is_absent_as_go_reads_it)
{
	good("{\"config\":{\"Cmd\":null,\"Env\":null,\"Labels\":null,"
	     "\"Volumes\":null},\"history\":null,\"created\":null}");
}

Test(ociconfig, created_is_rfc3339)
{
	good("{\"created\":\"2020-01-02T03:04:05Z\"}");
	good("{\"created\":\"2020-01-02T03:04:05.5+01:00\"}");
	good("{\"created\":\"9999-12-31T23:59:59Z\"}");
	bad("{\"created\":\"2020-01-02 03:04:05Z\"}",
	    "created: '2020-01-02 03:04:05Z' is not an RFC 3339 time "
	    "(2006-01-02T15:04:05Z)");
	bad("{\"created\":\"10000-01-01T00:00:00Z\"}",
	    "created: '10000-01-01T00:00:00Z' is not an RFC 3339 time "
	    "(2006-01-02T15:04:05Z)");
	bad("{\"created\":\"2020-01-02T03:04:05\"}",
	    "created: '2020-01-02T03:04:05' is not an RFC 3339 time "
	    "(2006-01-02T15:04:05Z)");
}

Test(ociconfig, edits_as_umoci_config)
{
	const char *cmd[] = { "a", "b" }, *env[] = { "A=2", "C=3" },
		   *labels[] = { "l=x=y" }, *ports[] = { "80/tcp" };
	struct hu_oci_config_edit ed = {
		.cmd = cmd, .ncmd = 2, .env = env, .nenv = 2,
		.labels = labels, .nlabels = 1, .ports = ports, .nports = 1,
		.platform = "linux/amd64",
	};
	struct hu_error e = { 0 };
	char *out;

	cr_assert_eq(hu_oci_config_apply("{\"variant\":\"v8\",\"config\":{"
					 "\"Entrypoint\":[\"e\"],\"Env\":["
					 "\"A=1\",\"B=1\"]}}", &ed, &out, &e),
		     0, "%s", e.msg);
	cr_expect_str_eq(out, "{\"architecture\":\"amd64\",\"config\":{"
			 "\"Cmd\":[\"a\",\"b\"],\"Entrypoint\":[\"e\"],"
			 "\"Env\":[\"A=2\",\"B=1\",\"C=3\"],"
			 "\"ExposedPorts\":{\"80/tcp\":{}},"
			 "\"Labels\":{\"l\":\"x=y\"}},\"os\":\"linux\"}");
	free(out);
}

Test(ociconfig, the_result_is_checked)
{
	const char *cmd[] = { "a" }, *env[] = { "A=1" };
	struct hu_oci_config_edit ed = { .cmd = cmd, .ncmd = 1 };
	struct hu_error e = { 0 };
	char *out;

	/* what an option replaces is repaired by it */
	cr_expect_eq(hu_oci_config_apply("{\"config\":{\"Cmd\":1}}", &ed,
					 &out, &e), 0, "%s", e.msg);
	cr_expect_str_eq(out, "{\"config\":{\"Cmd\":[\"a\"]}}");
	free(out);
	/* what it adds to is named when of a wrong type */
	ed = (struct hu_oci_config_edit){ .env = env, .nenv = 1 };
	cr_expect_eq(hu_oci_config_apply("{\"config\":{\"Env\":\"A=0\"}}",
					 &ed, &out, &e), -1);
	cr_expect_str_eq(e.msg, "config.Env: must be an array of strings");
	cr_expect_null(out);
	hu_error_clear(&e);
	cr_expect_eq(hu_oci_config_apply("{\"config\":[]}", &ed, &out, &e),
		     -1);
	cr_expect_str_eq(e.msg, "config: must be an object");
	hu_error_clear(&e);
}
