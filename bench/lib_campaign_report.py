#!/usr/bin/env python3
"""Per-driver summary of a bench/campaign CSV (rows of tests/transitions/corrupt.py).

The transition column is DRIVER-bsBLOCKSIZE/tNNN.img; 'caught by e2fsck' means
`e2fsck -fn` exited non-zero, 'caught by the checker' that recon-check exited 1.
usage: lib_campaign_report.py CAMPAIGN.csv
"""
import csv, sys

rows = [r for r in csv.DictReader(open(sys.argv[1])) if r['checker_rc'] != 'edit-failed']
groups = {}
for r in rows:
    drv, bs = r['transition'].split('/')[0].rsplit('-bs', 1)
    for key in ((drv, bs), (drv, 'both')):
        g = groups.setdefault(key, [0] * 8)
        chk, fk = r['checker_rc'] == '1', r['fsck_rc'] not in ('0', '')
        for i, v in enumerate((1, chk, fk, chk and fk, not chk and not fk, chk and not fk,
                               fk and not chk, r['checker_rc'] not in ('0', '1'))):
            g[i] += int(v)
print('| driver | block size | experiments | checker | e2fsck | both | neither | checker-only'
      ' | e2fsck-only | checker exit 2 |')
print('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|')
for (drv, bs), g in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] == 'both', kv[0][1])):
    label = 'all' if bs == 'both' else '%s B' % bs
    print('| %s | %s | ' % (drv, label) + ' | '.join(str(v) for v in g) + ' |')
