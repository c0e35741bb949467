#!/bin/bash
# An open racing the rename that removes the name it looked up
# (open_race.py): on recon-fuse the OPEN can reach an inode that the rename
# already freed (the daemon frees at the last unlink when no file handle is
# open, while the kernel still holds the inode from LOOKUP), so writes land in
# a freed or reused inode: EISDIR/EIO and leaked blocks (the checker rejects
# the commit: INV_BBITMAP_SET).  The kernel's ext3 runs it clean.
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
