#!/bin/bash
# atime: relatime by default (a read updates atime only when atime <= mtime or
# ctime, or it is a day old), noatime (never), strictatime (every read).  Each
# mode: files prepared with chosen times, a fresh mount (cold caches), reads,
# unmount, then the atimes the image holds (debugfs) and e2fsck -fn.
. "$(dirname "$0")/lib.sh"
need_root
base="$SCRATCH/base.img"
mnt="$SCRATCH/mnt"
mkimg "$base" 4096 32M
mount_recon "$base" "$mnt" || die "mount"
# recent: atime in the future (after mtime and ctime, less than a day old);
# stale: atime before mtime.
T=$(date +%s)
python3 - "$mnt" "$T" <<'PY' || fail "preparing the files"
import os, sys
m, t = sys.argv[1], int(sys.argv[2])
for name in ("recent", "stale"):
    with open(os.path.join(m, name), "wb") as f:
        f.write(b"x" * 10000)
os.utime(os.path.join(m, "recent"), (t + 3600, t - 1000))
os.utime(os.path.join(m, "stale"), (t - 2000, t - 1000))
PY
umount_recon "$mnt"
fsck_clean "$base" "after preparing"

# disk_atime IMG NAME: the atime (seconds) the image holds
disk_atime() {
	debugfs -R "stat /$2" "$1" 2>/dev/null | sed -n 's/^ *atime: *0x\([0-9a-f]*\).*/\1/p' |
		head -1 | { read -r hex; [ -n "$hex" ] && echo $((16#$hex)); }
}
[ "$(disk_atime "$base" recent)" = $((T + 3600)) ] || die "prepared atime not on disk: $(disk_atime "$base" recent)"
[ "$(disk_atime "$base" stale)" = $((T - 2000)) ] || die "prepared atime not on disk"

# mode OPTS WANT_RECENT WANT_STALE: "same" or "updated"
mode() {
	local opts=$1 want_recent=$2 want_stale=$3 img="$SCRATCH/m.img" name got want
	cp --sparse=always "$base" "$img"
	mount_recon "$img" "$mnt" "$opts" || { fail "mount with '$opts'"; return; }
	local before
	before=$(date +%s)
	cat "$mnt/recent" "$mnt/stale" >/dev/null || fail "$opts: reading"
	umount_recon "$mnt"
	fsck_clean "$img" "after reads with '$opts'"
	for name in recent stale; do
		got=$(disk_atime "$img" "$name")
		if [ "$name" = recent ]; then want=$want_recent; old=$((T + 3600)); else want=$want_stale; old=$((T - 2000)); fi
		if [ "$want" = same ]; then
			[ "$got" = "$old" ] || fail "${opts:-default}: a read of '$name' changed atime ($old -> $got)"
		else
			{ [ -n "$got" ] && [ "$got" -ge "$before" ] && [ "$got" -le $(($(date +%s) + 1)) ]; } ||
				fail "${opts:-default}: a read of '$name' did not set atime to now ($old -> $got)"
		fi
	done
	log "${opts:-default (relatime)}: recent ${want_recent}, stale ${want_stale}: checked"
}
mode ""            same    updated
mode relatime      same    updated
mode noatime       same    same
mode strictatime   updated updated
finish
