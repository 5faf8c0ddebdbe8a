/* SPDX-License-Identifier: MIT */
/* Mount option strings: what overlayfs reads, escapes and all. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>

#include "internal.h"
#include "mount/mount.h"

Test(mountopt, helper_options_give_the_layers_bottom_first)
{
	struct hu_mount_spec sp;
	struct hu_error e = { 0 };

	cr_assert_eq(hu_mount_spec_parse("ro,lowerdir=/t:/m:/b,upperdir=/u,"
					 "workdir=/w,index=on,x-gvfs-hide,"
					 "noatime", true, &sp, &e), 0,
		     "%s", e.msg);
	cr_assert_eq(sp.n, 4);
	cr_expect_str_eq(sp.layers[0], "/b");
	cr_expect_str_eq(sp.layers[1], "/m");
	cr_expect_str_eq(sp.layers[2], "/t");
	cr_expect_str_eq(sp.layers[3], "/u");
	cr_expect_null(sp.layers[4]);
	cr_expect(sp.has_upper);
	cr_expect_str_eq(sp.workdir, "/w");
	cr_expect_eq(sp.flags, MS_RDONLY | MS_NOATIME);
	cr_expect_str_eq(sp.fs_options, "index=on");
	hu_mount_spec_free(&sp);
}

Test(mountopt, escapes_are_undone_where_overlayfs_undoes_them)
{
	struct hu_mount_spec sp;
	struct hu_error e = { 0 };

	cr_assert_eq(hu_mount_spec_parse("lowerdir=/a\\:b:/c\\,d\\\\e,"
					 "upperdir=/u\\,p,redirect_dir=on",
					 true, &sp, &e), 0, "%s", e.msg);
	cr_assert_eq(sp.n, 3);
	cr_expect_str_eq(sp.layers[0], "/c,d\\e");
	cr_expect_str_eq(sp.layers[1], "/a:b");
	cr_expect_str_eq(sp.layers[2], "/u,p");
	cr_expect_null(sp.workdir);
	cr_expect_str_eq(sp.fs_options, "redirect_dir=on");
	hu_mount_spec_free(&sp);
}

Test(mountopt, escaping_round_trips)
{
	static const char *const paths[] = { "/plain", "/a:b", "/c,d",
					     "/e\\f", "/:,\\:" };
	const char *special = ":,\\";

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		char esc[64], opt[80];
		struct hu_mount_spec sp;
		struct hu_error e = { 0 };
		size_t n = hu_mountopt_escaped_len(paths[i], special);

		cr_assert_eq(hu_mountopt_escape(esc, paths[i], special) - esc,
			     (long)n);
		snprintf(opt, sizeof(opt), "lowerdir=%s:/x", esc);
		cr_assert_eq(hu_mount_spec_parse(opt, true, &sp, &e), 0,
			     "%s", e.msg);
		cr_assert_eq(sp.n, 2, "%s", opt);
		cr_expect_str_eq(sp.layers[1], paths[i]);
		hu_mount_spec_free(&sp);
	}
}

Test(mountopt, what_a_mount_cannot_mean_is_refused)
{
	static const char *const bad[] = {
		"upperdir=/u",			/* no lowers */
		"lowerdir=/a::/b",		/* data-only layers */
		"lowerdir=/a:",			/* an empty path */
		"lowerdir=/a,lowerdir=/b",	/* twice */
		"lowerdir=/a,workdir=/w,workdir=/v",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct hu_mount_spec sp;
		struct hu_error e = { 0 };

		cr_expect_eq(hu_mount_spec_parse(bad[i], true, &sp, &e), -1,
			     "%s accepted", bad[i]);
		cr_expect_null(sp.layers, "%s", bad[i]);
	}
}

Test(mountopt, hunion_mount_takes_no_layers_in_its_options)
{
	struct hu_mount_spec sp;
	struct hu_error e = { 0 };

	cr_expect_eq(hu_mount_spec_parse("nosuid,workdir=/w", false, &sp, &e),
		     -1);
	cr_expect(strstr(e.msg, "--workdir"), "%s", e.msg);
	cr_assert_eq(hu_mount_spec_parse("nosuid,xino=auto", false, &sp, &e),
		     0);
	cr_expect_eq(sp.flags, MS_NOSUID);
	cr_expect_str_eq(sp.fs_options, "xino=auto");
	hu_mount_spec_free(&sp);
}

Test(mountopt, flags_by_name_both_ways)
{
	char buf[128];

	cr_expect_str_eq(hu_mount_flag_names(0, buf, sizeof(buf)), "0");
	cr_expect_str_eq(hu_mount_flag_names(MS_RDONLY | MS_NODEV, buf,
					     sizeof(buf)),
			 "MS_RDONLY|MS_NODEV");
	cr_expect_str_eq(hu_mount_flag_opts(MS_RDONLY | MS_NODEV, buf,
					    sizeof(buf)), "ro,nodev");
	cr_expect_str_eq(hu_mount_flag_opts(0, buf, sizeof(buf)), "");
}

/* mount(8) (libmount) splits options at the ',' outside double quotes:
 * a quoted value is one option, whether mount(8)'s own (x-*, dropped) or
 * the filesystem's (kept as written). */
Test(mountopt, quoted_commas_do_not_split_an_option)
{
	struct hu_mount_spec sp;
	struct hu_error e = { 0 };

	cr_assert_eq(hu_mount_spec_parse("lowerdir=/l,upperdir=/u,"
					 "x-systemd.requires-mounts-for="
					 "\"/a,/b\",context=\"s:o:t,c1\","
					 "comment=\"x,y\",ro", true, &sp, &e),
		     0, "%s", e.msg);
	cr_assert_eq(sp.n, 2);
	cr_expect_str_eq(sp.layers[0], "/l");
	cr_expect_str_eq(sp.layers[1], "/u");
	cr_expect_eq(sp.flags, MS_RDONLY);
	cr_expect_str_eq(sp.fs_options, "context=\"s:o:t,c1\"");
	hu_mount_spec_free(&sp);

	/* hunion mount -o: the same */
	cr_assert_eq(hu_mount_spec_parse("x-systemd.requires-mounts-for="
					 "\"/a,/b\",noatime", false, &sp, &e),
		     0, "%s", e.msg);
	cr_expect_eq(sp.flags, MS_NOATIME);
	cr_expect_null(sp.fs_options);
	hu_mount_spec_free(&sp);

	/* an unclosed quote runs to the end, as in mount(8) */
	cr_assert_eq(hu_mount_spec_parse("x-a=\"/a,ro", false, &sp, &e), 0,
		     "%s", e.msg);
	cr_expect_eq(sp.flags, 0);
	cr_expect_null(sp.fs_options);
	hu_mount_spec_free(&sp);
}
