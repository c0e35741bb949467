#!/bin/bash
# A read-write mount decides before it writes: every attempt that ends
# refused or read-only leaves the image byte for byte as it was (cmp with a
# copy), even where the superblock's free counts are stale (the mount
# recounts them, in memory until it serves read-write) and where the journal
# needs recovery (replayed in memory until then).  Each image below is tried
# read-write, with what the mount must do:
#  - refused (exit 1): f_journal (a journal inode the checker does not
#    model) and j_recover_fast_commit (fast_commit) from the e2fsprogs
#    corpus, both needing recovery; an ext4 feature not written (inline_data); MMP (libext2fs's open
#    would write the MMP block); a root inode that is no directory;
#  - read-only: a block marked in use that nothing owns (the base check);
#    a bitmap that does not mark its group's inode table; an image marked
#    with errors; a journal whose replay would leave the root directory's
#    block zeroed;
#  - read-write (the control): the same stale counts are written then, and
#    e2fsck -fn finds the image clean; so is f_clear_orphan_file (a journal
#    to recover, then 19 orphans in the orphan file to release), as e2fsck
#    recovers it.
. "$(dirname "$0")/lib.sh"
need_root
command -v debugfs >/dev/null || skip "no debugfs"
mnt="$SCRATCH/mnt"
img="$SCRATCH/d.img"
printf 'hello\n' >"$SCRATCH/hello"

dbg() { debugfs -w -f - "$1" >/dev/null 2>&1; }   # commands on stdin

# stale_counts IMG: the superblock's free counts off (the descriptors right)
stale_counts() {
	local fb fi
	fb=$(dumpe2fs -h "$1" 2>/dev/null | sed -n 's/^Free blocks: *//p')
	fi=$(dumpe2fs -h "$1" 2>/dev/null | sed -n 's/^Free inodes: *//p')
	printf 'ssv free_blocks_count %s\nssv free_inodes_count %s\n' $((fb - 7)) $((fi + 3)) | dbg "$1"
}

# base IMG: a small ext3 image with a file and a directory
base() {
	mkimg "$1" 1024 16M
	printf 'write %s f\nmkdir d\nwrite %s d/g\n' "$SCRATCH/hello" "$SCRATCH/hello" | dbg "$1"
}

# attempt WHAT WANT WORD: mount $img read-write; WANT refused or ro; the log
# must say WORD; the image must not change
attempt() {
	local what=$1 want=$2 word=$3
	cp "$img" "$SCRATCH/before.img"
	if mount_recon "$img" "$mnt" "" 2>/dev/null; then
		if [ "$want" = refused ]; then
			fail "$what: mounted (want refused)"
		elif touch "$mnt/new" 2>/dev/null; then
			fail "$what: mounted writable (want read-only)"
		fi
		umount_recon "$mnt"
	else
		[ "$want" = refused ] || fail "$what: refused (want read-only): $(head -3 "$RECON_LOG")"
		[ "$RECON_STATUS" -eq 1 ] || fail "$what: exit status $RECON_STATUS, want 1"
	fi
	grep -qiE -- "$word" "$RECON_LOG" || fail "$what: the message does not say '$word': $(head -3 "$RECON_LOG")"
	if cmp -s "$img" "$SCRATCH/before.img"; then
		log "$what: $want, image unchanged"
	else
		fail "$what: the image changed: $(cmp -l "$img" "$SCRATCH/before.img" | head -3 | tr '\n' ' ')"
	fi
}

# corpus images that need recovery and cannot be written
for name in f_journal j_recover_fast_commit; do
	if corpus_image "$name" "$img"; then
		attempt "$name" refused "mount it read-only"
	else
		log "no corpus image $name at $CORPUS: not tested"
	fi
done

# recovered, then its orphan file's entries released, read-write
if corpus_image f_clear_orphan_file "$img"; then
	if mount_recon "$img" "$mnt" "" 2>/dev/null; then
		echo data >"$mnt/new" || fail "f_clear_orphan_file: not writable"
		umount_recon "$mnt"
		fsck_clean "$img" "f_clear_orphan_file (recovered, orphans released)"
	else
		fail "f_clear_orphan_file: not mounted read-write: $(head -3 "$RECON_LOG")"
	fi
else
	log "no corpus image f_clear_orphan_file at $CORPUS: not tested"
fi

# features
rm -f "$img"; truncate -s 64M "$img"
if mke2fs -F -q -t ext4 -O inline_data "$img" >/dev/null 2>&1; then
	stale_counts "$img"
	attempt "inline_data" refused "inline_data"
fi
rm -f "$img"; truncate -s 64M "$img"
if mke2fs -F -q -t ext3 -O mmp "$img" >/dev/null 2>&1; then
	attempt "mmp" refused "mmp"
fi

# the root inode made a regular file
base "$img"
stale_counts "$img"
echo "sif <2> mode 0100644" | dbg "$img"
attempt "root not a directory" refused "root inode"

# the base check: a block marked in use that nothing owns
base "$img"
fb0=$(dumpe2fs "$img" 2>/dev/null | sed -n 's/.* \([0-9]*\) free blocks,.*/\1/p' | head -1)
printf 'setb 3000\nset_bg 0 free_blocks_count %s\n' $((fb0 - 1)) | dbg "$img"
stale_counts "$img"
attempt "unowned block" ro "INV_BBITMAP_SET"

# a block bitmap that does not mark its group's inode table
base "$img"
it=$(dumpe2fs "$img" 2>/dev/null | sed -n 's/.*Inode table at \([0-9]*\)-.*/\1/p' | head -1)
printf 'freeb %s\n' "$it" | dbg "$img"
stale_counts "$img"
attempt "inode table unmarked" ro "does not mark block"

# recorded errors
base "$img"
stale_counts "$img"
echo "ssv state 3" | dbg "$img"
attempt "marked with errors" ro "marked with errors"

# a journal whose replay zeroes the root directory's block
base "$img"
stale_counts "$img"
rb=$(debugfs -R "bmap <2> 0" "$img" 2>/dev/null)
head -c 1024 /dev/zero >"$SCRATCH/zero"
printf 'jo\njw -b %s %s\njc\n' "$rb" "$SCRATCH/zero" | dbg "$img"
if dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery; then
	attempt "journal replay leaving the root's block zeroed" ro "would leave it inconsistent"
else
	log "debugfs left no journal to replay: the replay case is not tested"
fi

# the control: consistent, stale counts, written once read-write
base "$img"
stale_counts "$img"
cp "$img" "$SCRATCH/before.img"
if mount_recon "$img" "$mnt" ""; then
	echo data >"$mnt/new" || fail "control: not writable"
	umount_recon "$mnt"
	cmp -s "$img" "$SCRATCH/before.img" && fail "control: a read-write mount with a write left the image unchanged"
	fsck_clean "$img" "control (stale free counts, read-write)"
else
	fail "control: not mounted: $(head -3 "$RECON_LOG")"
fi

finish
