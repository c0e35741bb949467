#!/bin/bash
# The user's first day: untar /usr/include (thousands of files), compare it
# with the original, build a small C program inside the mount against those
# headers, run it from there; unmount, e2fsck, remount and compare again;
# then rm -rf and e2fsck.
. "$(dirname "$0")/lib.sh"
need_root
command -v gcc >/dev/null || skip "no gcc"

img="$SCRATCH/untar.img" mnt="$SCRATCH/mnt"
mkimg "$img" 4096 1G
tar -C /usr -cf "$SCRATCH/include.tar" include 2>/dev/null || die "tar of /usr/include"
nfiles=$(tar -tf "$SCRATCH/include.tar" | wc -l)
log "untar of $nfiles entries from /usr/include"

mount_recon "$img" "$mnt" || die "mount"
start=$EPOCHREALTIME
tar -C "$mnt" -xf "$SCRATCH/include.tar" || fail "untar into the mount"
sync -f "$mnt/include" || fail "syncfs"
log "untar took $(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
diff -r --no-dereference /usr/include "$mnt/include" >"$SCRATCH/diff" 2>&1 ||
	{ fail "the untarred tree differs from /usr/include"; head -20 "$SCRATCH/diff"; }

mkdir -p "$mnt/src"
cat >"$mnt/src/util.c" <<'EOF'
#include <stdint.h>
#include <string.h>
#include <zlib.h>
uint32_t checksum(const char *s) { uint32_t h = 2166136261u; while (*s) h = (h ^ (uint8_t)*s++) * 16777619u; return h; }
#ifdef ZLIB_VERSION
const char *zver(void) { return ZLIB_VERSION; }
#else
const char *zver(void) { return "none"; }
#endif
EOF
cat >"$mnt/src/main.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <linux/fs.h>
#include <ext2fs/ext2fs.h>
#include <fuse3/fuse_lowlevel.h>
#include <liburing.h>
#include <stdint.h>
uint32_t checksum(const char *s);
int main(void) {
	printf("built-on-recon %u %d\n", checksum("recon"), EXT2_ROOT_INO);
	return 0;
}
EOF
# headers from the mount, not the system: -nostdinc plus the copied tree
gccinc=$(gcc -print-file-name=include)
multi=$(gcc -print-multiarch 2>/dev/null)
incs=(-nostdinc -isystem "$gccinc" -isystem "$mnt/include")
[ -n "$multi" ] && incs+=(-isystem "$mnt/include/$multi")
# zlib.h may be absent: the program does not need it
[ -e "$mnt/include/zlib.h" ] || sed -i 's/#include <zlib.h>//' "$mnt/src/util.c"
if ! (cd "$mnt/src" && gcc -O2 -D_FILE_OFFSET_BITS=64 "${incs[@]}" -c util.c -o util.o &&
	gcc -O2 -D_FILE_OFFSET_BITS=64 -DFUSE_USE_VERSION=35 "${incs[@]}" -c main.c -o main.o &&
	gcc util.o main.o -o prog) >"$SCRATCH/build.log" 2>&1; then
	fail "build inside the mount"; head -20 "$SCRATCH/build.log"
fi
want="built-on-recon $(python3 -c '
h = 2166136261
for ch in b"recon": h = ((h ^ ch) * 16777619) & 0xffffffff
print(h)') 2"
[ "$("$mnt/src/prog" 2>&1)" = "$want" ] || fail "the program built in the mount: '$("$mnt/src/prog" 2>&1)' != '$want'"
cp "$mnt/src/prog" "$SCRATCH/prog"
umount_recon "$mnt"
fsck_clean "$img" "after untar and build"

mount_recon "$img" "$mnt" || die "remount"
diff -r --no-dereference /usr/include "$mnt/include" >/dev/null 2>&1 || fail "the tree differs after a remount"
cmp -s "$mnt/src/prog" "$SCRATCH/prog" || fail "the binary differs after a remount"
[ "$("$mnt/src/prog" 2>&1)" = "$want" ] || fail "the program after a remount"
rm -rf "$mnt/include" "$mnt/src" || fail "rm -rf"
[ -z "$(ls -A "$mnt" | grep -v lost+found)" ] || fail "rm -rf left entries"
umount_recon "$mnt"
fsck_clean "$img" "after rm -rf"
finish
