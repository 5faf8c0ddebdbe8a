/* SPDX-License-Identifier: MIT */
/* fsck's overlay module: the kernel's rules for redirects
 * (util.c ovl_get_redirect_xattr(), namei.c lookup of '.' and '..'). */
#include <criterion/criterion.h>
#include <string.h>

#include "fsck/fsck_overlay.h"

struct redirect_case {
	const char *value;
	bool refused;
};

/* Each refused one was seen failing the lookup on Linux 6.18: EINVAL
 * for the first five, EACCES for '.' and '..'. */
static const struct redirect_case cases[] = {
	{ "", true },
	{ "x/y", true },
	{ "/a//b", true },
	{ "/a/", true },
	{ "//a", true },
	{ ".", true },
	{ "..", true },
	{ "/a/../a", true },
	{ "/.", true },
	{ "/a/.", true },
	{ "a", false },
	{ ".a", false },
	{ "..a", false },
	{ "/a", false },
	{ "/a/b/c", false },
	{ "/a/.b/..c", false },
};

Test(fsck_overlay, redirects_the_kernel_refuses)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *why = ovl_redirect_refused(cases[i].value);

		cr_expect_eq(why != NULL, cases[i].refused, "\"%s\": %s",
			     cases[i].value, why ? why : "followed");
	}
}

Test(fsck_overlay, values_are_shown_printable)
{
	char buf[64];

	ovl_show_value("yes", 3, buf, sizeof(buf));
	cr_expect_str_eq(buf, "yes");
	ovl_show_value("a\nb\\\x01", 5, buf, sizeof(buf));
	cr_expect_str_eq(buf, "a\\x0ab\\x5c\\x01");
	ovl_show_value("abcdefghij", 10, buf, 8);
	cr_expect_lt(strlen(buf), 8);
}
