#!/bin/bash
# Configuration, as README.md and recon-fuse(8) define it, through the real binary: unknown keys
# and bad values are refused at mount (non-zero exit, a message naming the
# key, and for a config file that cannot be read, why); test-only keys are
# refused from a config file; every spelling of the kernel's ext3 options is
# accepted, or refused with the reason; booleans accept
# on/off/true/false/1/0; precedence is defaults < file < -o, each shown by a
# value observable from outside (a read-only mount; blocks_checked in the
# stats); a missing device, a missing config file and an image that is not
# ext2/3 exit non-zero with a message.
. "$RECON_SRC/tests/integration/lib.sh"
need_root
img="$SCRATCH/cfg.img"
mnt="$SCRATCH/mnt"
mkimg "$img" 4096 32M

# refused OPTS WORD...: recon-fuse with -o OPTS must exit non-zero without
# mounting, and its message must contain every WORD.
refused() {
	local opts=$1 w; shift
	if mount_recon "$img" "$mnt" "$opts" 2>/dev/null; then
		fail "-o $opts: mounted, want a refusal"
		umount_recon "$mnt"
		return
	fi
	[ "$RECON_STATUS" -ne 0 ] && [ "$RECON_STATUS" -lt 128 ] ||
		fail "-o $opts: exit status $RECON_STATUS, want a non-zero exit (no signal, no hang)"
	for w; do
		grep -qF -- "$w" "$RECON_LOG" || fail "-o $opts: the message does not name '$w': $(head -3 "$RECON_LOG")"
	done
}

# writable OPTS: 0 if a file can be created on a mount with OPTS, 1 on EROFS
writable() {
	local rc
	mount_recon "$img" "$mnt" "$1" || { fail "mount -o $1"; return 2; }
	if touch "$mnt/probe.$MOUNT_SEQ" 2>"$SCRATCH/touch.err"; then rc=0
	elif grep -q 'Read-only file system' "$SCRATCH/touch.err"; then rc=1
	else fail "-o $1: touch: $(cat "$SCRATCH/touch.err")"; rc=2; fi
	umount_recon "$mnt"
	return $rc
}

# blocks_checked OPTS: creates a new file, writes and fsyncs it on a mount
# with OPTS; sets CHECKED to the stats' blocks_checked (0 when the checker is
# off; -1 when the run failed, recorded as a failure).
RUNS=0
blocks_checked() {
	RUNS=$((RUNS + 1))
	local stats="$SCRATCH/stats.$RUNS.json"
	CHECKED=-1
	mount_recon "$img" "$mnt" "$1${1:+,}stats=$stats" || { fail "mount -o $1"; return; }
	python3 -c 'import os,sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"x" * 10000); os.fsync(fd); os.close(fd)' "$mnt/f.$RUNS" ||
		fail "-o $1: write"
	umount_recon "$mnt"
	CHECKED=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["blocks_checked"])' "$stats") ||
		{ fail "-o $1: no blocks_checked in the stats"; CHECKED=-1; }
}

# 1. unknown keys and bad values from -o
refused "no_such_key=1" no_such_key
refused "no_such_flag" no_such_flag
refused "checker=maybe" checker maybe
refused "journal=2" journal
refused "block_cache_mb=lots" block_cache_mb lots
refused "block_cache_mb=-1" block_cache_mb
refused "on_violation=ignore" on_violation ignore
refused "atime=sometimes" atime
refused "poll_us=20000" poll_us 10000
refused "fault_corrupt=no_such_kind@1" fault_corrupt
refused "config=$SCRATCH/missing.conf" missing.conf "No such file or directory"
refused "config=$SCRATCH" "config file $SCRATCH" "Is a directory"

# 2. the config file: unknown keys, bad values, test-only keys are refused
conf="$SCRATCH/recon.conf"
cfg_refused() {   # cfg_refused TEXT WORD...
	local text=$1; shift
	printf '%s\n' "$text" >"$conf"
	refused "config=$conf" "$@"
}
cfg_refused 'no_such_key = 1;' no_such_key
cfg_refused 'checker = "maybe";' checker maybe
cfg_refused 'fault_seed = 3;' fault_seed
cfg_refused 'deterministic = true;' deterministic
cfg_refused 'fault_crash_after = 100;' fault_crash_after
cfg_refused 'stats = "/tmp/x.json";' stats
cfg_refused 'block_cache_mb = "lots";' block_cache_mb
cfg_refused 'this is not a config file' "$conf"
# the sample the repository installs as /etc/recon-fuse.conf is accepted
if [ -f "$RECON_SRC/recon.conf" ]; then
	writable "config=$RECON_SRC/recon.conf" || fail "the repository's recon.conf is not accepted as a writable default"
fi

# 3. booleans: every spelling, from -o, observable in the stats
for v in on true 1; do
	blocks_checked "checker=$v"; n=$CHECKED
	[ "$n" -gt 0 ] || fail "-o checker=$v: blocks_checked $n, want > 0"
done
for v in off false 0; do
	blocks_checked "checker=$v"; n=$CHECKED
	[ "$n" -eq 0 ] || fail "-o checker=$v: blocks_checked $n, want 0"
done
# and from the file (libconfig booleans, strings and integers)
for pair in 'true:on' '"on":on' '1:on' 'false:off' '"off":off' '0:off' '"false":off' '"true":on'; do
	printf 'checker = %s;\n' "${pair%:*}" >"$conf"
	blocks_checked "config=$conf"; n=$CHECKED
	if [ "${pair#*:}" = on ]; then
		[ "$n" -gt 0 ] || fail "file checker = ${pair%:*}: blocks_checked $n, want > 0"
	else
		[ "$n" -eq 0 ] || fail "file checker = ${pair%:*}: blocks_checked $n, want 0"
	fi
done

# 4. precedence: defaults < file < -o
blocks_checked ""; n=$CHECKED
[ "$n" -gt 0 ] || fail "default: blocks_checked $n, want > 0 (checker on by default)"
printf 'checker = false;\n' >"$conf"
blocks_checked "config=$conf"; n=$CHECKED
[ "$n" -eq 0 ] || fail "file checker = false: blocks_checked $n, want 0 (the file overrides the default)"
blocks_checked "config=$conf,checker=on"; n=$CHECKED
[ "$n" -gt 0 ] || fail "file checker = false, -o checker=on: blocks_checked $n, want > 0 (-o overrides the file)"
blocks_checked "checker=on,config=$conf"; n=$CHECKED
[ "$n" -gt 0 ] || fail "-o checker=on before config=: blocks_checked $n, want > 0 (-o overrides the file wherever it stands)"

writable ""; [ $? -eq 0 ] || fail "default: not writable"
printf 'ro = true;\n' >"$conf"
writable "config=$conf"; [ $? -eq 1 ] || fail "file ro = true: writable, want EROFS"
writable "config=$conf,rw"; [ $? -eq 0 ] || fail "file ro = true, -o rw: not writable (-o must win)"
printf 'ro = false;\n' >"$conf"
writable "config=$conf,ro"; [ $? -eq 1 ] || fail "file ro = false, -o ro: writable, want EROFS"

# 6. the kernel's ext3 mount options (fstab lines written for it; mount.fuse3
# passes them): accepted where they can be honoured, refused by name where not
writable "acl,user_xattr,errors=remount-ro,data=ordered,commit=5,nodiratime,lazytime,barrier,nobarrier,barrier=1,noauto_da_alloc,auto_da_alloc,dirsync,async" ||
	fail "the kernel's ext3 options were not all accepted"
refused "norecovery,rw" norecovery "requires ro"
writable "noacl,nouser_xattr,data=writeback,errors=continue,commit=0" || fail "noacl,nouser_xattr,data=writeback,errors=continue,commit=0 refused"
refused "data=journal" "data=journal" "metadata only"
refused "data=sometimes" data sometimes
refused "errors=ignore" errors ignore
refused "commit=soon" commit soon
refused "commit=5000000" commit
refused "acl=maybe" acl maybe
# every other spelling the kernel's ext3 driver accepts: a meaning here
# (grpid, resuid=, resgid=, minixdf and their other names), no effect (the
# reason in --help), or refused with the reason
writable "grpid,bsdgroups,nogrpid,sysvgroups,grpid=off,resuid=0,resgid=0,resuid=root,resgid=root,minixdf,bsddf,data_err=ignore" ||
	fail "grpid, resuid=, resgid=, minixdf and their spellings were not all accepted"
writable "barrier=0,discard,nodiscard,block_validity,noblock_validity,journal_checksum,nojournal_checksum,delalloc,nodelalloc,auto_da_alloc=1,min_batch_time=0,max_batch_time=15000,journal_ioprio=3,diratime,nolazytime,i_version,bh,nobh,orlov,oldalloc,mblk_io_submit,nomblk_io_submit,prefetch_block_bitmaps,reservation,noreservation,check=none,nocheck" ||
	fail "the kernel's no-op ext3 options (first half) were not all accepted"
writable "warn_on_error,nowarn_on_error,debug_want_extra_isize=32,stripe=4,mb_optimize_scan=0,inode_readahead_blks=64,no_prefetch_block_bitmaps,init_itable,init_itable=10,noinit_itable,nombcache,no_mbcache,dioread_nolock,nodioread_nolock,dioread_lock,inlinecrypt,noquota,usrjquota=,grpjquota=" ||
	fail "the kernel's no-op ext3 options (second half) were not all accepted"
for q in quota usrquota grpquota prjquota jqfmt=vfsv0 usrjquota=aquota.user grpjquota=aquota.group; do
	refused "$q" "-o $q" "quotas are not supported"
done
refused "journal_async_commit" journal_async_commit "on-disk format"
refused "data_err=abort" data_err=abort "read-only on one is not supported"
refused "nouid32" nouid32 "32 bits"
refused "sb=8193" sb=8193 "e2fsck -b"
refused "journal_dev=2049" journal_dev "external journals"
refused "journal_path=/dev/sdz" journal_path "external journals"
refused "max_dir_size_kb=100" max_dir_size_kb "not supported"
refused "dax" dax "FUSE"
refused "abort" abort "mount with ro"
refused "test_dummy_encryption" test_dummy_encryption "encryption"
refused "barrier=yes" barrier yes "no value or a number"
refused "journal_ioprio=8" journal_ioprio "0 to 7"
refused "stripe" stripe "takes a number"
refused "noacl=1" noacl "takes no value"
refused "data_err=sometimes" data_err sometimes "data_err=ignore"
refused "grpid=maybe" grpid maybe
refused "resuid=no-such-user-here" resuid no-such-user-here
refused "resgid=-1" resgid
refused "resuid=4294967295" resuid
# a configuration file sets keys; the kernel's spellings are named as such
cfg_refused 'nogrpid = true;' nogrpid "from -o only"
cfg_refused 'barrier = 1;' barrier "from -o only"
printf 'grpid = true;\nresuid = "root";\nresgid = 0;\nminixdf = true;\n' >"$conf"
writable "config=$conf" || fail "grpid, resuid, resgid, minixdf from a config file refused"
# errors=panic stops the file system at a rejected commit (exit 2), as
# on_violation=stop; errors=remount-ro turns it read-only
mount_recon "$img" "$mnt" "errors=panic,deterministic,fault_corrupt=bbitmap@1" || fail "mount errors=panic"
python3 -c 'import os,sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644); os.write(fd, b"x"); os.fsync(fd)' "$mnt/panic" 2>/dev/null
pid=$RECON_PID; RECON_PID=
wait_daemon "$pid" $((30 * TMUL)); rc=$RECON_STATUS
fusermount3 -uz "$mnt" 2>/dev/null
[ "$rc" -eq 2 ] || fail "errors=panic: exit status $rc after a rejected commit, want 2"
# noload with ro: an image that needs recovery is served as it is, unchanged
mount_recon "$img" "$mnt" "commit_interval_ms=600000,async_commit=off" || fail "mount for noload"
printf 'in the journal' >"$mnt/journalled"
kill_recon
fusermount3 -uz "$mnt" 2>/dev/null
sum=$(md5sum <"$img")
mount_recon "$img" "$mnt" "ro,noload" || fail "mount ro,noload"
dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery || fail "ro,noload: the image did not need recovery"
grep -q "not replayed" "$RECON_LOG" || fail "ro,noload: no notice that the journal was not replayed"
umount_recon "$mnt"
[ "$(md5sum <"$img")" = "$sum" ] || fail "ro,noload changed the image"
dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery || fail "ro,noload: recovery done"
# plain ro replays in memory: the image stays as it was
mount_recon "$img" "$mnt" "ro" || fail "mount ro (replay)"
grep -q "in memory" "$RECON_LOG" || fail "ro: the journal was not replayed in memory"
umount_recon "$mnt"
[ "$(md5sum <"$img")" = "$sum" ] || fail "ro (replay in memory) changed the image"

# 5. exit codes: a missing device, a mount point that is not there, an image
# that is not ext2/3
refused_dev() {   # refused_dev DEVICE MNT WHAT
	local out="$SCRATCH/dev.out" rc=0
	timeout -s KILL $((30 * TMUL)) "$RECON_FUSE" -f "$1" "$2" >"$out" 2>&1 || rc=$?
	if is_mounted "$2"; then fusermount3 -u "$2"; fi
	[ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] || fail "$3: exit status $rc, want a non-zero exit"
	grep -q '[[:alpha:]]' "$out" || fail "$3: no message"
	log "$3: exit $rc: $(head -1 "$out")"
}
mkdir -p "$mnt"
refused_dev "$SCRATCH/no-such.img" "$mnt" "a missing device"
refused_dev "$img" "$SCRATCH/no-such-dir" "a missing mount point"
head -c 8M /dev/urandom >"$SCRATCH/garbage.img"
refused_dev "$SCRATCH/garbage.img" "$mnt" "an image that is not ext2/3"
truncate -s 0 "$SCRATCH/empty.img"
refused_dev "$SCRATCH/empty.img" "$mnt" "an empty file"
: "usage errors"
out=$("$RECON_FUSE" 2>&1); rc=$?
[ "$rc" -ne 0 ] && [ -n "$out" ] || fail "no arguments: exit $rc, message '$out'"
fsck_clean "$img" "after the configuration tests"
finish
