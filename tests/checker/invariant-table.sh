#!/bin/bash
# The invariant table (checker/invariants.def, printed by recon-check
# --list-invariants) against what documents and tests it: checker/README.md
# has one table row per invariant, in the table's order and with its words,
# and test_invariants has a breaking case for each (tests/checker/meson.build
# runs one test per row, derived from the same table).
set -u
: "${RECON_CHECK:?run through meson test}" "${RECON_SRC:?}" "${RECON_BUILD:?}"
readme="$RECON_SRC/checker/README.md"
cases="$RECON_BUILD/tests/checker/test_invariants"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

table=$("$RECON_CHECK" --list-invariants | sed 's/^\(INV_[A-Z0-9_]*\) *\(.*\)$/\1|\2/')
[ -n "$table" ] || fail "recon-check --list-invariants printed nothing"
rows=$(sed -n 's/^| \(INV_[A-Z0-9_]*\) | \(.*\) | .* |$/\1|\2/p' "$readme")
while IFS='|' read -r id words; do
	line=$(printf '%s\n' "$rows" | grep -F -- "$id|" | head -1)
	if [ -z "$line" ]; then
		fail "$id has no row in checker/README.md"
	elif [ "${line#*|}" != "$words" ]; then
		fail "$id: README says \"${line#*|}\", the table \"$words\""
	fi
done <<<"$table"
[ "$(cut -d'|' -f1 <<<"$rows")" = "$(cut -d'|' -f1 <<<"$table")" ] ||
	fail "README's rows are not the table's ids in the table's order"
have=$("$cases" --list-cases | sort -u)
for id in $(cut -d'|' -f1 <<<"$table"); do
	grep -qx -- "$id" <<<"$have" || fail "$id has no breaking case in test_invariants"
done
for id in $have; do
	grep -q -- "^$id|" <<<"$table" || fail "test_invariants has a case for $id, which is not in the table"
done
echo "$(wc -l <<<"$table") invariants; $fails failure(s)"
[ "$fails" -eq 0 ]
