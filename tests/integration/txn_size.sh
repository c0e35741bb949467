#!/bin/bash
# A transaction, by default, commits once it holds 1024 blocks when no
# other commit runs, even where the journal would take four times that: a
# commit's memory grows with its blocks, and a fast client fills a large
# transaction within the commit interval.  (While a commit runs, the next
# transaction may grow to the hard limit, a quarter of the journal, rather
# than wait for it: with async_commit=off no commit runs at a boundary, so
# the bound below does not depend on timing.)  On a 1 GiB image with a
# 64 MiB journal (a quarter of it is about 4,000 blocks), with no age limit
# (commit_interval_ms=0), so that only the size limits and the unmount close
# a transaction:
#  1. 20,000 files made in one directory (some 1,300 inode-table blocks
#     change): the stats' largest_transaction_blocks at most the limit plus
#     what one commit adds (bitmaps, descriptors, superblock: 64 here), and
#     at least half the limit (the workload fills transactions);
#  2. the same files removed with journal=off (checked writes in place): the
#     same bound;
#  3. made again with max_transaction_blocks=4096: larger than the default
#     allows (the option still raises the limit, and the workload is one
#     the default limit splits).
# e2fsck -fn is clean after each.
. "$(dirname "$0")/lib.sh"
need_root

FILES=20000 LIMIT=1024 SLACK=64
img="$SCRATCH/txn.img" mnt="$SCRATCH/mnt"
mkimg "$img" 4096 1G -J size=64

# make_files MNT / remove_files MNT: FILES empty files in MNT/d, and back.
make_files() {
	python3 - "$1/d" "$FILES" <<'EOF' || fail "creating $FILES files"
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
for i in range(n):
    os.close(os.open(f"{d}/f{i:05d}", os.O_CREAT | os.O_WRONLY, 0o644))
EOF
}
remove_files() { rm -rf "$1/d" || fail "rm -rf of $FILES files"; }

# run_case WHAT OPTS STEP: mount with OPTS, run STEP, unmount; echoes the
# largest transaction's blocks and the number of transactions.
run_case() {
	local what=$1 opts=$2 step=$3 stats="$SCRATCH/$1.json"
	mount_recon "$img" "$mnt" "commit_interval_ms=0,async_commit=off,stats=$stats${opts:+,$opts}" ||
		die "mount ($what)"
	"$step" "$mnt"
	umount_recon "$mnt"
	fsck_clean "$img" "after $what"
	[ -s "$stats" ] || die "no stats file ($what)"
	echo "$(stat_of "$stats" largest_transaction_blocks) $(stat_of "$stats" transactions)"
}

read -r big n <<<"$(run_case create "" make_files)"
echo "create, default limit: largest transaction $big blocks, $n transactions"
[ "$big" -le $((LIMIT + SLACK)) ] || fail "create: a transaction of $big blocks (limit $LIMIT)"
[ "$big" -ge $((LIMIT / 2)) ] || fail "create: largest transaction $big blocks: the workload did not fill one"

read -r big n <<<"$(run_case remove "journal=off" remove_files)"
echo "remove, journal=off: largest transaction $big blocks, $n transactions"
[ "$big" -le $((LIMIT + SLACK)) ] || fail "remove: a transaction of $big blocks (limit $LIMIT)"
[ "$big" -ge $((LIMIT / 2)) ] || fail "remove: largest transaction $big blocks: the workload did not fill one"

read -r big n <<<"$(run_case create4096 "max_transaction_blocks=4096" make_files)"
echo "create, max_transaction_blocks=4096: largest transaction $big blocks, $n transactions"
[ "$big" -gt $((LIMIT + SLACK)) ] || fail "max_transaction_blocks=4096: largest transaction only $big blocks"

finish
