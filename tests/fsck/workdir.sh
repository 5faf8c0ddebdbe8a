# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Helpers for the mk of the workdir cases (tests/fsck/cases/work*/): the
# stack is lower/ and upper/ with the workdir work/, built by really
# mounting it where the kernel makes the state (a volatile mount, an
# index), and the damage is shown to trip the kernel before fsck repairs
# it.  Each helper returns non-zero with a message when the kernel does not
# do what the case says; mk then fails (`|| return 1`: mk is sourced).
# OVL_UPPER and OVL_WORK name other upper and work directories.

_ovl_opts() {	# [MORE]
	echo "lowerdir=$PWD/lower,upperdir=$PWD/${OVL_UPPER:-upper},workdir=$PWD/${OVL_WORK:-work}${1:+,$1}"
}

# ovl_session OPTS CMD...: mount the stack read-write at .m with OPTS,
# run CMD (in .m), unmount.
ovl_session() {
	local opts=$1 rc
	shift
	mkdir -p .m
	mount -t overlay overlay -o "$(_ovl_opts "$opts")" .m || return 1
	(cd .m && "$@")
	rc=$?
	umount .m && rmdir .m && return $rc
}

# kernel_refuses OPTS: mounting the damaged stack fails.  Only for damage
# the kernel meets before it changes anything.
kernel_refuses() {
	mkdir -p .probe
	if mount -t overlay overlay -o "$(_ovl_opts "$1")" .probe 2>/dev/null
	then
		umount .probe
		echo "the kernel mounts the damaged stack (${1:-no options})"
		return 1
	fi
	rmdir .probe
}

# kernel_mounts_readonly OPTS: the damaged stack mounts, read only.
kernel_mounts_readonly() {
	local rc=0
	mkdir -p .probe
	mount -t overlay overlay -o "$(_ovl_opts "$1")" .probe || return 1
	if touch .probe/.rw-probe 2>/dev/null; then
		rm -f .probe/.rw-probe
		echo "the kernel mounts the damaged stack read-write"
		rc=1
	fi
	umount .probe && rmdir .probe && return $rc
}
