#!/usr/bin/env python3
"""Per-driver summary of a bench/campaign CSV (rows of tests/transitions/corrupt.py).

The transition column is DRIVER-bsBLOCKSIZE/tNNN.img; 'caught by e2fsck' means
`e2fsck -fn` exited non-zero, 'caught by the checker' that recon-check exited 1.
usage: lib_campaign_report.py CAMPAIGN.csv          (the per-driver table, markdown)
       lib_campaign_report.py --plot OUT.png CAMPAIGN.csv
           (the figure: per field class, the share of experiments caught by the
           checker, by e2fsck -fn, by both and by neither)
"""
import csv, sys

import lib_plot


def load(path):
    return [r for r in csv.DictReader(open(path)) if r['checker_rc'] != 'edit-failed']


def caught(r):
    return r['checker_rc'] == '1', r['fsck_rc'] not in ('0', '')


def table(rows):
    groups = {}
    for r in rows:
        drv, bs = r['transition'].split('/')[0].rsplit('-bs', 1)
        for key in ((drv, bs), (drv, 'both')):
            g = groups.setdefault(key, [0] * 8)
            chk, fk = caught(r)
            for i, v in enumerate((1, chk, fk, chk and fk, not chk and not fk, chk and not fk,
                                   fk and not chk, r['checker_rc'] not in ('0', '1'))):
                g[i] += int(v)
    print('| driver | block size | experiments | checker | e2fsck | both | neither | checker-only'
          ' | e2fsck-only | checker exit 2 |')
    print('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|')
    for (drv, bs), g in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] == 'both', kv[0][1])):
        label = 'all' if bs == 'both' else '%s B' % bs
        print('| %s | %s | ' % (drv, label) + ' | '.join(str(v) for v in g) + ' |')


def plot(out, rows):
    classes = []
    for r in rows:
        if r['class'] not in classes:
            classes.append(r['class'])
    share = {name: [] for name in ('checker only', 'both', 'e2fsck -fn only', 'neither')}
    for c in classes:
        rs = [caught(r) for r in rows if r['class'] == c]
        n = len(rs)
        share['checker only'].append(100 * sum(k and not f for k, f in rs) / n)
        share['both'].append(100 * sum(k and f for k, f in rs) / n)
        share['e2fsck -fn only'].append(100 * sum(f and not k for k, f in rs) / n)
        share['neither'].append(100 * sum(not k and not f for k, f in rs) / n)
    lib_plot.bars(out, 'bench/campaign: who caught each corruption, per field class (%d experiments)' % len(rows),
                  '% of the class\'s experiments', classes, list(share.items()), stacked=True)


if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == '--plot':
        plot(sys.argv[2], load(sys.argv[3]))
    elif len(sys.argv) == 2:
        table(load(sys.argv[1]))
    else:
        sys.exit(__doc__)
