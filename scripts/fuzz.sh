#!/usr/bin/env bash
# Runs each fuzz target named as pkg:Target for FUZZTIME, one after another
# (make fuzz; docs/fuzzing.md).
#
# Go 1.26's fuzzing coordinator can fail a target at the end of its time
# with a bare "context deadline exceeded" and no failing input: its workers'
# stop races the deadline (golang/go#75804, fixed in Go 1.27). Such a run
# found nothing, so the target is run once more; a second bare deadline, or
# any failure that writes an input under testdata/fuzz/, fails.
set -uo pipefail

go=${GO:-go}
fuzztime=${FUZZTIME:-30s}
read -r -a flags <<<"${FUZZFLAGS:-}"

# The files under a target's corpus directory, one per line, sorted.
corpus() { find "$1" -type f 2>/dev/null | sort; }

for t in "$@"; do
	pkg=${t%%:*} name=${t#*:}
	dir=$pkg/testdata/fuzz/$name
	for try in 1 2; do
		echo "fuzz: $name in $pkg for $fuzztime"
		before=$(corpus "$dir")
		out=$(mktemp)
		"$go" test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" "${flags[@]}" "$pkg/" 2>&1 | tee "$out"
		rc=${PIPESTATUS[0]}
		after=$(corpus "$dir")
		# The coordinator's race prints the deadline as the target's only
		# error line, right under its FAIL line.
		race=0
		if [ "$rc" != 0 ] && [ "$before" = "$after" ] &&
			grep -A1 -- "^--- FAIL: $name " "$out" | tail -n1 | grep -qx '    context deadline exceeded'; then
			race=1
		fi
		rm -f "$out"
		[ "$rc" = 0 ] && break
		if [ "$race" = 1 ] && [ "$try" = 1 ]; then
			echo "fuzz: $name stopped on the fuzzing coordinator's deadline race with no failing input; running it once more" >&2
			continue
		fi
		echo "fuzz: $name failed (exit $rc)" >&2
		exit 1
	done
done
