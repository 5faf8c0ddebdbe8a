/* SPDX-License-Identifier: MIT */
/*
 * The one place progress is formatted.  The library calls the report's
 * progress callbacks often (every few hundred entries, every tarball
 * entry); each call reads the clock and draws only the forms that are
 * due:
 *  - the terminal line on stderr, at most 5 times a second, cleared at
 *    the end (--progress=auto on a terminal, or always);
 *  - a plain line every 10 s when stderr is no terminal (--progress=always);
 *  - JSON lines on --progress-fd, at most one a second, and a final one;
 *  - e2fsck's completion lines on fsck's -C FD, or with -C 0 its bar on
 *    standard output when that is a terminal;
 *  - one status line on stderr after SIGUSR1, as dd does.
 * A write error on a progress fd turns that form off; it never fails the
 * run, and SIGPIPE is held off while writing.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "gate.h"

#define MS 1000000ull

static volatile sig_atomic_t usr1_pending;

/* The bytes the library moves, counted where they move (copy.c, the tar
 * reader and writer) and read here at each draw: the line stays live
 * between reports, which count entries only. */
static void report_tick(void *ctx);
static struct hu_progress_bytes live = { .tick = report_tick };

static struct {
	bool started, finished;
	enum progress_mode mode;
	int fd, cfd;			/* --progress-fd, fsck's -C; -1 */
	bool bar;			/* -C 0: e2fsck's bar on stdout */
	const char *command;		/* "merge", "whiteout convert" */
	const char *device;		/* -C's last field, the bar's label */
	uint64_t start_ns;
	struct progress_gate term, plain, json, comp, bar_gate;
	bool shown, bar_shown;		/* the line, the bar is drawn */
	bool walk;			/* the last report was a walk's */
	unsigned spin;			/* the bar's spinner */
	atomic_bool reported;		/* a report came (not only a tick) */
	uint64_t entries, read, size;	/* as last reported */
	const char *what;		/* the tarball read, or NULL */
	char *phase, *phase_what;	/* hu_report_phase()'s, or NULL */
} pg = { .fd = -1, .cfd = -1 };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_usr1(int sig)
{
	(void)sig;
	usr1_pending = 1;
}

int progress_opt(const struct cmd *c, const struct parsed_opt *o)
{
	long long v;

	if (!strcmp(o->name, "progress")) {
		if (!strcmp(o->arg, "auto"))
			pg.mode = PROGRESS_AUTO;
		else if (!strcmp(o->arg, "always"))
			pg.mode = PROGRESS_ALWAYS;
		else if (!strcmp(o->arg, "never"))
			pg.mode = PROGRESS_NEVER;
		else
			return cmd_usage_error(c, "invalid --progress '%s' "
					       "(choose auto, always or "
					       "never)", o->arg);
		return 1;
	}
	if (strcmp(o->name, "progress-fd") && strcmp(o->name, "completion-fd"))
		return 0;
	/* e2fsck's -C 0: its bar on standard output */
	if (!strcmp(o->name, "completion-fd") && parse_num(o->arg, 0, 0, &v)) {
		pg.bar = true;
		return 1;
	}
	if (!parse_num(o->arg, 0, INT32_MAX, &v) || v <= 2 ||
	    fcntl((int)v, F_GETFD) < 0)
		return cmd_usage_error(c, "invalid --%s '%s' (%san open file "
				       "descriptor above 2)", o->name, o->arg,
				       strcmp(o->name, "completion-fd") ? "" :
				       "0 for a bar on standard output, or ");
	if (!strcmp(o->name, "progress-fd"))
		pg.fd = (int)v;
	else
		pg.cfd = (int)v;
	return 1;
}

void progress_start(const struct cmd *c, const char *device)
{
	struct sigaction sa = { .sa_handler = on_usr1,
				.sa_flags = SA_RESTART };
	bool draw = front.verbosity >= 0 && pg.mode != PROGRESS_NEVER;

	(void)c;
	pg.started = true;
	pg.command = strncmp(front.cmdname, "hunion ", 7) ? front.cmdname :
		     front.cmdname + 7;
	pg.device = device;
	pg.start_ns = now_ns();
	/* the first report of each form is drawn at once: a run that
	 * reports at all shows it, whatever the clock */
	if (draw && front.progress)
		pg.term.interval_ns = 200 * MS;
	else if (draw && pg.mode == PROGRESS_ALWAYS)
		pg.plain = (struct progress_gate){ 10000 * MS,
						   pg.start_ns + 10000 * MS };
	if (pg.fd >= 0)
		pg.json.interval_ns = 1000 * MS;
	if (pg.cfd >= 0)
		pg.comp.interval_ns = 200 * MS;
	/* as e2fsck, whatever --progress and -q say: asked for by name;
	 * but only on a terminal, where the data on stdout (findings,
	 * --json) is read by a person, and instead of the line on stderr,
	 * which would draw over it */
	pg.bar = pg.bar && isatty(STDOUT_FILENO);
	if (pg.bar) {
		pg.bar_gate.interval_ns = 200 * MS;
		front.progress = false;
	}
	sigemptyset(&sa.sa_mask);
	(void)sigaction(SIGUSR1, &sa, NULL);
}

/* Write all of @buf to @fd, SIGPIPE held off; false on any error. */
static bool write_quiet(int fd, const char *buf, size_t len)
{
	sigset_t pipe_set, old, pending;
	bool was_pending, ok = true;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	sigpending(&pending);
	was_pending = sigismember(&pending, SIGPIPE);
	while (len && ok) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == ENOTSOCK)
			n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		ok = n > 0;
		if (ok) {
			buf += n;
			len -= (size_t)n;
		}
	}
	if (!ok && !was_pending) {
		/* the SIGPIPE this write raised: taken, not delivered */
		struct timespec zero = { 0, 0 };

		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 &&
		       errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ok;
}

/* "1:02:03" or "2:03" */
static void fmt_time(char *buf, size_t len, uint64_t s)
{
	if (s >= 3600)
		snprintf(buf, len, "%llu:%02llu:%02llu",
			 (unsigned long long)(s / 3600),
			 (unsigned long long)(s / 60 % 60),
			 (unsigned long long)(s % 60));
	else
		snprintf(buf, len, "%llu:%02llu", (unsigned long long)(s / 60),
			 (unsigned long long)(s % 60));
}

/* "12.3 MiB" */
static void fmt_bytes(char *buf, size_t len, double b)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	size_t u = 0;

	while (b >= 1024 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
		b /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

static uint64_t live_load(_Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

/* ", 12.3 MiB written", or "" when nothing is written yet */
static void fmt_written(char *buf, size_t len, uint64_t w)
{
	char n[32];

	buf[0] = '\0';
	if (!w)
		return;
	fmt_bytes(n, sizeof(n), (double)w);
	snprintf(buf, len, ", %s written", n);
}

/* The line people read: what, entries, bytes, rate, elapsed, percent and
 * ETA where the total is known. */
static void status_text(char *buf, size_t len, uint64_t now)
{
	double secs = (double)(now - pg.start_ns) / 1e9;
	uint64_t r = live_load(&live.read), w = live_load(&live.written);
	char el[32], a[32], b[32], rate[48] = "", eta[48] = "", wr[48];
	int n;

	fmt_time(el, sizeof(el), (uint64_t)secs);
	n = snprintf(buf, len, "%s: ", front.cmdname);
	if ((pg.phase || pg.what) && n >= 0 && (size_t)n < len) {
		FILE *f = fmemopen(buf + n, len - (size_t)n, "w");
		/* the phase and what it is done to; a tarball read without
		 * a phase of its own by what it is */
		const char *what = pg.phase ? pg.phase_what : pg.what;

		if (f) {
			if (pg.phase)
				fprintf(f, "%s%s", pg.phase, what ? " " : "");
			if (what)
				print_path_escaped(f, what);
			fputs(": ", f);
			fclose(f);
		}
		n = (int)strlen(buf);
	}
	if (n < 0 || (size_t)n >= len)
		return;
	if (pg.what && pg.size) {
		double frac = (double)pg.read / (double)pg.size;

		fmt_bytes(a, sizeof(a), (double)pg.read);
		fmt_bytes(b, sizeof(b), (double)pg.size);
		if (secs > 0.5) {
			fmt_bytes(rate + 2, sizeof(rate) - 4, pg.read / secs);
			memcpy(rate, ", ", 2);
			strcat(rate, "/s");
		}
		if (secs > 0.5 && frac > 0.001 && frac < 1) {
			char t[32];

			fmt_time(t, sizeof(t),
				 (uint64_t)(secs / frac - secs + 0.5));
			snprintf(eta, sizeof(eta), ", ETA %s", t);
		}
		fmt_written(wr, sizeof(wr), w);
		/* rounded down: 100% only once the last entry is in */
		snprintf(buf + n, len - (size_t)n, "%u%%, %llu %s, "
			 "%s of %s read%s%s, %s%s", (unsigned)(frac * 100),
			 (unsigned long long)pg.entries,
			 plural(pg.entries, "entry", "entries"), a, b, wr,
			 rate, el, eta);
		return;
	}
	if (!r && !w) {
		if (secs > 0.5)
			snprintf(rate, sizeof(rate), ", %.0f entries/s",
				 (double)pg.entries / secs);
		snprintf(buf + n, len - (size_t)n, "%llu %s%s, %s",
			 (unsigned long long)pg.entries,
			 plural(pg.entries, "entry", "entries"), rate, el);
		return;
	}
	/* bytes move: their rate says more than the entries' (a few big
	 * files); the input's, or the output's where nothing is read */
	if (secs > 0.5) {
		fmt_bytes(rate + 2, sizeof(rate) - 4,
			  (double)(r ? r : w) / secs);
		memcpy(rate, ", ", 2);
		strcat(rate, "/s");
	}
	fmt_bytes(a, sizeof(a), (double)r);
	fmt_bytes(b, sizeof(b), (double)w);
	snprintf(buf + n, len - (size_t)n, "%llu %s, %s read, %s "
		 "written%s, %s", (unsigned long long)pg.entries,
		 plural(pg.entries, "entry", "entries"), a, b, rate, el);
}

/* "\"phase\":\"unpacking\",\"what\":\"a.tar\"," into @buf (@what a path:
 * json_field(), with its bytes in "what_b64" when not UTF-8), or ""
 * before the first phase, or where it does not fit; its length. */
static int json_phase(char *buf, size_t len)
{
	FILE *f;
	long n;

	buf[0] = '\0';
	if (!pg.phase || !(f = fmemopen(buf, len, "w")))
		return 0;
	fputs("\"phase\":", f);
	json_print_string(f, pg.phase);
	if (pg.phase_what) {
		fputc(',', f);
		json_field(f, "what", pg.phase_what);
	}
	fputc(',', f);
	n = ftell(f);
	if (fclose(f) != 0 || n < 0 || (size_t)n >= len - 256) {
		buf[0] = '\0';	/* the counts must fit after it */
		return 0;
	}
	return (int)n;
}

/* @written: the summary's bytes on the last line, else PROGRESS_UNKNOWN
 * (the live count). */
static void json_line(uint64_t now, bool done, uint64_t written)
{
	char buf[8192];
	int n;

	if (written == PROGRESS_UNKNOWN)
		written = live_load(&live.written);
	n = snprintf(buf, sizeof(buf), "{\"command\":\"%s\",", pg.command);
	n += json_phase(buf + n, sizeof(buf) - (size_t)n);
	n += snprintf(buf + n, sizeof(buf) - (size_t)n,
		     "\"entries\":%llu,\"bytes_read\":%llu,"
		     "\"bytes_written\":%llu",
		     (unsigned long long)pg.entries,
		     (unsigned long long)live_load(&live.read),
		     (unsigned long long)written);
	/* of every tarball opened so far, on every line from the first
	 * one's on: on the last, all of them */
	if (live_load(&live.tarball_size))
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
			      ",\"tarball_bytes_read\":%llu,"
			      "\"bytes_total\":%llu",
			      (unsigned long long)live_load(&live.tarball_done),
			      (unsigned long long)live_load(&live.tarball_size));
	snprintf(buf + n, sizeof(buf) - (size_t)n,
		 ",\"elapsed\":%.3f,\"done\":%s}\n",
		 (double)(now - pg.start_ns) / 1e9, done ? "true" : "false");
	if (!write_quiet(pg.fd, buf, strlen(buf)))
		pg.fd = -1;
}

/* e2fsck -C: "PASS CURRENT MAX DEVICE", one pass.  While a tarball is
 * read, its bytes read of its size, so that front ends show a share;
 * else the entries checked, whose total is not known before the walk,
 * so MAX is CURRENT (and so at the end). */
static void completion_line(bool final)
{
	bool bytes = !final && pg.what && pg.size;
	uint64_t cur = bytes ? pg.read : pg.entries;
	char buf[4096];

	snprintf(buf, sizeof(buf), "1 %llu %llu %s\n",
		 (unsigned long long)cur,
		 (unsigned long long)(bytes ? pg.size : cur),
		 pg.device ? pg.device : "-");
	if (!write_quiet(pg.cfd, buf, strlen(buf)))
		pg.cfd = -1;
}

/* e2fsck -C 0 (e2fsck/unix.c, e2fsck_simple_progress): "DEVICE: |===
 * / 45.2%", a bar of a width in eighths, a spinner, redrawn over
 * itself.  The share is known while a tarball is read; while entries
 * are checked their total is not, and the count stands for it. */
static void bar_line(void)
{
	static const char spinner[] = "\\|/-";
	const char *label = pg.device ? pg.device : "-";
	size_t l = strlen(label);
	int width = l < 58 ? (int)(66 - l) / 8 * 8 : 8, full = 0;
	char tail[48];

	pg.spin = (pg.spin + 1) & 3;
	if (pg.what && pg.size) {
		/* in tenths, rounded down as the line's percent */
		double percent = (double)(1000 * pg.read / pg.size) / 10;

		full = (int)((percent * width + 50) / 100);
		if (full > width)
			full = width;
		snprintf(tail, sizeof(tail), " %4.1f%%  ", percent);
	} else {
		snprintf(tail, sizeof(tail), " %llu %s ",
			 (unsigned long long)pg.entries,
			 plural(pg.entries, "entry", "entries"));
	}
	putchar('\r');
	print_path_escaped(stdout, label);
	printf(": |%.*s%*s%c%s\r", full,
	       "================================================================",
	       width - full, "", spinner[pg.spin], tail);
	fflush(stdout);
	pg.bar_shown = true;
}

static void draw(bool final)
{
	uint64_t now = now_ns();
	char line[1024];

	if (usr1_pending) {
		usr1_pending = 0;
		front_progress_done();
		status_text(line, sizeof(line), now);
		fprintf(stderr, "%s\n", line);
	}
	if (final || !atomic_load(&pg.reported))
		return;
	if (front.progress && progress_gate_due(&pg.term, now)) {
		status_text(line, sizeof(line), now);
		fprintf(stderr, "\r%s\033[K", line);
		pg.shown = true;
	}
	if (progress_gate_due(&pg.plain, now)) {
		status_text(line, sizeof(line), now);
		fprintf(stderr, "%s\n", line);
	}
	if (pg.fd >= 0 && progress_gate_due(&pg.json, now))
		json_line(now, false, PROGRESS_UNKNOWN);
	if (pg.cfd >= 0 && progress_gate_due(&pg.comp, now))
		completion_line(false);
	if (pg.bar && progress_gate_due(&pg.bar_gate, now))
		bar_line();
}

/* merge --into reports from its worker threads: one draws, the others
 * go on (their counts are drawn next time) */
static pthread_mutex_t draw_lock = PTHREAD_MUTEX_INITIALIZER;

static void report_progress(void *ctx, uint64_t done)
{
	(void)ctx;
	if (!pg.started || pthread_mutex_trylock(&draw_lock))
		return;
	atomic_store(&pg.reported, true);
	pg.entries = done;
	pg.what = NULL;
	pg.walk = true;
	pg.read = pg.size = 0;
	draw(false);
	pthread_mutex_unlock(&draw_lock);
}

/* A MiB more moved (live.tick): the line, with the entries as last
 * reported, is drawn if it is due, during one big file too.  Never
 * before the run's first report: a reader thread (tarsrc's producer)
 * ticks while the run still opens, and the first line drawn is the one
 * naming what is read, whichever thread is faster.  Nor does it take
 * the lock then, which would make that first report pass by; a SIGUSR1
 * is answered at once all the same. */
static void report_tick(void *ctx)
{
	(void)ctx;
	if (!pg.started || (!atomic_load(&pg.reported) && !usr1_pending) ||
	    pthread_mutex_trylock(&draw_lock))
		return;
	draw(false);
	pthread_mutex_unlock(&draw_lock);
}

static void report_progress_read(void *ctx, const char *what, uint64_t done,
				 uint64_t read, uint64_t size)
{
	(void)ctx;
	if (!pg.started || pthread_mutex_trylock(&draw_lock))
		return;
	atomic_store(&pg.reported, true);
	pg.entries = done;
	pg.walk = false;
	pg.what = what;
	pg.read = read;
	pg.size = size;
	draw(false);
	pthread_mutex_unlock(&draw_lock);
}

/* A phase begins (hu_report_phase()).  Its JSON line is written at once,
 * so that every phase is in them; the other forms show it at the next
 * report, which the clock does not hold back, so that the line's first
 * draw of a tarball read has its size (its report follows the phase at
 * once).  @now: the terminal line too, for a phase that reports no count
 * (the clean-up). */
static void set_phase(const char *phase, const char *what, bool now)
{
	char *p = strdup(phase), *w = what ? strdup(what) : NULL;

	if (!pg.started || !p || (what && !w)) {
		free(p);
		free(w);
		return;
	}
	pthread_mutex_lock(&draw_lock);
	free(pg.phase);
	free(pg.phase_what);
	pg.phase = p;
	pg.phase_what = w;
	/* the counts of the phase before are not this one's */
	pg.what = NULL;
	pg.read = pg.size = 0;
	pg.term.next_ns = pg.comp.next_ns = pg.bar_gate.next_ns = 0;
	if (pg.fd >= 0)
		json_line(now_ns(), false, PROGRESS_UNKNOWN);
	pg.json.next_ns = now_ns() + pg.json.interval_ns;
	if (now) {
		atomic_store(&pg.reported, true);
		draw(false);
	}
	pthread_mutex_unlock(&draw_lock);
}

static void report_phase(void *ctx, const char *phase, const char *what)
{
	(void)ctx;
	set_phase(phase, what, false);
}

static void report_phase_now(void *ctx, const char *phase, const char *what)
{
	(void)ctx;
	set_phase(phase, what, true);
}

void front_progress_done(void)
{
	if (pg.shown)
		fputs("\r\033[K", stderr);
	pg.shown = false;
	if (pg.bar_shown) {
		fputs("\r\033[K", stdout);
		fflush(stdout);
	}
	pg.bar_shown = false;
}

int progress_remove_aside(void (*removed)(void *ctx, const char *path),
			  void *ctx, struct hu_error *e)
{
	struct hu_report r = front_report();

	r.phase = report_phase_now;	/* a removal reports no count */
	return hu_aside_remove(&r, removed, ctx, e);
}

/* The run's work is done: what it moved aside goes now.  Best effort: a
 * leftover that cannot be removed is said (unless -q) and stays, for the
 * next run or `hunion clean`; the run's status stays its work's. */
static void remove_aside(void)
{
	struct hu_error e = { 0 };

	if (!hu_aside_pending())
		return;
	if (progress_remove_aside(NULL, NULL, &e) < 0 && !hu_interrupted() &&
	    front.verbosity >= 0) {
		front_progress_done();
		print_error(&e);
	}
	hu_error_clear(&e);
}

void progress_finish(uint64_t entries, uint64_t written)
{
	uint64_t now;

	remove_aside();
	now = now_ns();
	front_progress_done();
	if (!pg.started || pg.finished)
		return;
	pg.finished = true;
	/* no summary count: a walk's last one, which came to the library's
	 * counter but perhaps not to a report (every 256th) */
	if (entries == PROGRESS_UNKNOWN && pg.walk)
		entries = live_load(&live.entries);
	if (entries != PROGRESS_UNKNOWN)
		pg.entries = entries;
	draw(true);
	if (pg.fd >= 0)
		json_line(now, true, written);
	if (pg.cfd >= 0)
		completion_line(true);
	pg.term.interval_ns = pg.plain.interval_ns = 0;
}

struct hu_report front_report(void)
{
	return (struct hu_report){ .warn = front_report_warn,
				   .progress = report_progress,
				   .progress_read = report_progress_read,
				   .phase = report_phase, .bytes = &live };
}

struct hu_progress_bytes *progress_bytes(void)
{
	return &live;
}
