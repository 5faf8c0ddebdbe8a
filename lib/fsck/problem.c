/* SPDX-License-Identifier: MIT */
/*
 * The problem table (problem.def) and how a reader reports what it meets:
 * fsck and every other command share one detection, and the sink the
 * caller sets decides whether a problem stops the reader, warns or is
 * collected, as e2fsck's problem table does.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const struct hu_problem_info table[HU_PB_COUNT] = {
#define HU_PROBLEM(name, id, sev, repair, msg, action) \
	[HU_PB_##name] = { id, HU_SEV_##sev, HU_REPAIR_##repair, msg, action },
#include "fsck/problem.def"
#undef HU_PROBLEM
};

static const char *const severity_names[] = {
	[HU_SEV_IGNORE] = "ignore", [HU_SEV_INFO] = "info",
	[HU_SEV_WARNING] = "warning", [HU_SEV_ERROR] = "error",
};

const struct hu_problem_info *hu_problem_info(enum hu_problem_id id)
{
	return (unsigned)id < HU_PB_COUNT ? &table[id] : NULL;
}

int hu_problem_parse(const char *id, enum hu_problem_id *out)
{
	for (unsigned i = 0; i < HU_PB_COUNT; i++)
		if (strcmp(table[i].id, id) == 0) {
			*out = (enum hu_problem_id)i;
			return 0;
		}
	return -1;
}

const char *hu_severity_name(enum hu_severity s)
{
	return (unsigned)s <= HU_SEV_ERROR ? severity_names[s] : "?";
}

int hu_severity_parse(const char *s, enum hu_severity *out)
{
	for (unsigned i = 0; i <= HU_SEV_ERROR; i++)
		if (strcmp(severity_names[i], s) == 0) {
			*out = (enum hu_severity)i;
			return 0;
		}
	return -1;
}

int hu_problem_found(const struct hu_problem_sink *sink,
		     const struct hu_report *report, enum hu_problem_id id,
		     bool stops, const char *layer, const char *path,
		     const char *detail, int err, struct hu_error *e)
{
	const struct hu_problem_info *pi = &table[id];
	struct hu_problem p = { id, layer, path ? path : "", detail };

	if (!sink) {
		if (!stops)
			return 0;
	} else if (sink->policy == HU_PB_COLLECT) {
		return sink->found(sink->ctx, &p, e);
	} else if (sink->policy == HU_PB_WARN) {
		if (detail)
			hu_report_warn(report, 0, layer, path, "%s (%s): %s",
				       pi->message, pi->id, detail);
		else
			hu_report_warn(report, 0, layer, path, "%s (%s)",
				       pi->message, pi->id);
		return 0;
	}
	hu_error_setat(e, err, layer, path, "%s (%s)%s%s", pi->message,
		       pi->id, detail ? ": " : "", detail ? detail : "");
	e->whole = layer != NULL;
	return -1;
}
