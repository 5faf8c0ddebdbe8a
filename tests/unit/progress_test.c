/* SPDX-License-Identifier: MIT */
/* The clock gate of the progress forms (cmd/gate.h), by an injected
 * clock: due at once, then at most once an interval, and a stall draws
 * once when it ends, not a burst. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "../../cmd/gate.h"

#define MS 1000000ull

Test(progress_gate, first_report_is_due_at_once)
{
	struct progress_gate g = { 200 * MS, 0 };

	cr_expect(progress_gate_due(&g, 5 * MS));
	cr_expect_not(progress_gate_due(&g, 6 * MS));
}

Test(progress_gate, at_most_five_a_second)
{
	struct progress_gate g = { 200 * MS, 0 };
	unsigned due = 0;

	/* a report every millisecond for 10 s */
	for (uint64_t t = 0; t < 10000 * MS; t += MS)
		due += progress_gate_due(&g, t);
	cr_expect_eq(due, 50);
}

Test(progress_gate, a_stall_draws_once_when_it_ends)
{
	struct progress_gate g = { 1000 * MS, 0 };

	cr_expect(progress_gate_due(&g, 0));
	cr_expect(progress_gate_due(&g, 60000 * MS));
	cr_expect_not(progress_gate_due(&g, 60001 * MS));
	cr_expect_not(progress_gate_due(&g, 60999 * MS));
	cr_expect(progress_gate_due(&g, 61000 * MS));
}

Test(progress_gate, closed_gate_is_never_due)
{
	struct progress_gate g = { 0, 0 };

	cr_expect_not(progress_gate_due(&g, 0));
	cr_expect_not(progress_gate_due(&g, UINT64_MAX));
}

Test(progress_gate, a_first_time_waits_for_it)
{
	/* --progress=always off a terminal: the first plain line at 10 s */
	struct progress_gate g = { 10000 * MS, 10000 * MS };

	cr_expect_not(progress_gate_due(&g, 9999 * MS));
	cr_expect(progress_gate_due(&g, 10000 * MS));
}
