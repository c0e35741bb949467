#!/bin/bash
# Known gap: dio_race (buffered reads racing asynchronous O_DIRECT writes)
# with requests served in parallel, here threads=2 through /dev/fuse; the
# per-CPU queues of fuse_uring=on/auto do the same.  A READ the kernel queued
# after a WRITE of the same range may be answered first; the page it fills
# keeps the old data after the write completed.  One /dev/fuse reader (the
# default) answers in the kernel's order and passes dio_race.sh.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_explore.sh"
need_root
[ -x "$DIO_RACE" ] || die "dio_race not built: $DIO_RACE"
img="$SCRATCH/dio.img"
mkimg "$img" 4096 256M
EXPLORE_RECON_OPTS=threads=2 recon_run "$img" "dio_race, threads=2" \
	"$DIO_RACE" -t "${DIO_RACE_SECONDS:-5}" "$SCRATCH/mnt/rw"
finish
