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


def compare_fsx(k_lines, r_lines, fs):
    punched = set()          # files punched so far (their blocks may differ)
    bad, accepted = [], {}
    for kl, rl in zip(k_lines, r_lines):
        if kl == rl:
            head, res, _ = fsx_fields(kl)
            if len(head) > 2 and head[1] == 'punch' and res[0] == '0':
                punched.add(head[2])
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
