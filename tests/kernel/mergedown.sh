#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/kernel/mergedown.sh HUNION [SEEDS]
#
# The kernel proof of merge --into.  For seeds 1..SEEDS (default 40)
# tests/tools/mkstack.py generates a random stack; its top layer is merged
# down into the one beneath (on a copy), and tests/tools/mergedown_crash.py
# --clean-only checks the result: the kernel mounts the remaining stack
# (read only; with no options at all unless its own layers hold redirects
# or metacopy files, which then need redirect_dir=follow,metacopy=on) and
# shows exactly the view the kernel showed of the whole stack; no private
# xattr is left but the markers layers beneath still need; the layers
# beneath the target are unchanged byte for byte.  The overlay form is
# merged with --format=overlay (some seeds hold lookalikes of other
# formats' markers); the union form, where the seed wrote one, is
# compared through `hunion merge -o` of the stack before and after (the
# kernel has no union filesystem; tests/kernel/run.sh checks that view
# against the kernel's for the same seeds).
#
# A stack that merge --into refuses (a redirect it does not handle, see
# hunion-merge(1)) counts as refused, not failed.
#
# The seeds in HUNION_MERGEDOWN_KILL (a list; none by default) are also
# killed at every step and re-run (mergedown_crash.py without
# --clean-only): each re-run must finish with the same checks.
#
# HUNION_MERGEDOWN_KEEP=1 merges with --keep-upper: the top layer must
# then be left unchanged (but for its record union.mergedown-kept), and
# a second run must change nothing.
#
# Ends with "mergedown: N passed, N failed, N refused" ("mergedown-keep:"
# with HUNION_MERGEDOWN_KEEP=1); exits 1 if any
# failed.

SUITE="mergedown"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
kt_args "HUNION [SEEDS]" "$@"
SEEDS=${2:-40}
refused=0
kt_setup "$SEEDS"
layers_tmpfs 4g || skip_all "no tmpfs with trusted and user xattrs"

KOPTS=redirect_dir=follow,metacopy=on
for seed in $(seq 1 "$SEEDS"); do
	dir=$FS/stack
	rm -rf "$dir"
	/usr/bin/python3 "$TOOLS/mkstack.py" --seed "$seed" --out "$dir" \
		>/dev/null || { echo "FAIL seed $seed: mkstack"; failed=$((failed + 1)); continue; }
	n=$(info "$dir" 'i["layers"]')
	ux=$(info "$dir" 'i["userxattr"]')
	forms=$(info "$dir" '" ".join(i["forms"])')
	ok=1 ref=0
	for form in $forms; do
		[ "$form" = oci ] && continue
		layers=()
		for i in $(seq 0 $((n - 1))); do layers+=("$dir/$form/L$i"); done
		args=(--format="$form")
		[ "${HUNION_MERGEDOWN_KEEP:-0}" = 1 ] && args+=(--keep-upper)
		kopt=--kernel=$KOPTS
		[ "$ux" = True ] && { args+=(--userxattr); kopt=--kernel=userxattr; }
		[ "$form" = union ] && kopt=
		mode=--clean-only
		case " ${HUNION_MERGEDOWN_KILL:-} " in
		*" $seed "*) mode= ;;
		esac
		out=$(cd "$FS" && /usr/bin/python3 "$TOOLS/mergedown_crash.py" \
			$mode $kopt "${args[@]}" -- "$HUNION" \
			"${layers[@]}" 2>&1)
		case $out in
		*"clean run: the view kept"*"kill: "*"each finished by a re-run: the view kept"*) ;;
		*"clean run: the view kept"*)
			[ -z "$mode" ] && { ok=0; echo "FAIL seed $seed $form (killed)"
				echo "$out" | head -n 8 | sed 's/^/  /'; } ;;
		*"not supported"*|*"merge those first"*)
			ref=1
			echo "refused: seed $seed $form: ${out#*: }" | head -n 1 ;;
		*)
			ok=0
			echo "FAIL seed $seed $form ($n layers)"
			echo "$out" | head -n 8 | sed 's/^/  /' ;;
		esac
	done
	if [ $ok = 0 ]; then
		failed=$((failed + 1))
	elif [ $ref = 1 ]; then
		refused=$((refused + 1))
	else
		passed=$((passed + 1))
	fi
done
label=mergedown
[ "${HUNION_MERGEDOWN_KEEP:-0}" = 1 ] && label=mergedown-keep
echo "$label: $passed passed, $failed failed, $refused refused"
[ "$failed" = 0 ]
