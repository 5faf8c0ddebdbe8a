# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Helpers for the CLI case scripts (tests/cli/cases/NAME/script).  The
# runner sources this file first; the script then runs with its cwd a fresh
# empty temp dir and these variables set:
#   HUNION  absolute path of the binary under test
#   TOOLS   absolute path of tests/tools
#   CASE    absolute path of the case folder
#   TMPD    the temp dir (the cwd) as an absolute path
#
# What a script prints on stdout is compared with CASE/expect, exactly.
# Print through `run` and `manifest` so the output does not depend on where
# the temp dir or the binary lives.

# `hunion ARGS` in a script runs the binary under test.
hunion() {
	"$HUNION" "$@"
}

# `python3 ARGS` in a script runs the system's /usr/bin/python3 (make deps
# installs it), not the first python3 on PATH: a version manager's shim
# there costs about a second per start.
python3() {
	/usr/bin/python3 "$@"
}

# Replace the temp dir's and the binary's absolute paths in stdin.
_hu_scrub() {
	local line
	while IFS= read -r line || [ -n "$line" ]; do
		line=${line//"$HUNION"/hunion}
		line=${line//"$TOOLS"/\$TOOLS}
		line=${line//"$TMPD"/.}
		printf '%s\n' "$line"
	done
}

# await CMD ARGS...: run CMD every 0.05 s until it succeeds, for what a
# script cannot be told on a pipe (a process stopped, a file it opened).
# False after ten minutes: a guard against a hang, never a time a step is
# given, so a busy machine only makes it wait longer.
await() {
	local i
	for ((i = 0; i < 12000; i++)); do
		"$@" && return 0
		sleep 0.05
	done
	return 1
}

# run CMD ARGS...: print "$ CMD ARGS", then the command's stdout and
# stderr merged (in the order written), then "[exit N]".
run() {
	local rc
	printf '$ %s\n' "$*" | _hu_scrub
	"$@" >"$TMPD/.run-out" 2>&1
	rc=$?
	_hu_scrub <"$TMPD/.run-out"
	rm -f "$TMPD/.run-out"
	echo "[exit $rc]"
	return 0
}

# run_quiet CMD ARGS...: like run, but only "$ CMD ARGS" and "[exit N]"
# plus the output when the exit status is not 0.
run_quiet() {
	local rc
	printf '$ %s\n' "$*" | _hu_scrub
	"$@" >"$TMPD/.run-out" 2>&1
	rc=$?
	[ $rc != 0 ] && _hu_scrub <"$TMPD/.run-out"
	rm -f "$TMPD/.run-out"
	echo "[exit $rc]"
	return 0
}

# manifest DIR: one line per entry (see tests/tools/manifest.py), with
# modes, mtimes (directories too: use fix_times), sizes, hashes, symlink
# targets, devices, xattrs and hard-link groups, but no owners (cases run
# as any user; use manifest_owner where ownership matters).
manifest() {
	echo "# manifest $1" | _hu_scrub
	/usr/bin/python3 "$TOOLS/manifest.py" --no-owner "$@" | _hu_scrub
}
# manifest_owner DIR: the same with UID:GID.
manifest_owner() {
	echo "# manifest $1" | _hu_scrub
	/usr/bin/python3 "$TOOLS/manifest.py" "$@" | _hu_scrub
}
# manifest_nomtime DIR: no mtimes at all, no owners.
manifest_nomtime() {
	echo "# manifest $1" | _hu_scrub
	/usr/bin/python3 "$TOOLS/manifest.py" --no-owner --no-mtime "$@" |
		_hu_scrub
}

# umoci_view OLD LAYER NEW: umoci (a real OCI reader) unpacks an image
# whose layers are OLD flattened and the OCI layer LAYER above it; the
# rootfs must be the tree NEW (compared as manifests, the root's mtime
# aside).  LAYER must be plain tar or gzip (umoci 0.4.7 reads no zstd)
# with its descriptor LAYER.json.  Prints "umoci: OLD + LAYER = NEW" or
# what differs.  As non-root umoci unpacks --rootless and owners are left
# out of the comparison.  umoci (Go's archive/tar) takes a SCHILY.xattr
# key as it stands, so GNU tar's escapes %25 and %3D stay in its names.
umoci_view() {
	local old=$1 layer=$2 new=$3 lay=umoci-${2##*/} opt=() rootless=()
	[ "$(id -u)" = 0 ] || { opt=(--no-owner); rootless=(--rootless); }
	if ! command -v umoci >/dev/null; then
		echo "umoci: not installed (make deps)"
		return 1
	fi
	rm -rf "$lay" "$lay.base.tar"*
	if ! "$HUNION" flatten -q -o "$lay.base.tar" \
		--descriptor "$lay.base.tar.json" "$old" ||
	   ! /usr/bin/python3 "$TOOLS/oci_layout.py" "$lay" t \
		"$lay.base.tar" "$layer" ||
	   ! umoci unpack "${rootless[@]}" \
		--image "$lay:t" "$lay.bundle" >"$lay.log" 2>&1; then
		echo "umoci: $old + $layer: unpack failed"
		tail -n 3 "$lay.log" | _hu_scrub
		return 1
	fi
	/usr/bin/python3 "$TOOLS/manifest.py" "${opt[@]}" "$new" >"$lay.want"
	/usr/bin/python3 "$TOOLS/manifest.py" "${opt[@]}" \
		"$lay.bundle/rootfs" >"$lay.got"
	if /usr/bin/python3 "$TOOLS/mancmp.py" --root-mtime-any \
		--xattr-escapes-kept "$lay.want" "$lay.got" >"$lay.diff"; then
		echo "umoci: $old + $layer = $new"
	else
		echo "umoci: $old + $layer != $new"
		_hu_scrub <"$lay.diff"
		return 1
	fi
}

# fix_times DIR [SECONDS]: set the mtime (and atime) of everything under DIR,
# DIR included, to SECONDS since the epoch (default 1000000000), children
# before their directories, symlinks themselves.
fix_times() {
	find "$1" -depth -exec touch -h -d "@${2:-1000000000}" {} +
}

# mkfile PATH [CONTENT [SECONDS]]: a regular file (parents created) holding
# CONTENT and a newline, with a fixed mtime.
mkfile() {
	mkdir -p "$(dirname "$1")" &&
		printf '%s\n' "${2:-$1}" >"$1" &&
		touch -d "@${3:-1000000000}" "$1"
}

# ---- markers.  MARK_NS=user puts the xattr markers under user.* (the
# --userxattr namespace) instead of trusted.*.

_hu_ns() {
	echo "${MARK_NS:-trusted}"
}

# wh_union PATH: a union whiteout, a symlink to "(union-whiteout)" with
# <ns>.union.whiteout = "y".
wh_union() {
	mkdir -p "$(dirname "$1")" &&
		ln -s '(union-whiteout)' "$1" &&
		setfattr -h -n "$(_hu_ns).union.whiteout" -v y "$1"
}
# opaque_union DIR: mark DIR (created if missing) opaque, union style.
opaque_union() {
	mkdir -p "$1" && setfattr -n "$(_hu_ns).union.opaque" -v y "$1"
}
# wh_overlay PATH: an overlayfs whiteout, a character device 0/0.
wh_overlay() {
	mkdir -p "$(dirname "$1")" && mknod "$1" c 0 0
}
# opaque_overlay DIR: <ns>.overlay.opaque = "y".
opaque_overlay() {
	mkdir -p "$1" && setfattr -n "$(_hu_ns).overlay.opaque" -v y "$1"
}
# xwh_overlay PATH: an overlayfs xattr whiteout (empty file with
# <ns>.overlay.whiteout), and its parent marked opaque "x".
xwh_overlay() {
	mkdir -p "$(dirname "$1")" && : >"$1" &&
		setfattr -n "$(_hu_ns).overlay.whiteout" -v "" "$1" &&
		setfattr -n "$(_hu_ns).overlay.opaque" -v x "$(dirname "$1")"
}
# wh_oci PATH: an OCI/AUFS whiteout, the empty file DIR/.wh.NAME.
wh_oci() {
	mkdir -p "$(dirname "$1")" &&
		: >"$(dirname "$1")/.wh.$(basename "$1")"
}
# opq_oci DIR: the OCI opaque marker DIR/.wh..wh..opq.
opq_oci() {
	mkdir -p "$1" && : >"$1/.wh..wh..opq"
}

# ---- requirements.  A case that cannot run says why and exits 77: the
# runner counts it as skipped.

needs_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "SKIP: needs root${1:+ ($1)}"
		exit 77
	fi
}
needs_cmd() {
	local c
	for c in "$@"; do
		if ! command -v "$c" >/dev/null 2>&1; then
			echo "SKIP: needs $c"
			exit 77
		fi
	done
}

# ---- a registry of the case's own

# registry_start: Debian's docker-registry (make deps) on 127.0.0.1,
# its storage and log in $TMPD/registry, and REGISTRY set to its
# 127.0.0.1:PORT.  It listens on port 0, the port the kernel gives it,
# which it logs: no other process can take the port between a choice
# and the start.  Ready once its log names the port and its /v2/
# answers as a registry does (polled by await: no time is given).  The
# case's EXIT trap must call registry_stop.  Where it cannot start, the
# case is skipped with its last log line.
registry_start() {
	local dir=$TMPD/registry
	needs_cmd docker-registry
	mkdir -p "$dir/storage" || exit 1
	# No upload purging: nothing of the registry's own runs beside the test.
	cat >"$dir/config.yml" <<-EOC || exit 1
	version: 0.1
	log:
	  level: info
	  formatter: text
	storage:
	  filesystem:
	    rootdirectory: $dir/storage
	  maintenance:
	    uploadpurging:
	      enabled: false
	http:
	  addr: 127.0.0.1:0
	EOC
	REGISTRY=
	docker-registry serve "$dir/config.yml" >"$dir/log" 2>&1 &
	REGISTRY_PID=$!
	await _registry_up_or_gone
	if [ -z "$REGISTRY" ]; then
		registry_stop
		echo "SKIP: docker-registry cannot start: $(tail -n 1 "$dir/log")"
		exit 77
	fi
}

# True when the registry answers on its port (REGISTRY is set then) or
# its process has ended.
_registry_up_or_gone() {
	local port
	kill -0 "$REGISTRY_PID" 2>/dev/null || return 0
	port=$(sed -n 's/.*msg="listening on 127\.0\.0\.1:\([0-9]*\)".*/\1/p' \
		"$TMPD/registry/log")
	[ -n "$port" ] && _registry_answers "$port" &&
		REGISTRY=127.0.0.1:$port
}

# _registry_answers PORT: GET /v2/ on 127.0.0.1:PORT is "200" with the
# header of a registry of the v2 API.
_registry_answers() {
	local fd line status=0 api=0
	{ exec {fd}<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
	printf 'GET /v2/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&"$fd"
	# -t: a guard against a hang, as await's bound
	while IFS= read -r -t 600 line <&"$fd"; do
		line=${line%$'\r'}
		[ -z "$line" ] && break
		[[ $line == HTTP/1.[01]\ 200\ * ]] && status=1
		shopt -s nocasematch
		[[ $line == "docker-distribution-api-version: registry/2.0" ]] &&
			api=1
		shopt -u nocasematch
	done
	exec {fd}>&-
	[ $status = 1 ] && [ $api = 1 ]
}

# registry_stop: the registry ends (SIGTERM) and is waited for.
registry_stop() {
	[ -n "${REGISTRY_PID:-}" ] || return 0
	kill "$REGISTRY_PID" 2>/dev/null
	wait "$REGISTRY_PID" 2>/dev/null
	REGISTRY_PID=
}
