/* SPDX-License-Identifier: MIT */
/* The clock gate of the progress forms: due at most once per interval,
 * by a clock the caller reads (CLOCK_MONOTONIC in the program, any
 * numbers in tests/unit/progress_test.c). */
#ifndef HUNION_GATE_H
#define HUNION_GATE_H

#include <stdbool.h>
#include <stdint.h>

struct progress_gate {
	uint64_t interval_ns;	/* 0: closed */
	uint64_t next_ns;	/* first due at this time */
};

/* Is the gate due at @now_ns?  When it is, the next time is one interval
 * on: a stalled run draws once when it wakes, not a burst. */
static inline bool progress_gate_due(struct progress_gate *g, uint64_t now_ns)
{
	if (!g->interval_ns || now_ns < g->next_ns)
		return false;
	g->next_ns = now_ns + g->interval_ns;
	return true;
}

#endif /* HUNION_GATE_H */
