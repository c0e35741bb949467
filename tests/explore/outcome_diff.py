"""tests/explore/outcome_diff.py KIND KERNEL RECON [FS]: compare two outcome
logs (fsx -O or nsstress -O) of the same seeded sequence, one from the
kernel's ext3 (or ext4 with FS ext4) and one from recon-fuse, line by line.  Every difference must be one of
the accepted ones below (each with its reason); the accepted ones are
counted and listed.  Exit 0 when nothing else differs, 1 otherwise."""
import re
import sys

# Accepted differences, with the reason (tests/integration/posix_diff.py keeps
# the same list for its steps).
REASONS = {
    'punch-blocks': 'st_blocks of a file after a PUNCH_HOLE: recon-fuse frees the '
                    'indirect blocks a punch empties, the kernel keeps them',
    'fault-blocks': 'st_blocks after an mmap write into a hole: a kernel whose page cache '
                    'holds large folios allocates (and zeroes) the blocks of the whole folio '
                    'the write fault lands in (up to 2 MiB), recon-fuse those of the pages '
                    'written, as the kernel does with small folios; the kernel\'s surplus '
                    'stays until a write, truncate or punch covers it',
    'extent-blocks': 'ext4: st_blocks alone differs; it counts extent index blocks, '
                     'whose number follows where the allocator put the data (recon-fuse '
                     'fills freed gaps first, the kernel looks for contiguous runs) and, '
                     'on the kernel, delayed allocation (index blocks counted at writeback)',
}
BLOCKS = re.compile(r'blocks=\d+')

FIELD = re.compile(r'(\w+)=(\S+)')


def fsx_fields(line):
    head, _, tail = line.partition(' = ')
    return head.split(), tail.split()[:2], dict(FIELD.findall(tail))


FOLIO_MAX = 2 << 20          # the largest folio a write fault may fill (PMD size)


def fault_surplus_ok(head, k_blocks, r_blocks, surplus):
    """Whether the kernel's st_blocks over recon-fuse's (sectors) is the
    surplus of large-folio write faults: it may grow only at a mapwrite, by no
    more than the folios around the range written; any other op keeps or
    shrinks it (a write, truncate or punch over the kernel's extra blocks)."""
    extra = k_blocks - r_blocks
    if extra < 0:
        return False
    if head[1] != 'mapwrite':
        return extra <= surplus
    off, length = int(head[3], 16), int(head[4], 16)
    lo = off // FOLIO_MAX * FOLIO_MAX
    hi = (off + length + FOLIO_MAX - 1) // FOLIO_MAX * FOLIO_MAX
    # the folios' unwritten sectors, and the indirect blocks that map them
    # (on 1 KiB blocks one per 256 data blocks, and a (t)double-indirect one)
    unwritten = (hi - lo - length) // 512
    return extra <= surplus + unwritten + unwritten // 128 + 8


def compare_fsx(k_lines, r_lines, fs):
    punched = set()          # files punched so far (their blocks may differ)
    surplus = {}             # file -> the kernel's large-folio block surplus (sectors)
    bad, accepted = [], {}
    for kl, rl in zip(k_lines, r_lines):
        if kl == rl:
            head, res, _ = fsx_fields(kl)
            if len(head) > 2 and head[1] == 'punch' and res[0] == '0':
                punched.add(head[2])
            if len(head) > 2:
                surplus.pop(head[2], None)
            continue
        kh, kres, kf = fsx_fields(kl)
        rh, rres, rf = fsx_fields(rl)
        if kh != rh:
            bad.append('different ops (the runs diverged): kernel "%s", recon-fuse "%s"' % (kl, rl))
            break
        if kh[1] == 'punch' and kres == rres and kres[0] == '0':
            punched.add(kh[2])
        diff = [k for k in set(kf) | set(rf) if kf.get(k) != rf.get(k)]
        if kres != rres:
            diff.append('result')
        if diff == ['blocks'] and kh[2] in punched and int(rf['blocks']) <= int(kf['blocks']):
            accepted['punch-blocks'] = accepted.get('punch-blocks', 0) + 1
            continue
        if diff == ['blocks'] and fault_surplus_ok(kh, int(kf['blocks']), int(rf['blocks']),
                                                   surplus.get(kh[2], 0)):
            surplus[kh[2]] = int(kf['blocks']) - int(rf['blocks'])
            accepted['fault-blocks'] = accepted.get('fault-blocks', 0) + 1
            continue
        if diff == ['blocks'] and fs == 'ext4':
            accepted['extent-blocks'] = accepted.get('extent-blocks', 0) + 1
            continue
        bad.append('op %s: %s differ: kernel "%s", recon-fuse "%s"' % (kh[0], ', '.join(sorted(diff)), kl, rl))
    return bad, accepted


def compare_ns(k_lines, r_lines, fs):
    bad, accepted = [], {}
    for kl, rl in zip(k_lines, r_lines):
        if kl == rl:
            continue
        if fs == 'ext4' and BLOCKS.sub('', kl) == BLOCKS.sub('', rl):
            accepted['extent-blocks'] = accepted.get('extent-blocks', 0) + 1
            continue
        bad.append('kernel "%s", recon-fuse "%s"' % (kl, rl))
    return bad, accepted


def main():
    kind, kpath, rpath = sys.argv[1:4]
    fs = sys.argv[4] if len(sys.argv) > 4 else 'ext3'
    k_lines = open(kpath).read().splitlines()
    r_lines = open(rpath).read().splitlines()
    bad, accepted = (compare_fsx if kind == 'fsx' else compare_ns)(k_lines, r_lines, fs)
    if len(k_lines) != len(r_lines):
        bad.append('%d outcomes on the kernel, %d on recon-fuse' % (len(k_lines), len(r_lines)))
    for b in bad[:20]:
        print('DIFF %s: %s' % (kind, b))
    for a, n in sorted(accepted.items()):
        print('accepted %s: %d outcomes (%s)' % (a, n, REASONS[a]))
    print('%s: %d outcomes compared, %d accepted differences, %d unexplained'
          % (kind, len(k_lines), sum(accepted.values()), len(bad)))
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
