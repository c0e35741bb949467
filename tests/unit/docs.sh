#!/bin/bash
# Every option `recon-fuse --help` lists is documented: an entry in the man
# page (man/recon-fuse.8); a key of recon-fuse's own (the "recon-fuse
# options" section), unless it is test-only or command-line only, also a line
# in the sample configuration (recon.conf, commented out or not).  The
# kernel's ext3 spellings and FUSE's options (the sections after it) need the
# man page only.  --help's columns line up, and --version names the libraries.
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
failure() { echo "FAIL: $*"; fails=$((fails + 1)); }

# options SECTION_HEADING: "name test_only" for each option of that section
# (up to its blank line).  An option line starts with two spaces and a name,
# or a comma-separated list of names ("noatime, relatime, strictatime", which
# may wrap onto a next line ending in a comma); its text starts in column 30,
# and the lines that continue the text start there too.
options() {
	printf '%s\n' "$help" | sed -n "/^$1/,/^\$/p" | sed 1d | awk '
	/^$/ { next }
	substr($0, 1, 29) ~ /^ +$/ && substr($0, 30, 1) != " " { next }   # text continued
	/^  [^ ]/ {
		rest = substr($0, 3)
		while (match(rest, /^[^ ]+/)) {
			tok = substr(rest, 1, RLENGTH); rest = substr(rest, RLENGTH + 1)
			name = tok; sub(/,$/, "", name); sub(/=.*/, "", name)
			names[++k] = name
			if (tok !~ /,$/) break
			sub(/^ /, "", rest)
			if (rest == "") break
		}
		if (tok !~ /,$/ && rest != "") {
			text = rest; sub(/^ +/, "", text)
			if (length($0) - length(text) != 29) print "MISALIGNED", $0
		}
		for (j = 1; j <= k; j++) print names[j], (text ~ /^test:/)
		k = 0; text = ""
		next
	}
	{ print "MISALIGNED", $0 }'
}

while read -r key test_only; do
	[ "$key" = MISALIGNED ] && { failure "--help: a misaligned line: $test_only"; continue; }
	n=$((n + 1))
	grep -Eq "^\.(B|BI|BR|RB) .*\<${key}\>" "$man" || failure "option '$key' is not documented in $man"
	[[ $CMDLINE_ONLY == *" $key "* ]] && continue
	[ "$test_only" = 1 ] && continue
	grep -Eq "^#? *${key} *=" "$conf" || failure "option '$key' is not documented in $conf"
done < <(options 'recon-fuse options')
[ "$n" -ge 20 ] || { echo "FAIL: only $n options parsed from recon-fuse --help"; exit 1; }
own=$n
for section in "The kernel's ext3 mount options" "Passed to FUSE"; do
	before=$n
	while read -r key _; do
		[ "$key" = MISALIGNED ] && { failure "--help: a misaligned line in '$section'"; continue; }
		n=$((n + 1))
		grep -Eq "^\.(B|BI|BR|RB) .*\<${key}\>" "$man" ||
			failure "option '$key' ($section) is not documented in $man"
	done < <(options "$section")
	[ "$n" -gt "$before" ] || failure "no options parsed from --help's section '$section'"
done
# the usage lines line up with the options
printf '%s\n' "$help" | grep -E '^  -' | grep -vqE '^  .{26} [^ ]' && failure "--help: the usage lines are misaligned"

version=$("$RECON_FUSE" --version) || failure "recon-fuse --version exited $?"
[[ $version =~ libfuse\ [0-9]+\.[0-9]+ && $version =~ libext2fs\ [0-9]+\.[0-9]+ ]] ||
	failure "--version does not name the versions of libfuse and libext2fs: $version"

# the READMEs count the invariants the table has
ninv=$(grep -c '^INV(' "$RECON_SRC/checker/invariants.def")
grep -q "keeps all $ninv invariants" "$RECON_SRC/README.md" ||
	failure "README.md does not say 'keeps all $ninv invariants' (checker/invariants.def has $ninv)"
grep -q "$ninv invariants" "$RECON_SRC/tests/README.md" ||
	failure "tests/README.md does not count $ninv invariants"

echo "$n options from --help checked ($own of recon-fuse's own), $fails problems"
[ "$fails" -eq 0 ]
