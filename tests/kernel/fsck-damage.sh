#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/kernel/fsck-damage.sh HUNION [SEEDS]
#
# Random damage, repaired by hunion fsck and proven by the kernel.  For
# seeds 1..SEEDS (default 20) tests/tools/mkstack.py --healthy writes a
# random stack that holds nothing fsck reports (no lookalikes, no
# whiteouts that hide nothing, impure marks where the kernel sets them),
# in overlay form and, for about half the seeds, in union form too.  For
# each of those forms:
#   1. hunion fsck -n of the healthy stack exits 0 (no false alarm);
#   2. the merged view is recorded: the manifest of hunion merge -o, and
#      for the overlay form the kernel's (a read-only overlay mount),
#      which must agree;
# then mkstack.py --damage damages the top layer of each form in random
# ways from issue 12's list (FORM/damage.txt says what and where: orphan
# whiteouts, whiteouts in directories that merge with nothing, lookalikes
# of whiteouts, marker xattrs on the wrong entries or with wrong values,
# redundant opaque marks, leftovers of killed hunion runs, markers of
# another format, invalid or dangling redirects, redirects on files, two
# directories redirecting to one origin, a redirect origin left uncovered,
# metacopy xattrs of 1 to 3 bytes or without data beneath, a missing
# impure mark, an xattr whiteout in the top layer, overlay markers under
# user.* beside trusted.*), and for each form:
#   3. hunion fsck -n reports a problem at every damaged path (a damage
#      it misses fails the seed, unless HUNION_DAMAGE_MISSES_OK=1) and
#      exits 4 (0 when all it finds is info), changing nothing;
#   4. hunion fsck -y repairs without an operational error (exit 0 or 1),
#      and hunion fsck -n then exits 0;
#   5. every entry of the healthy view the damage did not touch is the
#      same in the view of the repaired stack (hunion merge -o), and no
#      entry appeared elsewhere;
#   6. overlay form: the repaired stack mounts, its whole view can be
#      read, and it equals hunion merge -o of the repaired stack; union
#      form: the same for the repaired layers converted to overlay format
#      with hunion whiteout convert.
# Every fsck and merge runs with --format forced to the form.  At the end,
# for each damage kind, how often fsck caught it (with the problem ID it
# was expected to report, or another one) and how often it missed it.
#
# Environment: HUNION_KEEP=DIR keeps the stacks of failing seeds;
# HUNION_DAMAGE_ONLY="3 17" runs those seeds only; HUNION_DAMAGE_KINDS=K,K
# makes each of those kinds once instead of a random choice (the kinds:
# DAMAGE in tests/tools/mkstack.py); HUNION_KERNEL_VERBOSE=1 prints
# whole diffs.
#
# Ends with "fsck-damage: N passed, N failed"; exits 1 if any failed.

SUITE="fsck-damage"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
kt_args "HUNION [SEEDS]" "$@"
SEEDS=${2:-20}
MISSES_OK=${HUNION_DAMAGE_MISSES_OK:-0}
KINDS=${HUNION_DAMAGE_KINDS:-}

kt_setup "$SEEDS"
FSTYPE=tmpfs
if ! layers_tmpfs 2g; then
	LOOPIMG=$(mktemp /tmp/hunion-fsck-damage-img.XXXXXX)
	if ! truncate -s 2G "$LOOPIMG" || ! mkfs.ext4 -q -F "$LOOPIMG" ||
	   ! mount -o loop "$LOOPIMG" "$FS" || ! xattrs_ok "$FS"; then
		skip_all "no filesystem with trusted and user xattrs for the layers"
	fi
	FSTYPE=ext4
fi
echo "fsck-damage: layers on $FSTYPE, $HUNION"
TALLY=$WORK/tally.txt
: > "$TALLY"

# The manifest of hunion merge -o of form $2 of stack $1 into $3; fails
# (saying so) when the merge does.
merged_view() {	# DIR FORM OUT
	local out=$1/merged-$2 layers
	mapfile -t layers < <(stack_layers "$1" "$2")
	rm -rf "$out"
	if ! "$HUNION" merge -q --format="$2" -o "$out" "${layers[@]}" \
		>"$1/merge-$2.log" 2>&1; then
		echo "  hunion merge of the $2 form failed:"
		head -n 5 "$1/merge-$2.log" | sed 's/^/    /'
		return 1
	fi
	manifest --holes "$out" >"$3" 2>&1
	local rc=$?
	rm -rf "$out"
	return $rc
}

# Every byte of the layers under $1, the markers' xattrs too (manifest.py
# leaves those out).
snapshot() {	# DIR
	manifest "$1" 2>&1
	(cd "$1" && getfattr -R -h -d -m - -e hex . 2>/dev/null)
}

# Steps 1 and 2 for form $2 of the healthy stack $1.
healthy_form() {	# DIR FORM LABEL
	local dir=$1 form=$2 label=$3 layers rc=0
	mapfile -t layers < <(stack_layers "$dir" "$form")
	"$HUNION" fsck -n --format="$form" "${layers[@]}" \
		>"$dir/fsck-healthy-$form.out" 2>&1 || rc=$?
	if [ "$rc" != 0 ]; then
		echo "FAIL $label $form: fsck -n of the healthy stack exits $rc:"
		head -n 8 "$dir/fsck-healthy-$form.out" | sed 's/^/  /'
		return 1
	fi
	merged_view "$dir" "$form" "$dir/healthy-$form.txt" || {
		echo "FAIL $label $form: no view of the healthy stack"
		return 1
	}
	if [ "$form" = overlay ]; then
		if ! kernel_manifest "$dir" "$dir/kernel-healthy.txt" --holes; then
			echo "FAIL $label: the kernel refuses the healthy stack"
			return 1
		fi
		if ! same "the kernel's and hunion's healthy views" \
			"$dir/kernel-healthy.txt" "$dir/healthy-overlay.txt"; then
			echo "FAIL $label: hunion merge and the kernel disagree" \
				"on the healthy stack (see tests/kernel/run.sh)"
			return 1
		fi
	fi
}

# Step 6 for the union form of stack $1: its repaired layers, converted to
# overlay format by hunion whiteout convert, mount, and the kernel shows
# what hunion merge showed of the repaired union layers.
union_proof() {	# DIR LABEL
	local dir=$1 label=$2 conv=$1/conv i
	rm -rf "$conv"
	mkdir -p "$conv/overlay" && cp "$dir/info.json" "$conv/" || return 1
	for ((i = 0; i < STACK_LAYERS; i++)); do
		if ! "$HUNION" whiteout convert -q --format=union -t overlay \
			-o "$conv/overlay/L$i" "$dir/union/L$i" \
			>"$dir/convert.log" 2>&1; then
			echo "FAIL $label union: whiteout convert of L$i failed:"
			head -n 5 "$dir/convert.log" | sed 's/^/  /'
			return 1
		fi
	done
	if ! kernel_manifest "$conv" "$dir/kernel-union.txt" --holes; then
		echo "FAIL $label union: the kernel cannot read the repaired" \
			"layers converted to overlay format"
		return 1
	fi
	if ! same "the kernel's view of the converted layers and hunion's" \
		"$dir/kernel-union.txt" "$dir/repaired-union.txt"; then
		echo "FAIL $label union: the kernel and hunion merge disagree" \
			"on the repaired layers (converted to overlay format)"
		return 1
	fi
	rm -rf "$conv"
}

# What fsck ARGS finds, its repairs and their count left out.
findings() {	# -n|-y --dry-run, ARGS...
	"$HUNION" fsck "$@" 2>&1 |
		sed 's/ -- .*$//; s/): [0-9]* \(would be \)\{0,1\}repaired.*$/)/'
}

# Detected, not forced: fsck -n settles a checked bottom layer in its own
# walk (reading it as having no markers until a probe says otherwise), a
# repair mode detects each layer first.  Both must find the same.
same_findings() {	# DIR ARGS...
	local dir=$1
	shift
	findings -n "$@" >"$dir/find-n"
	findings -y --dry-run "$@" >"$dir/find-y"
	diff -u "$dir/find-y" "$dir/find-n" >"$dir/find-diff" && return 0
	echo "  fsck -n $*, against -y --dry-run:"
	head -n 12 "$dir/find-diff" | sed 's/^/  /'
	return 1
}

# Steps 3 to 6 for form $2 of the damaged stack $1.
repair_form() {	# DIR FORM LABEL
	local dir=$1 form=$2 label=$3 layers rc=0 ok=1 line
	mapfile -t layers < <(stack_layers "$dir" "$form")
	snapshot "$dir/$form" >"$dir/damaged-$form.txt"
	"$HUNION" fsck -n --json --format="$form" "${layers[@]}" \
		>"$dir/fsck-d-$form.json" 2>"$dir/fsck-d-$form.err" || rc=$?
	if [ "$rc" != 4 ] && [ "$rc" != 0 ]; then
		echo "FAIL $label $form: fsck -n of the damaged stack exits $rc"
		head -n 5 "$dir/fsck-d-$form.err" | sed 's/^/  /'
		ok=0
	fi
	snapshot "$dir/$form" >"$dir/damaged-$form.after"
	if ! same "the damaged stack before and after fsck -n" \
		"$dir/damaged-$form.txt" "$dir/damaged-$form.after"; then
		echo "FAIL $label $form: fsck -n changed the layers"
		ok=0
	fi
	/usr/bin/python3 "$TOOLS/fsck_damage.py" caught "$dir/$form/damage.txt" \
		"$dir/fsck-d-$form.json" >"$dir/caught-$form.txt"
	sed "s/^/$form /" "$dir/caught-$form.txt" >> "$TALLY"
	if [ "$MISSES_OK" != 1 ] && grep -q '^missed ' "$dir/caught-$form.txt"
	then
		echo "FAIL $label $form: fsck -n missed damage:"
		grep '^missed ' "$dir/caught-$form.txt" | sed 's/^/  /'
		ok=0
	fi
	if ! same_findings "$dir" --all-layers "${layers[@]}" ||
	   ! same_findings "$dir" "${layers[-1]}"; then
		echo "FAIL $label $form: fsck -n detected finds otherwise"
		ok=0
	fi
	rc=0
	"$HUNION" fsck -y --format="$form" "${layers[@]}" \
		>"$dir/fsck-y-$form.out" 2>&1 || rc=$?
	if [ "$rc" != 0 ] && [ "$rc" != 1 ]; then
		echo "FAIL $label $form: fsck -y exits $rc:"
		grep -v ' -- repaired: ' "$dir/fsck-y-$form.out" | head -n 6 |
			sed 's/^/  /'
		ok=0
	fi
	rc=0
	"$HUNION" fsck -n --format="$form" "${layers[@]}" \
		>"$dir/fsck-n-$form.out" 2>&1 || rc=$?
	if [ "$rc" != 0 ]; then
		echo "FAIL $label $form: fsck -n after fsck -y exits $rc:"
		head -n 8 "$dir/fsck-n-$form.out" | sed 's/^/  /'
		ok=0
	fi
	rm -f "$dir/repaired-$form.txt"
	if ! merged_view "$dir" "$form" "$dir/repaired-$form.txt"; then
		rm -f "$dir/repaired-$form.txt"
		echo "FAIL $label $form: no view of the repaired stack"
		ok=0
	elif ! /usr/bin/python3 "$TOOLS/fsck_damage.py" healthy \
		"$dir/healthy-$form.txt" "$dir/repaired-$form.txt" \
		"$dir/$form/damage.txt" >"$dir/healthy-$form.cmp"; then
		echo "FAIL $label $form: the repair changed healthy entries:"
		cat "$dir/healthy-$form.cmp"
		ok=0
	fi
	if [ "$form" = overlay ] && [ -s "$dir/repaired-$form.txt" ]; then
		if ! kernel_manifest "$dir" "$dir/kernel-repaired.txt" --holes; then
			echo "FAIL $label: the kernel cannot read the repaired stack"
			ok=0
		elif ! same "the kernel's and hunion's repaired views" \
			"$dir/kernel-repaired.txt" "$dir/repaired-overlay.txt"; then
			echo "FAIL $label: the kernel and hunion merge disagree" \
				"on the repaired stack"
			ok=0
		fi
	fi
	if [ "$form" = union ] && [ -s "$dir/repaired-$form.txt" ]; then
		union_proof "$dir" "$label" || ok=0
	fi
	[ "$ok" = 1 ] || {
		while read -r line; do echo "  damage: $line"; done \
			< "$dir/$form/damage.txt"
		return 1
	}
}

run_seed() {	# SEED
	local seed=$1 label="seed $1" dir=$FS/stack ok=1 form forms=''
	local args=(--seed "$seed" --healthy)
	new_stack "$label" "${args[@]}" || return
	for form in $STACK_FORMS; do
		case $form in overlay|union) forms="$forms $form" ;; esac
	done
	for form in $forms; do
		healthy_form "$dir" "$form" "$label" || ok=0
	done
	if [ "$ok" = 1 ]; then
		if ! /usr/bin/python3 "$TOOLS/mkstack.py" --out "$dir" \
			"${args[@]}" --damage ${KINDS:+--damage-kinds "$KINDS"} \
			>"$dir/damage.log" 2>&1; then
			echo "FAIL $label: mkstack.py --damage failed"
			tail -n 5 "$dir/damage.log" | sed 's/^/  /'
			ok=0
		fi
	fi
	if [ "$ok" = 1 ]; then
		for form in $forms; do
			repair_form "$dir" "$form" "$label" || ok=0
		done
	fi
	stack_result $ok "$label" "${args[@]}" \
		${KINDS:+--damage-kinds "$KINDS"}
}

seeds=$(seq 1 "$SEEDS")
[ -n "${HUNION_DAMAGE_ONLY:-}" ] && seeds=$HUNION_DAMAGE_ONLY
for seed in $seeds; do
	run_seed "$seed"
done

# form, caught|missed, kind, expected ID, path[, as, IDs]
echo "fsck-damage: what fsck -n reported at the damaged paths, by kind:"
awk '{
	k = $3 " (" $1 ")"
	if (!(k in n)) order[++m] = k
	n[k]++
	if ($2 == "missed") miss[k]++
	else if ($6 == "as") other[k] = other[k] " " $7
}
END {
	for (i = 1; i <= m; i++) {
		k = order[i]
		printf "  %-40s caught %d of %d%s\n", k, n[k] - miss[k], n[k], \
			other[k] != "" ? " (as:" other[k] ")" : ""
	}
}' "$TALLY" | LC_ALL=C sort
finish
