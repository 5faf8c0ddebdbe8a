# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Sourced by each test runner first: as root, the runner starts again in a
# mount namespace of its own (unshare -m, private propagation), so that
# the overlays its cases mount are seen by its own hunion runs only.
# hunion refuses to write a layer that some mounted overlay may use,
# including an overlay mounted with relative paths anywhere on the
# machine; a second test run, or any other work mounting overlays beside
# this one, would otherwise make its cases fail, and its mounts would make
# ours fail.  A case that leaves a mount behind leaves it in the namespace,
# which goes with the runner.  The namespace starts with a copy of the
# machine's mounts: an overlay mounted there with relative layer paths
# (which hunion cannot resolve, and so counts as maybe using any layer) is
# detached from the copy, not from the machine.  HUNION_TEST_MNTNS=1 says
# we are in it (the runners a runner starts stay in it).

# Detach from this namespace the overlays mounted with relative layer
# paths, unless one holds the directories the tests work in.
_hu_detach_relative_overlays() {
	local line rest fs opts o p mp relative work
	local -a list parts
	work="$(pwd -P)/ ${TMPDIR:-/tmp}/ /tmp/"
	while IFS= read -r line; do
		rest=${line#* - }
		fs=${rest%% *}
		opts=${rest##* }
		case $fs in overlay|fuse.fuse-overlayfs) ;; *) continue ;; esac
		relative=0
		IFS=, read -ra list <<<"$opts"
		for o in "${list[@]}"; do
			case $o in
			lowerdir=*|lowerdir+=*|datadir+=*|upperdir=*|workdir=*) ;;
			*) continue ;;
			esac
			IFS=: read -ra parts <<<"${o#*=}"
			for p in "${parts[@]}"; do
				case $p in /*) ;; *) relative=1 ;; esac
			done
		done
		[ $relative = 1 ] || continue
		mp=$(printf '%b' "$(cut -d' ' -f5 <<<"$line")")
		case " $work" in *" ${mp%/}/"*) continue ;; esac
		umount -l -- "$mp" 2>/dev/null &&
			echo "(tests: detached $mp, an overlay with relative paths, from the tests' own mount namespace)" >&2
	done </proc/self/mountinfo
}

if [ "$(id -u)" = 0 ] && [ -z "${HUNION_TEST_MNTNS:-}" ] &&
   command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
	export HUNION_TEST_MNTNS=new
	# through its #! line where it has one, so that its process keeps
	# its name (cases name the processes that hold a mount)
	if [ -x "$0" ]; then
		exec unshare -m --propagation private -- "$0" "$@"
	fi
	exec unshare -m --propagation private -- bash "$0" "$@"
fi
if [ "${HUNION_TEST_MNTNS:-}" = new ]; then
	HUNION_TEST_MNTNS=1
	_hu_detach_relative_overlays
fi
