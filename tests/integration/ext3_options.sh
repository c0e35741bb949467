#!/bin/bash
# The kernel's ext3 mount options that recon-fuse gives their meaning, each
# against what the kernel's ext3 does (when it has the driver):
#  - grpid / bsdgroups and nogrpid / sysvgroups: the group a new file,
#    directory, fifo and symlink of a normal user gets, in a plain and in a
#    setgid directory of another group (and whether a new directory is setgid);
#  - resuid= / resgid= and the superblock's defaults (tune2fs -u / -g): who may
#    fill the reserved blocks (the others get ENOSPC with the reserve free),
#    by uid, primary group, supplementary group, name; -o overrides the
#    superblock;
#  - minixdf / bsddf: the block count statfs reports.
# Also: an ext2 image not cleanly unmounted is called so (mounted read-only);
# an image whose path holds a comma or a backslash mounts, shows under its
# own name in the mount table, and unmounts, as root and as a normal user
# (fusermount3).
. "$(dirname "$0")/lib.sh"
need_root
ensure_test_user
OTHER_GID=4242      # a group the test user is not in (unless given as supplementary)
mnt="$SCRATCH/mnt"
kernel=false
have_kernel_ext3 && kernel=true || log "no kernel ext3 driver: recon-fuse is checked against the rules alone"

# ---- 1. grpid ----
# new_nodes DIR TAG: as the test user (umask 022), a file, a directory, a
# fifo and a symlink in DIR/plain (mode 0777) and DIR/sgid (mode 2777), both
# of group OTHER_GID; prints "NAME GID TG" for each (NAME without TAG; T the
# type letter of ls -l, G the group-execute letter: s for a setgid directory).
new_nodes() {
	local dir=$1 tag=$2 d
	as_user sh -c 'umask 022; for d in "$1/plain" "$1/sgid"; do
		touch "$d/f.$2" && mkdir "$d/dir.$2" && mkfifo "$d/fifo.$2" && ln -s f "$d/link.$2" || exit 1
	done' sh "$dir" "$tag" || { fail "$tag: the user's creates failed"; return; }
	for d in plain sgid; do
		stat -c '%n %g %A' "$dir/$d"/*."$tag" |
			sed -e "s|^$dir/||" -e "s|\.$tag | |" -e 's/ \(.\).....\(.\)...$/ \1\2/'
	done
}
# expected grpid|nogrpid: what the kernel's ext3 gives (its inode_init_owner
# and its grpid rule)
expected() {
	local plain_gid=$TEST_GID dir_bit=s
	[ "$1" = grpid ] && { plain_gid=$OTHER_GID; dir_bit=x; }
	cat <<EOT
plain/dir $plain_gid dx
plain/f $plain_gid --
plain/fifo $plain_gid p-
plain/link $plain_gid lx
sgid/dir $OTHER_GID d$dir_bit
sgid/f $OTHER_GID --
sgid/fifo $OTHER_GID p-
sgid/link $OTHER_GID lx
EOT
}
img="$SCRATCH/grpid.img"
mkimg "$img" 4096 32M
prepare_dirs() {   # prepare_dirs MNT
	mkdir "$1/plain" "$1/sgid" && chgrp "$OTHER_GID" "$1/plain" "$1/sgid" &&
		chmod 0777 "$1/plain" && chmod 2777 "$1/sgid" || fail "grpid: the directories"
}
mount_recon "$img" "$mnt" "allow_other" || die "mount for grpid"
prepare_dirs "$mnt"
umount_recon "$mnt"
for spelling in "" nogrpid sysvgroups grpid=off grpid bsdgroups grpid=on; do
	case $spelling in grpid|bsdgroups|grpid=on) rule=grpid ;; *) rule=nogrpid ;; esac
	tag=${spelling:-default}; tag=${tag//=/_}
	mount_recon "$img" "$mnt" "allow_other${spelling:+,$spelling}" || { fail "mount -o $spelling"; continue; }
	got=$(new_nodes "$mnt" "$tag" | sort)
	umount_recon "$mnt"
	want=$(expected "$rule" | sort)
	[ "$got" = "$want" ] || fail "-o ${spelling:-(none)}: new nodes' groups and modes:
$(diff <(echo "$want") <(echo "$got") | sed 's/^/    /')"
	[ -n "$spelling" ] || recon_default=$got
	[ "$spelling" = grpid ] && recon_grpid=$got
done
fsck_clean "$img" "after the grpid mounts"
if $kernel; then
	kimg="$SCRATCH/kgrpid.img" kmnt="$SCRATCH/kmnt"
	mkimg "$kimg" 4096 32M
	kmount "$kimg" "$kmnt" || die "kernel mount"
	prepare_dirs "$kmnt"
	got=$(new_nodes "$kmnt" default | sort)
	kumount "$kmnt"
	[ "$got" = "${recon_default:-}" ] || fail "default: recon-fuse and the kernel differ:
$(diff <(echo "$got") <(echo "${recon_default:-}") | sed 's/^/    /')"
	kmount "$kimg" "$kmnt" grpid || die "kernel mount -o grpid"
	got=$(new_nodes "$kmnt" grpid | sort)
	kumount "$kmnt"
	[ "$got" = "${recon_grpid:-}" ] || fail "grpid: recon-fuse and the kernel differ:
$(diff <(echo "$got") <(echo "${recon_grpid:-}") | sed 's/^/    /')"
fi

# ---- 2. resuid= / resgid= ----
base="$SCRATCH/reserve-base.img"
mkimg "$base" 1024 8M -m 25
reserved=$(dumpe2fs -h "$base" 2>/dev/null | sed -n 's/^Reserved block count: *//p')
[ "${reserved:-0}" -gt 1000 ] || die "the image reserves ${reserved:-no} blocks"
# reserve WHAT TUNE2FS_ARGS OPTS allowed|denied [SUPPLEMENTARY_GID]: the test
# user fills the file system; it may go into the reserve only when allowed.
reserve() {
	local what=$1 tune=$2 opts=$3 want=$4 img="$SCRATCH/reserve.img" free groups=(--clear-groups)
	[ -z "${5:-}" ] || groups=(--groups="$5")
	cp --sparse=always "$base" "$img"
	[ -z "$tune" ] || tune2fs $tune "$img" >/dev/null 2>&1 || { fail "$what: tune2fs $tune"; return; }
	mount_recon "$img" "$mnt" "allow_other${opts:+,$opts}" || { fail "$what: mount"; return; }
	mkdir "$mnt/u" && chown "$TEST_UID:$TEST_GID" "$mnt/u"
	# 64 KiB writes, then 1 KiB ones, each until ENOSPC; then the free block count
	free=$(setpriv --reuid="$TEST_UID" --regid="$TEST_GID" "${groups[@]}" sh -c '
		for bs in 64k 1k; do
			err=$(dd if=/dev/zero of="$1" bs=$bs oflag=append conv=notrunc 2>&1 >/dev/null)
			case $err in *"No space left"*) ;; *) echo "dd bs=$bs: $err" >&2; exit 1 ;; esac
		done
		sync "$1" && stat -f -c %f "$1"' sh "$mnt/u/fill") || { fail "$what: the user's writes"; free=-1; }
	umount_recon "$mnt"
	fsck_clean "$img" "$what"
	log "$what: $free blocks left free (reserve $reserved)"
	if [ "$want" = allowed ]; then
		[ "$free" -ge 0 ] && [ "$free" -lt $((reserved / 4)) ] ||
			fail "$what: the user stopped with $free blocks free, want the reserve ($reserved) used"
	else
		[ "$free" -ge $((reserved * 3 / 4)) ] ||
			fail "$what: the user stopped with $free blocks free, want the reserve ($reserved) left (ENOSPC)"
	fi
}
reserve "the superblock's defaults (root only)" "" "" denied
reserve "resuid=UID" "" "resuid=$TEST_UID" allowed
reserve "resuid=NAME" "" "resuid=$TEST_USER" allowed
reserve "resgid=its group" "" "resgid=$TEST_GID" allowed
reserve "resgid=a supplementary group" "" "resgid=$OTHER_GID" allowed "$OTHER_GID"
reserve "resgid=a group it is not in" "" "resgid=$OTHER_GID" denied
reserve "the superblock's resuid (tune2fs -u)" "-u $TEST_UID" "" allowed
reserve "the superblock's resgid (tune2fs -g)" "-g $TEST_GID" "" allowed
reserve "resuid=0 over the superblock's" "-u $TEST_UID" "resuid=0" denied

# ---- 3. minixdf / bsddf ----
blocks=$(dumpe2fs -h "$base" 2>/dev/null | sed -n 's/^Block count: *//p')
statfs_blocks() {   # statfs_blocks OPTS: sets BLOCKS to f_blocks of a recon-fuse mount
	BLOCKS=-1
	mount_recon "$base" "$mnt" "$1" || { fail "mount -o $1"; return; }
	BLOCKS=$(stat -f -c %b "$mnt")
	umount_recon "$mnt"
}
statfs_blocks ro; bsd=$BLOCKS
statfs_blocks ro,minixdf; minix=$BLOCKS
statfs_blocks ro,minixdf,bsddf; bsd2=$BLOCKS
[ "$minix" = "$blocks" ] || fail "minixdf: f_blocks $minix, want the block count $blocks"
[ "$bsd" -lt "$blocks" ] && [ "$bsd2" = "$bsd" ] ||
	fail "bsddf: f_blocks $bsd (default) and $bsd2 (minixdf,bsddf), want the same, below $blocks"
if $kernel; then
	for o in bsddf minixdf; do
		kmount "$base" "$SCRATCH/kmnt" "ro,$o" || { fail "kernel mount -o $o"; continue; }
		k=$(stat -f -c %b "$SCRATCH/kmnt"); kumount "$SCRATCH/kmnt"
		r=$bsd; [ $o = minixdf ] && r=$minix
		[ "$k" = "$r" ] || fail "$o: f_blocks $r, the kernel's $k"
	done
fi

# ---- 4. an ext2 image not cleanly unmounted ----
img="$SCRATCH/ext2.img"
truncate -s 16M "$img" && mke2fs -q -F -t ext2 "$img" || die "mke2fs ext2"
debugfs -w -R "ssv state 0" "$img" >/dev/null 2>&1 || die "debugfs ssv state"
if mount_recon "$img" "$mnt" ""; then
	grep -q 'was not cleanly unmounted.*read-only' "$RECON_LOG" ||
		fail "ext2 not cleanly unmounted: the message does not say so: $(head -3 "$RECON_LOG")"
	grep -q 'marked with errors' "$RECON_LOG" && fail "ext2 not cleanly unmounted: called 'marked with errors'"
	touch "$mnt/x" 2>/dev/null && fail "ext2 not cleanly unmounted: mounted writable"
	umount_recon "$mnt"
else
	fail "ext2 not cleanly unmounted: refused (want a read-only mount)"
fi

# ---- 5. a comma and a backslash in the image's path ----
dir="$SCRATCH/a,b\\1"
mkdir -p "$dir"
img="$dir/img,\\023.img"
mkimg "$img" 4096 16M -E "root_owner=$TEST_UID:$TEST_GID"
if mount_recon "$img" "$mnt" ""; then
	src=$(findmnt -n -o SOURCE "$mnt")
	[ "$src" = "$img" ] || fail "a comma in the path: the mount table shows '$src', want '$img'"
	echo data >"$mnt/file" || fail "a comma in the path: write"
	umount_recon "$mnt"
	fsck_clean "$img" "after the mount with a comma in its path"
else
	fail "an image path with a comma and a backslash: not mounted"
fi
# a normal user's mount goes through fusermount3, which parses the options itself
if [ -u "$(command -v fusermount3)" ]; then
	open_dev_fuse_to_test_user
	chown -R "$TEST_UID:$TEST_GID" "$dir"
	umnt="$SCRATCH/m,nt"    # (a backslash here would defeat is_mounted's reading of mountinfo)
	mkdir -p "$umnt" && chown "$TEST_UID:$TEST_GID" "$umnt"
	setpriv --reuid="$TEST_UID" --regid="$TEST_GID" --clear-groups env HOME="$SCRATCH" \
		"$RECON_FUSE" -f "$img" "$umnt" >"$SCRATCH/user.log" 2>&1 &
	pid=$!
	PIDS+=("$pid"); MOUNTS+=("$umnt")
	for ((i = 0; i < 200 * TMUL; i++)); do
		is_mounted "$umnt" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if is_mounted "$umnt"; then
		src=$(findmnt -n -o SOURCE "$umnt")
		[ "$src" = "$img" ] || fail "a user's mount: the mount table shows '$src', want '$img'"
		as_user fusermount3 -u "$umnt" || fail "fusermount3 -u as the user"
		wait_daemon "$pid" $((60 * TMUL)) || fail "the user's daemon exited with $RECON_STATUS"
	else
		fail "a user's mount of an image path with a comma: not mounted: $(head -3 "$SCRATCH/user.log")"
	fi
else
	log "fusermount3 is not setuid root: the user's mount is not tried"
fi
finish
