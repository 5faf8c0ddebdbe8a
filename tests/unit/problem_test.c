/* SPDX-License-Identifier: MIT */
/* The problem table and the three policies a reader can be given. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "internal.h"

Test(problem, ids_are_unique_camel_case_and_parse_back)
{
	for (unsigned i = 0; i < HU_PB_COUNT; i++) {
		const struct hu_problem_info *pi = hu_problem_info(i);
		enum hu_problem_id back;

		cr_assert_not_null(pi);
		cr_expect(islower((unsigned char)pi->id[0]), "%s", pi->id);
		for (const char *c = pi->id; *c; c++)
			cr_expect(isalnum((unsigned char)*c), "%s", pi->id);
		cr_assert_eq(hu_problem_parse(pi->id, &back), 0, "%s", pi->id);
		cr_expect_eq(back, i, "%s parses to another problem", pi->id);
		cr_expect(pi->severity >= HU_SEV_INFO, "%s", pi->id);
		cr_expect(pi->message[0], "%s has no message", pi->id);
		cr_expect(pi->repair == HU_REPAIR_NONE || pi->action[0],
			  "%s repairs without saying how", pi->id);
	}
	cr_expect_null(hu_problem_info(HU_PB_COUNT));
}

Test(problem, unknown_ids_and_levels_are_refused)
{
	enum hu_problem_id id;
	enum hu_severity sev;

	cr_expect_eq(hu_problem_parse("WhiteoutOrphan", &id), -1);
	cr_expect_eq(hu_problem_parse("", &id), -1);
	cr_expect_eq(hu_severity_parse("fatal", &sev), -1);
	cr_assert_eq(hu_severity_parse("ignore", &sev), 0);
	cr_expect_eq(sev, HU_SEV_IGNORE);
	cr_expect_str_eq(hu_severity_name(HU_SEV_WARNING), "warning");
}

static int collected;
static int collect(void *ctx, const struct hu_problem *p, struct hu_error *e)
{
	cr_expect_eq(p->id, HU_PB_WHITEOUT_ORPHAN);
	cr_expect_str_eq(p->layer, "up");
	cr_expect_str_eq(p->path, "a/b");
	cr_expect_str_eq(p->detail, "v");
	collected++;
	return *(int *)ctx;
}

static int warned;
static void warn(void *ctx, const struct hu_error *w)
{
	cr_expect(strstr(w->msg, "whiteoutOrphan"), "%s", w->msg);
	warned++;
}

Test(problem, policies_fail_warn_collect_and_no_sink)
{
	struct hu_error e = { 0 };
	struct hu_report r = { .warn = warn };
	int go_on = 0;
	struct hu_problem_sink fail = { HU_PB_FAIL, NULL, NULL },
		warns = { HU_PB_WARN, NULL, NULL },
		coll = { HU_PB_COLLECT, collect, &go_on };

	/* no sink: what the reader always did */
	cr_expect_eq(hu_problem_found(NULL, &r, HU_PB_WHITEOUT_ORPHAN, false,
				      "up", "a/b", "v", 0, &e), 0);
	cr_expect_eq(hu_problem_found(NULL, &r, HU_PB_WHITEOUT_ORPHAN, true,
				      "up", "a/b", "v", EIO, &e), -1);
	cr_expect_eq(e.err, EIO);
	cr_expect_str_eq(e.path, "up/a/b");
	cr_expect(strstr(e.msg, "(whiteoutOrphan): v"), "%s", e.msg);
	cr_expect_eq(hu_problem_found(&fail, &r, HU_PB_WHITEOUT_ORPHAN, false,
				      "up", "a/b", "v", 0, &e), -1);
	cr_expect_eq(hu_problem_found(&warns, &r, HU_PB_WHITEOUT_ORPHAN, true,
				      "up", "a/b", "v", 0, &e), 0);
	cr_expect_eq(warned, 1);
	cr_expect_eq(hu_problem_found(&coll, &r, HU_PB_WHITEOUT_ORPHAN, true,
				      "up", "a/b", "v", 0, &e), 0);
	go_on = -1;
	cr_expect_eq(hu_problem_found(&coll, &r, HU_PB_WHITEOUT_ORPHAN, true,
				      "up", "a/b", "v", 0, &e), -1);
	cr_expect_eq(collected, 2);
	hu_error_clear(&e);
}
