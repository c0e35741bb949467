#!/bin/bash
# Every option `recon-fuse --help` lists is documented: an entry in the man
# page (man/recon-fuse.8), and, unless it is test-only or command-line only, a
# line in the sample configuration (recon.conf, commented out or not).  The
# README names the common ones and points to the man page for the rest.
# A new -o key fails this test until it is documented.
set -u
: "${RECON_FUSE:?RECON_FUSE not set (run through meson test)}"
: "${RECON_SRC:?RECON_SRC not set (run through meson test)}"
# spellings accepted on the command line only (a file sets their key instead:
# atime = "noatime"), so recon.conf need not name them
CMDLINE_ONLY=" config noatime relatime strictatime "
man=$RECON_SRC/man/recon-fuse.8 conf=$RECON_SRC/recon.conf
help=$("$RECON_FUSE" --help) || { echo "FAIL: recon-fuse --help exited $?"; exit 1; }
fails=0 n=0
missing() { echo "FAIL: option '$1' is not documented in $2"; fails=$((fails + 1)); }
# the option lines: after "recon-fuse options", up to the blank line; each
# starts with its name, or a comma-separated list of names ("noatime, relatime")
while read -r key test_only; do
	n=$((n + 1))
	grep -Eq "^\.(B|BI|BR) .*\<${key}\>" "$man" || missing "$key" "$man"
	[[ $CMDLINE_ONLY == *" $key "* ]] && continue
	[ "$test_only" = 1 ] && continue
	grep -Eq "^#? *${key} *=" "$conf" || missing "$key" "$conf"
done < <(printf '%s\n' "$help" | sed -n '/^recon-fuse options/,/^$/p' | grep '^  ' | awk '{
	i = 1
	while ($i ~ /,$/) i++
	for (k = 1; k <= i; k++) { name = $k; sub(/,$/, "", name); sub(/=.*/, "", name); print name, ($(i + 1) == "test:") }
}')
[ "$n" -ge 20 ] || { echo "FAIL: only $n options parsed from recon-fuse --help"; exit 1; }
echo "$n options from --help checked, $fails undocumented"
[ "$fails" -eq 0 ]
