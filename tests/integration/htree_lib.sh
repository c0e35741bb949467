# tests/integration/htree_lib.sh - helpers of the htree scenarios that
# compare recon-fuse's indexes with the kernel's.  Sourced after lib.sh.
# Each needs root, the kernel's ext4 and debugfs, and has a mount point for
# recon-fuse ($mnt) and one for the kernel ($kmnt).
need_root
need_kernel_ext4
command -v debugfs >/dev/null || skip "no debugfs"
mnt="$SCRATCH/mnt" kmnt="$SCRATCH/kmnt"
mkdir -p "$mnt" "$kmnt"

# kmount4 IMG DIR [OPTS]: the kernel's ext4 driver, unmounted at exit
kmount4() { mount -t ext4 -o "loop${3:+,$3}" "$1" "$2" && MOUNTS+=("$2"); }
# the root's hash version of DIR in IMG, from debugfs htree
root_hash() { debugfs -R "htree $2" "$1" 2>/dev/null | sed -n 's/.*Hash Version: *\([0-9]*\).*/\1/p' | head -1; }
# htree_of IMG DIR: debugfs htree without what differs between two drivers
# with the same names (inode and physical block numbers, checksums over
# them); a leaf's checksum may follow its last entry on that entry's line
htree_of() {
	debugfs -R "htree $2" "$1" 2>/dev/null | python3 -c '
import re, sys
for line in sys.stdin:
    line = re.sub(r"\s*leaf block checksum: 0x[0-9a-f]+", "", line)
    if "hecksum" in line or not line.strip():
        continue
    line = re.sub(r", phys \d+", "", line)
    ents = re.findall(r"(\d+) (0x[0-9a-f]+-[0-9a-f]+) \((\d+)\) ?(\S*)", line)
    if not ents:
        print(line.rstrip())
    for ino, h, rl, name in ents:
        print("%s (%s) %s" % (h, rl, name) if ino != "0" else "unused (%s)" % rl)'
}
