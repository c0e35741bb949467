#!/bin/bash
# Buffered reads racing asynchronous O_DIRECT writes of the same range
# (dio_race, the design of xfstests generic/451): after each round of direct
# writes completes, a buffered read must see it.  A read-write O_DIRECT fd
# and a write-only one, on recon-fuse and on the kernel's ext3.
# DIO_RACE_SECONDS sets each run's length (default 5).
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_explore.sh"
need_root
have_kernel_ext3 || skip "no kernel ext3"
[ -x "$DIO_RACE" ] || die "dio_race not built: $DIO_RACE"
SECS=${DIO_RACE_SECONDS:-5}
race_both() {   # DIR
	"$DIO_RACE" -t "$SECS" "$1/rw" && "$DIO_RACE" -w -t "$SECS" "$1/wo"
}
img="$SCRATCH/dio.img"
mkimg "$img" 4096 256M
recon_run "$img" "dio_race" race_both "$SCRATCH/mnt"
mkimg "$img" 4096 256M
kernel_run "$img" "dio_race" race_both "$SCRATCH/kmnt"
finish
