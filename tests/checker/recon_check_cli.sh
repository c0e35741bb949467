#!/bin/bash
# tests/checker/recon_check_cli.sh: what recon-check prints and the exit
# status it gives.  Two unrelated images: exit 2, one line.  --help on
# stdout (0), --version naming libext2fs.  A superblock free count edited
# (e2fsck -fn accepts it): --scan exits 0 with a note.  A damaged image:
# exit 1, one line per problem without the invariant's description, then a
# verdict line and a legend naming each invariant once, in words about a
# state for --scan and about a transition for a pair.  Quiet on success,
# a summary line with --verbose.  One corrupted UUID is still judged.
set -u
: "${RECON_CHECK:?run through meson test}"
command -v debugfs >/dev/null && command -v e2fsck >/dev/null || { echo "SKIP: no e2fsprogs"; exit 77; }
work=$(mktemp -d /tmp/recon-check-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }

# run ARGS...: recon-check's stdout, stderr and status in $out, $err, $rc
run() {
	"$RECON_CHECK" "$@" >"$work/out" 2>"$work/err"
	rc=$?
	out=$(cat "$work/out") err=$(cat "$work/err")
}
mkimg() { mke2fs -q -F -t ext3 -b 1024 "$1" 8M >/dev/null 2>&1 || { echo "FAIL: mke2fs"; exit 1; }; }
edit() { local img=$1; shift; printf '%s\n' "$@" | debugfs -w "$img" >/dev/null 2>&1; }

mkimg "$work/a.img"
mkimg "$work/b.img"
echo hello >"$work/small"

# two unrelated file systems of one size: cannot judge
run "$work/a.img" "$work/b.img"
if [ "$rc" -eq 2 ] && [ -z "$out" ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] &&
   [[ $err == *"different file systems"* ]]; then
	ok "unrelated images: exit 2, one line"
else
	fail "unrelated images: exit $rc, $(printf '%s\n' "$out" | wc -l) lines on stdout, stderr: $(printf '%s\n' "$err" | head -2)"
fi

# one corrupted field (the UUID) of a copy is a transition to judge: rejected
cp "$work/a.img" "$work/uuid.img"
edit "$work/uuid.img" "ssv uuid 01234567-89ab-cdef-0123-456789abcdef"
run "$work/a.img" "$work/uuid.img"
if [ "$rc" -eq 1 ] && [[ $out == INV_SB_FROZEN:* ]]; then
	ok "a copy with another UUID: judged, rejected"
else
	fail "a copy with another UUID: exit $rc (want 1, INV_SB_FROZEN): $(head -2 "$work/out") $err"
fi

# --help on stdout, exit 0; --version names the tool and libext2fs
run --help
if [ "$rc" -eq 0 ] && [[ $out == usage:* ]] && [ -z "$err" ]; then
	ok "--help: stdout, exit 0"
else
	fail "--help: exit $rc, stdout [$out], stderr [$err]"
fi
run --no-such-option
[ "$rc" -eq 2 ] && [ -z "$out" ] && [[ $err == *usage:* ]] && ok "a bad option: usage on stderr, exit 2" ||
	fail "a bad option: exit $rc, stdout [$out]"
run --version
libver=$(debugfs -V 2>&1 | sed -n 's/.*EXT2FS Library version \([0-9.]*\).*/\1/p')
if [ "$rc" -eq 0 ] && [[ $out =~ ^recon-check\ [0-9]+\.[0-9]+\.[0-9]+\ \(libext2fs\ ([0-9.]+), ]] &&
   { [ -z "$libver" ] || [ "${BASH_REMATCH[1]}" = "$libver" ]; }; then
	ok "--version: $out"
else
	fail "--version: exit $rc, [$out] (libext2fs $libver)"
fi

# the superblock's free counts are advisory, as for e2fsck and the mount
for field in free_blocks_count free_inodes_count; do
	cp "$work/a.img" "$work/free.img"
	edit "$work/free.img" "ssv $field 12345"
	e2fsck -fn "$work/free.img" >/dev/null 2>&1 || { fail "$field: e2fsck -fn does not accept the case itself"; continue; }
	run --scan "$work/free.img"
	if [ "$rc" -eq 0 ] && [ -z "$out" ] && [[ $err == *note:*12345* ]]; then
		ok "$field 12345: --scan exits 0 with a note"
	else
		fail "$field 12345: --scan exit $rc, stdout [$out], stderr [$err]"
	fi
done

# a damaged image: one line per problem, a verdict line, a legend
cp "$work/a.img" "$work/bad.img"
edit "$work/bad.img" "write $work/small f1" "write $work/small f2" "sif f1 links_count 5" \
	"sif f2 links_count 7" "sif f2 mode 0170644"
run --scan "$work/bad.img"
problems=$(grep -c '^INV_' "$work/out")
verdict=$(grep -E "^$work/bad.img: not consistent: [0-9]+ problems?, [0-9]+ invariants?:$" "$work/out")
legend=$(grep '^  INV_' "$work/out")
nlegend=$(printf '%s\n' "$legend" | grep -c .)
uniq_legend=$(printf '%s\n' "$legend" | awk '{ print $1 }' | sort -u | wc -l)
ids=$(grep '^INV_' "$work/out" | cut -d: -f1 | sort -u | wc -l)
links_desc=$("$RECON_CHECK" --list-invariants | awk '$1 == "INV_LINKS_COUNT" { $1 = ""; sub(/^ +/, ""); print }')
if [ "$rc" -eq 1 ] && [ "$problems" -ge 3 ] && [ -n "$verdict" ] &&
   [[ $verdict == *": $problems problems, $ids invariants:" ]] &&
   [ "$nlegend" -eq "$ids" ] && [ "$uniq_legend" -eq "$ids" ] &&
   [ "$(wc -l <"$work/out")" -eq $((problems + 1 + ids)) ] &&
   ! grep '^INV_' "$work/out" | grep -qF "$links_desc"; then
	ok "damaged image: $problems problem lines, $ids invariants in the legend"
else
	fail "damaged image: exit $rc, $problems problem lines, verdict [$verdict], $nlegend legend lines for $ids ids:"
	sed 's/^/    /' "$work/out" | head -20
fi
# --scan's legend speaks of a state; the pair's of a transition
if [ -z "$legend" ] || printf '%s\n' "$legend" | grep -q 'changes by'; then
	fail "the scan's legend is missing or describes transitions: $(printf '%s\n' "$legend" | head -2)"
else
	ok "the scan's legend speaks of a state"
fi
run "$work/a.img" "$work/bad.img"
if [ "$rc" -eq 1 ] && grep -q '^  INV_LINKS_COUNT .*changes by' "$work/out" &&
   grep -qE "^$work/a.img -> $work/bad.img: rejected: " "$work/out"; then
	ok "a rejected pair: verdict line and a legend about transitions"
else
	fail "a rejected pair: exit $rc:"; sed 's/^/    /' "$work/out" | tail -5
fi
run --scan --list-invariants
scan_ids=$(printf '%s\n' "$out" | awk '{ print $1 }')
if [ "$rc" -eq 0 ] && [ "$scan_ids" = "$("$RECON_CHECK" --list-invariants | awk '{ print $1 }')" ] &&
   ! printf '%s\n' "$out" | grep -q 'changes by' && ! printf '%s\n' "$out" | grep -qvE '^INV_[A-Z0-9_]+ +[a-z]'; then
	ok "--scan --list-invariants: every invariant, in words about a state"
else
	fail "--scan --list-invariants: exit $rc: $(printf '%s\n' "$out" | grep 'changes by' | head -2)"
fi

# quiet on success; --verbose says so in one line
run --scan "$work/a.img"
[ "$rc" -eq 0 ] && [ -z "$out" ] && [ -z "$err" ] && ok "a clean scan prints nothing" ||
	fail "a clean scan: exit $rc, [$out] [$err]"
run --verbose --scan "$work/a.img"
if [ "$rc" -eq 0 ] && [[ $out =~ ^$work/a.img:\ consistent\ \(2048\ inodes,\ 8192\ blocks ]]; then
	ok "--verbose clean scan: $out"
else
	fail "--verbose clean scan: exit $rc, [$out]"
fi
cp "$work/a.img" "$work/later.img"
edit "$work/later.img" "mkdir newdir"
run "$work/a.img" "$work/later.img"
[ "$rc" -eq 0 ] && [ -z "$out" ] && ok "an approved pair prints nothing" || fail "an approved pair: exit $rc, [$out]"
run --verbose "$work/a.img" "$work/later.img"
if [ "$rc" -eq 0 ] && [ "$(printf '%s\n' "$out" | tail -1 | grep -cE ": approved \([0-9]+ blocks changed, [0-9]+ change records\)$")" -eq 1 ]; then
	ok "--verbose approved pair: $(printf '%s\n' "$out" | tail -1)"
else
	fail "--verbose approved pair: exit $rc, last line [$(printf '%s\n' "$out" | tail -1)]"
fi
echo "$fails failure(s)"
[ "$fails" -eq 0 ]
