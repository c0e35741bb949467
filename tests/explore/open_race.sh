#!/bin/bash
# An open racing the rename that removes the name it looked up
# (open_race.py): the OPEN reaches an inode the rename unlinked while the
# kernel still held it from LOOKUP, so the daemon must keep it (on the orphan
# list) until the kernel's FORGET and the last RELEASE; freed at the unlink,
# writes would land in a freed or reused inode (EISDIR/EIO, leaked blocks the
# checker rejects: INV_BBITMAP_SET).  Both drivers must run it clean.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_explore.sh"
need_root
have_kernel_ext3 || skip "no kernel ext3"
SECS=${OPEN_RACE_SECONDS:-10}
img="$SCRATCH/race.img"
mkimg "$img" 1024 256M
kernel_run "$img" "open_race" python3 "$RECON_SRC/tests/explore/open_race.py" "$SCRATCH/kmnt" "$SECS"
mkimg "$img" 1024 256M
recon_run "$img" "open_race" python3 "$RECON_SRC/tests/explore/open_race.py" "$SCRATCH/mnt" "$SECS"
finish
