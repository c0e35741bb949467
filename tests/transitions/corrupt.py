#!/usr/bin/env python3
"""Corruption campaign on ext3 transitions: recon-check against e2fsck.

For each transition (BEFORE, AFTER) this makes copies of AFTER, each changed by
one edit that imitates a file-system bug (debugfs -w or a direct byte edit),
then asks: does recon-check reject BEFORE->copy (exit 1)?  does `e2fsck -fn`
exit non-zero?  does it print any problem?  where `e2fsck -fy` repairs, does a
second `e2fsck -fn` still find something?  Rows go to a CSV; --table prints
the per-class summary.  Python 3 stdlib only.

usage: corrupt.py run --out CSV [--jobs N] [--per-class N] [--seed S] [--classes a,b]
                      [--progress] BEFORE:AFTER [BEFORE:AFTER ...]
       corrupt.py table CSV [--md FILE]
"""
import argparse, csv, os, random, re, shutil, struct, subprocess, sys, tempfile, time
from multiprocessing import Pool

RECON_CHECK = os.environ.get('RECON_CHECK', 'recon-check')
S_IFMT, S_IFDIR, S_IFREG, S_IFLNK = 0o170000, 0o040000, 0o100000, 0o120000


class Image:
    """Just enough of the ext2/3 on-disk format to choose targets."""
    def __init__(self, path):
        self.path = path
        self.f = open(path, 'rb')
        sb = self.pread(1024, 1024)
        (self.inodes_count, self.blocks_count, _, self.free_blocks, self.free_inodes,
         self.first_data_block, log_bs) = struct.unpack_from('<7I', sb, 0)
        self.bs = 1024 << log_bs
        self.bpg, = struct.unpack_from('<I', sb, 32)
        self.ipg, = struct.unpack_from('<I', sb, 40)
        self.inode_size, = struct.unpack_from('<H', sb, 88)
        self.ngroups = (self.blocks_count - self.first_data_block + self.bpg - 1) // self.bpg
        gdt = self.pread((self.first_data_block + 1) * self.bs, 32 * self.ngroups)
        self.groups = [struct.unpack_from('<3I3H', gdt, 32 * g) for g in range(self.ngroups)]
        self.bbitmap = b''.join(self.block(g[0]) for g in self.groups)
        self.ibitmap = b''.join(self.block(g[1]) for g in self.groups)

    def pread(self, off, n):
        self.f.seek(off); return self.f.read(n)

    def block(self, b):
        return self.pread(b * self.bs, self.bs)

    def block_used(self, b):
        i = b - self.first_data_block
        return bool(self.bbitmap[i >> 3] >> (i & 7) & 1)

    def inode_used(self, ino):
        i = ino - 1
        return bool(self.ibitmap[i >> 3] >> (i & 7) & 1)

    def inode_off(self, ino):
        g, i = divmod(ino - 1, self.ipg)
        return self.groups[g][2] * self.bs + i * self.inode_size

    def inode(self, ino):
        raw = self.pread(self.inode_off(ino), 128)
        mode, = struct.unpack_from('<H', raw, 0)
        size, = struct.unpack_from('<I', raw, 4)
        dtime, = struct.unpack_from('<I', raw, 20)
        links, = struct.unpack_from('<H', raw, 26)
        blocks, = struct.unpack_from('<I', raw, 28)
        iblock = list(struct.unpack_from('<15I', raw, 40))
        acl, = struct.unpack_from('<I', raw, 104)
        return dict(mode=mode, size=size, dtime=dtime, links=links, blocks=blocks,
                    iblock=iblock, acl=acl, raw=raw)

    def has_blocks(self, ino, nd):
        """False for fast symlinks and devices: i_block holds no block numbers."""
        t = nd['mode'] & S_IFMT
        if t not in (S_IFREG, S_IFDIR, S_IFLNK):
            return False
        own = nd['blocks'] - (self.bs // 512 if nd['acl'] else 0)
        return not (t == S_IFLNK and own == 0)

    def walk_blocks(self, nd):
        """(data blocks in order, indirect blocks as (block, depth))"""
        data, ind = [], []
        def rec(b, depth):
            if b == 0 or b >= self.blocks_count:
                return
            if depth == 0:
                data.append(b); return
            ind.append((b, depth))
            for p in struct.unpack('<%dI' % (self.bs // 4), self.block(b)):
                rec(p, depth - 1)
        for k in range(12):
            rec(nd['iblock'][k], 0)
        for k, depth in ((12, 1), (13, 2), (14, 3)):
            rec(nd['iblock'][k], depth)
        return data, ind

    def dirents(self, dir_ino, nd):
        """(block, offset, inode, rec_len, name_len, ftype, name) of each entry"""
        out = []
        data, _ = self.walk_blocks(nd)
        for b in data:
            raw = self.block(b); off = 0
            while off + 8 <= self.bs:
                ino, rl, nl, ft = struct.unpack_from('<IHBB', raw, off)
                if rl < 8 or off + rl > self.bs:
                    break
                out.append((b, off, ino, rl, nl, ft, raw[off + 8:off + 8 + nl]))
                off += rl
        return out


def changed_blocks(before, after, bs):
    """Block numbers whose contents differ between two equal-size images."""
    out = []
    with open(before, 'rb') as fa, open(after, 'rb') as fb:
        chunk = bs * 256; base = 0
        while True:
            a, b = fa.read(chunk), fb.read(chunk)
            if not a:
                break
            if a != b:
                for i in range(0, len(a), bs):
                    if a[i:i + bs] != b[i:i + bs]:
                        out.append((base + i) // bs)
            base += len(a)
    return out


class Targets:
    """What an after-image holds, preferring what the transition touched."""
    def __init__(self, before, after):
        im = self.im = Image(after)
        bs = im.bs
        changed = set(changed_blocks(before, after, bs))
        itab = {}
        for g, grp in enumerate(im.groups):
            for k in range((im.ipg * im.inode_size + bs - 1) // bs):
                itab[grp[2] + k] = (g, k)
        self.files, self.dirs, self.all_used = [], [], []
        self.changed_inodes = set()
        self.owner = {}          # block -> inode (data and indirect)
        self.indirect, self.dirblocks, self.xattr = [], [], set()
        self.htree_roots = []
        self.paths = {2: '/'}
        for ino in range(1, im.inodes_count + 1):
            if not im.inode_used(ino) or (ino < 11 and ino != 2):
                continue
            nd = im.inode(ino)
            if nd['links'] == 0 or nd['mode'] == 0:
                continue
            self.all_used.append(ino)
            off = im.inode_off(ino)
            if off // bs in changed:
                bb = open(before, 'rb'); bb.seek(off)
                if bb.read(im.inode_size) != im.pread(off, im.inode_size):
                    self.changed_inodes.add(ino)
                bb.close()
            if nd['acl']:
                self.xattr.add(nd['acl'])
            if not im.has_blocks(ino, nd):
                continue
            data, ind = im.walk_blocks(nd)
            for b in data:
                self.owner[b] = ino
            for b, d in ind:
                self.owner[b] = ino; self.indirect.append((b, ino))
            t = nd['mode'] & S_IFMT
            if t == S_IFDIR:
                self.dirs.append(ino)
                self.dirblocks += [(b, ino) for b in data]
                if nd['blocks'] and (struct.unpack_from('<I', nd['raw'], 32)[0] & 0x1000):
                    self.htree_roots.append((data[0], ino))   # EXT2_INDEX_FL
            elif t == S_IFREG:
                self.files.append(ino)
        self.entries = []        # (dir_ino, block, off, ino, rec_len, name_len, ftype, name)
        stack = [2]; seen = set()
        while stack:
            d = stack.pop()
            if d in seen:
                continue
            seen.add(d)
            for e in im.dirents(d, im.inode(d)):
                self.entries.append((d,) + e)
                name = e[6]
                if e[2] and name not in (b'.', b'..'):
                    p = self.paths[d].rstrip('/') + '/' + name.decode('latin1')
                    self.paths.setdefault(e[2], p)
                    if e[5] == 2:
                        stack.append(e[2])
        self.changed = sorted(changed)
        meta = set(itab) | {grp[0] for grp in im.groups} | {grp[1] for grp in im.groups}
        meta |= {b for b, _ in self.indirect} | {b for b, _ in self.dirblocks} | self.xattr
        self.changed_meta = [b for b in self.changed if b in meta] or sorted(meta)[:64]
        self.free_inodes = [i for i in range(12, im.inodes_count + 1) if not im.inode_used(i)]
        first_data = max(grp[2] for grp in im.groups) + (im.ipg * im.inode_size) // bs
        self.free_blocks = [b for b in range(first_data, im.blocks_count, 7)
                            if not im.block_used(b)]

    def pick_inode(self, rng, pool):
        pref = [i for i in pool if i in self.changed_inodes]
        return rng.choice(pref if pref and rng.random() < 0.8 else pool)


def value(rng, variant, lo, hi, old):
    """Spiffy style: variants 0 and 1 random, 2 zero; never the old value."""
    v = 0 if variant == 2 else rng.randint(lo, hi)
    if v == old:
        v = old + 1 if variant != 2 or old == 0 else 0
    return v


# Each planner returns (description, debugfs commands, [(offset, bytes)]) or None.
def plan(cls, tg, rng, variant):
    im, bs = tg.im, tg.im.bs
    if cls == 'bbitmap_set':
        b = rng.choice(tg.free_blocks); return 'setb %d' % b, ['setb %d' % b], []
    if cls == 'bbitmap_clear':
        ino = tg.pick_inode(rng, tg.files + tg.dirs)
        blks = [b for b, o in tg.owner.items() if o == ino]
        if not blks:
            return None
        b = rng.choice(blks); return 'freeb %d (inode %d)' % (b, ino), ['freeb %d' % b], []
    if cls == 'ibitmap_set':
        i = rng.choice(tg.free_inodes); return 'seti <%d>' % i, ['seti <%d>' % i], []
    if cls == 'ibitmap_clear':
        i = tg.pick_inode(rng, tg.all_used); return 'freei <%d>' % i, ['freei <%d>' % i], []
    if cls.startswith('bgd_'):
        field, idx, hi = {'bgd_free_blocks': ('free_blocks_count', 3, im.bpg),
                          'bgd_free_inodes': ('free_inodes_count', 4, im.ipg),
                          'bgd_used_dirs': ('used_dirs_count', 5, 64)}[cls]
        g = rng.randrange(im.ngroups); old = im.groups[g][idx]
        v = value(rng, variant, 0, hi, old)
        return 'set_bg %d %s %d->%d' % (g, field, old, v), ['set_bg %d %s %d' % (g, field, v)], []
    if cls == 'sb_free_blocks':
        v = value(rng, variant, 0, im.blocks_count, im.free_blocks)
        return 'ssv free_blocks_count %d->%d' % (im.free_blocks, v), ['ssv free_blocks_count %d' % v], []
    if cls == 'sb_free_inodes':
        v = value(rng, variant, 0, im.inodes_count, im.free_inodes)
        return 'ssv free_inodes_count %d->%d' % (im.free_inodes, v), ['ssv free_inodes_count %d' % v], []
    if cls in ('i_block', 'links_count', 'i_size', 'i_blocks', 'dtime', 'mode'):
        pool = tg.files + tg.dirs
        ino = tg.pick_inode(rng, pool); nd = im.inode(ino)
        if cls == 'i_block':
            ks = [k for k in range(15) if nd['iblock'][k]] if im.has_blocks(ino, nd) else []
            if not ks:
                return None
            k = rng.choice(ks); old = nd['iblock'][k]
            if variant == 1 and tg.owner:                    # point at a block someone owns
                v = rng.choice(list(tg.owner)); v = v if v != old else old + 1
            else:
                v = value(rng, variant, 1, im.blocks_count - 1, old)
            fld = 'block[%d]' % k
        elif cls == 'links_count':
            old = nd['links']; v = value(rng, variant, 1, old + 5, old); fld = 'links_count'
        elif cls == 'i_size':
            old = nd['size']; v = value(rng, variant, 0, max(old * 2, bs * 20), old); fld = 'size'
        elif cls == 'i_blocks':
            old = nd['blocks']; v = value(rng, variant, 0, old * 2 + 64, old); fld = 'blocks'
        elif cls == 'dtime':
            old = nd['dtime']; v = rng.randint(1, 2 ** 31 - 1); fld = 'dtime'
        else:
            old = nd['mode']
            v = [0o100644, 0o040755, 0o120777, 0o020644, 0][variant if variant < 2 else 4]
            if v & S_IFMT == old & S_IFMT:
                v = 0o140755 if variant < 2 else 0
            fld = 'mode'
        return ('sif <%d> %s %d->%d' % (ino, fld, old, v),
                ['sif <%d> %s %s' % (ino, fld, '0%o' % v if fld == 'mode' else v)], [])
    if cls == 'ind_slot':
        if not tg.indirect:
            return None
        b, ino = rng.choice(tg.indirect)
        slots = struct.unpack('<%dI' % (bs // 4), im.block(b))
        used = [i for i, p in enumerate(slots) if p]
        if not used:
            return None
        s = rng.choice(used); old = slots[s]
        if variant == 1 and tg.owner:
            v = rng.choice(list(tg.owner)); v = v if v != old else old + 1
        else:
            v = value(rng, variant, 1, im.blocks_count - 1, old)
        return ('ind %d [%d] %d->%d (inode %d)' % (b, s, old, v, ino), [],
                [(b * bs + 4 * s, struct.pack('<I', v))])
    if cls.startswith('dirent_') or cls == 'dot_dotdot':
        if cls == 'dot_dotdot':
            ents = [e for e in tg.entries if e[7] in (b'.', b'..')]
        else:
            ents = [e for e in tg.entries if e[3] and e[7] not in (b'.', b'..')]
        pref = [e for e in ents if e[0] in tg.changed_inodes or e[1] in tg.changed]
        e = rng.choice(pref if pref and rng.random() < 0.8 else ents)
        d, b, off, ino, rl, nl, ft, name = e
        base = b * bs + off
        what = 'dir %d blk %d off %d "%s"' % (d, b, off, name.decode('latin1'))
        if cls in ('dirent_inode', 'dot_dotdot'):
            v = rng.choice(tg.all_used) if variant == 0 else value(rng, variant, 1, im.inodes_count, ino)
            if v == ino: v = ino + 1
            return what + ' inode %d->%d' % (ino, v), [], [(base, struct.pack('<I', v))]
        if cls == 'dirent_rec_len':
            v = value(rng, variant, 0, bs, rl)
            return what + ' rec_len %d->%d' % (rl, v), [], [(base + 4, struct.pack('<H', v))]
        if cls == 'dirent_name_len':
            v = value(rng, variant, 0, 255, nl)
            return what + ' name_len %d->%d' % (nl, v), [], [(base + 6, bytes([v]))]
        if cls == 'dirent_file_type':
            v = value(rng, variant, 0, 7, ft)
            return what + ' file_type %d->%d' % (ft, v), [], [(base + 7, bytes([v]))]
    if cls == 'ln':
        d = tg.pick_inode(rng, tg.dirs); t = rng.choice(tg.files)
        p = tg.paths.get(d)
        if p is None:
            return None
        return 'ln <%d> %s/bug%d' % (t, p, variant), ['ln <%d> %s/bug%d' % (t, p.rstrip('/'), variant)], []
    if cls == 'unlink':
        ents = [e for e in tg.entries if e[3] and e[6] == 1 and e[7] not in (b'.', b'..')]
        e = rng.choice(ents); p = tg.paths.get(e[0], '/').rstrip('/') + '/' + e[7].decode('latin1')
        return 'unlink %s' % p, ['unlink %s' % p], []
    if cls == 'xattr_refcount':
        if not tg.xattr:
            return None
        b = rng.choice(sorted(tg.xattr)); old, = struct.unpack_from('<I', im.block(b), 4)
        v = value(rng, variant, 1, old + 4, old)
        return 'xattr %d h_refcount %d->%d' % (b, old, v), [], [(b * bs + 4, struct.pack('<I', v))]
    if cls == 'htree':
        if not tg.htree_roots:
            return None
        b, ino = rng.choice(tg.htree_roots)
        raw = im.block(b)
        choice = rng.choice(['hash_version', 'indirect_levels', 'limit', 'count', 'dx_block'])
        off = {'hash_version': 0x1C, 'indirect_levels': 0x1E, 'limit': 0x20, 'count': 0x22}.get(choice)
        if choice == 'dx_block':
            cnt, = struct.unpack_from('<H', raw, 0x22)
            off = 0x20 + 8 * rng.randrange(max(cnt, 1)) + 4
            old, = struct.unpack_from('<I', raw, off)
            v = value(rng, variant, 0, 200, old)
            return 'htree root %d %s @%d %d->%d' % (b, choice, off, old, v), [], [(b * bs + off, struct.pack('<I', v))]
        size = 1 if choice in ('hash_version', 'indirect_levels') else 2
        old = int.from_bytes(raw[off:off + size], 'little')
        v = value(rng, variant, 0, 255 if size == 1 else 600, old)
        return ('htree root %d %s %d->%d' % (b, choice, old, v), [],
                [(b * bs + off, v.to_bytes(size, 'little'))])
    if cls == 'bitflip':
        b = rng.choice(tg.changed_meta); bit = rng.randrange(bs * 8)
        byte = im.block(b)[bit >> 3] ^ (1 << (bit & 7))
        return 'flip blk %d bit %d' % (b, bit), [], [(b * bs + (bit >> 3), bytes([byte]))]
    if cls == 'free_inode':
        i = rng.choice(tg.free_inodes)
        v = [0o100644, 0o040755, 0][variant]
        if v == 0:
            return 'free inode %d links_count=1' % i, [], [(im.inode_off(i) + 26, struct.pack('<H', 1))]
        return 'free inode %d mode=%o' % (i, v), [], [(im.inode_off(i), struct.pack('<H', v))]
    raise ValueError(cls)


CLASSES = ['bbitmap_set', 'bbitmap_clear', 'ibitmap_set', 'ibitmap_clear',
           'bgd_free_blocks', 'bgd_free_inodes', 'bgd_used_dirs', 'sb_free_blocks', 'sb_free_inodes',
           'i_block', 'ind_slot', 'links_count', 'i_size', 'i_blocks', 'dtime', 'mode',
           'dirent_inode', 'dirent_rec_len', 'dirent_name_len', 'dirent_file_type', 'dot_dotdot',
           'ln', 'unlink', 'xattr_refcount', 'htree', 'bitflip', 'free_inode']

FSCK_QUIET = re.compile(r'^(Pass \d|.*: \d+/\d+ files .*|e2fsck \d|\s*$)')


def fsck(img, opt):
    p = subprocess.run(['e2fsck', opt, img], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL)
    out = p.stdout.decode('latin1', 'replace')
    problems = [l for l in out.splitlines() if not FSCK_QUIET.match(l)]
    return p.returncode, problems


def run_one(job):
    before, after, tid, cls, variant, desc, cmds, edits, workdir = job
    img = os.path.join(workdir, 'exp-%d.img' % os.getpid())
    subprocess.run(['cp', '--sparse=always', after, img], check=True)
    if cmds:
        p = subprocess.run(['debugfs', '-w', '-f', '-', img], input='\n'.join(cmds).encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        err = p.stderr.decode('latin1')
        if re.search(r'(?m)^(?!debugfs ).*(not found|Invalid|[Uu]sage|Couldn|[Ee]rror|[Bb]ad )', err):
            os.unlink(img)
            return [tid, cls, variant, desc, 'edit-failed', '', '', '', '', err.strip().splitlines()[-1][:120]]
    if edits:
        with open(img, 'r+b') as f:
            for off, data in edits:
                f.seek(off); f.write(data)
    c = subprocess.run([RECON_CHECK, before, img], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    cout = c.stdout.decode('latin1', 'replace').strip().splitlines()
    frc, fprob = fsck(img, '-fn')
    residual = ''
    if frc != 0 or fprob:
        yrc, _ = fsck(img, '-fy')
        rrc, rprob = fsck(img, '-fn')
        residual = int(rrc != 0 or bool(rprob))
    os.unlink(img)
    return [tid, cls, variant, desc, c.returncode, frc, int(bool(fprob)), residual,
            (fprob[0] if fprob else '')[:100], (cout[0] if cout else '')[:160]]


HEADER = ['transition', 'class', 'variant', 'edit', 'checker_rc', 'fsck_rc', 'fsck_printed',
          'fsck_residual', 'fsck_first_problem', 'checker_first_line']


def cmd_run(a):
    rng = random.Random(a.seed)
    classes = a.classes.split(',') if a.classes else CLASSES
    workdir = tempfile.mkdtemp(prefix='eval-exp.', dir='/tmp')
    jobs = []
    for pair in a.pairs:
        before, after = pair.split(':')
        tg = Targets(before, after)
        tid = os.path.basename(os.path.dirname(after)) + '/' + os.path.basename(after)
        for cls in classes:
            for n in range(a.per_class):
                variant = n % 3
                r = random.Random(rng.random())
                pl = None
                for _ in range(5):
                    pl = plan(cls, tg, r, variant)
                    if pl:
                        break
                if pl:
                    jobs.append((before, after, tid, cls, variant, pl[0], pl[1], pl[2], workdir))
    rows = []
    t0 = time.time()
    with Pool(a.jobs) as pool, open(a.out, 'w', newline='') as f:
        w = csv.writer(f); w.writerow(HEADER)
        for i, row in enumerate(pool.imap_unordered(run_one, jobs), 1):
            w.writerow(row); rows.append(row)
            if a.progress and (i % 10 == 0 or i == len(jobs)):
                el = time.time() - t0
                sys.stderr.write('\r[%d/%d] %.0fs elapsed, ~%.0fs left   ' %
                                 (i, len(jobs), el, el / i * (len(jobs) - i)))
        if a.progress:
            sys.stderr.write('\n')
    shutil.rmtree(workdir, ignore_errors=True)
    return rows


def summarize(rows):
    """Per class counts; 'caught by e2fsck' means `e2fsck -fn` exits non-zero."""
    stats = {}
    for r in rows:
        if r['checker_rc'] == 'edit-failed':
            continue
        s = stats.setdefault(r['class'], dict(n=0, chk=0, fsck=0, both=0, neither=0, chk_only=0,
                                              fsck_only=0, printed=0, residual=0, repaired=0, bad=0))
        chk = r['checker_rc'] == '1'; fk = r['fsck_rc'] not in ('0', '')
        s['n'] += 1; s['chk'] += chk; s['fsck'] += fk; s['both'] += chk and fk
        s['neither'] += not chk and not fk; s['chk_only'] += chk and not fk
        s['fsck_only'] += fk and not chk; s['printed'] += r['fsck_printed'] == '1'
        s['bad'] += r['checker_rc'] not in ('0', '1')
        if r['fsck_residual'] != '':
            s['repaired'] += 1; s['residual'] += r['fsck_residual'] == '1'
    return stats


def table(rows, md=None):
    stats = summarize(rows)
    cols = ['n', 'chk', 'fsck', 'both', 'neither', 'chk_only', 'fsck_only', 'printed', 'repaired', 'residual', 'bad']
    names = ['experiments', 'checker', 'e2fsck', 'both', 'neither', 'checker-only', 'e2fsck-only',
             'e2fsck printed', 'e2fsck -fy run', 'still dirty after -fy', 'checker exit 2']
    tot = {c: sum(s[c] for s in stats.values()) for c in cols}
    lines = ['| class | ' + ' | '.join(names) + ' |', '|---' * (len(names) + 1) + '|']
    for cls in [c for c in CLASSES if c in stats] + sorted(set(stats) - set(CLASSES)):
        lines.append('| %s | ' % cls + ' | '.join(str(stats[cls][c]) for c in cols) + ' |')
    lines.append('| **total** | ' + ' | '.join(str(tot[c]) for c in cols) + ' |')
    fo = [r for r in rows if r['checker_rc'] not in ('1', 'edit-failed') and r['fsck_rc'] not in ('0', '')]
    lines += ['', 'e2fsck-only cases (%d):' % len(fo), '']
    lines += ['- %s %s: `%s` (checker exit %s; e2fsck: %s)' % (r['transition'], r['class'], r['edit'],
              r['checker_rc'], r['fsck_first_problem']) for r in fo]
    failed = [r for r in rows if r['checker_rc'] == 'edit-failed']
    if failed:
        lines += ['', 'edits debugfs refused (not counted): %d' % len(failed)]
    text = '\n'.join(lines)
    print(text)
    if md:
        with open(md, 'w') as f:
            f.write(text + '\n')
    return stats, fo


def main():
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers(dest='cmd', required=True)
    r = sp.add_parser('run')
    r.add_argument('--out', required=True); r.add_argument('--jobs', type=int, default=2)
    r.add_argument('--per-class', type=int, default=3); r.add_argument('--seed', type=int, default=1)
    r.add_argument('--classes'); r.add_argument('--progress', action='store_true')
    r.add_argument('--md'); r.add_argument('pairs', nargs='+')
    t = sp.add_parser('table'); t.add_argument('csv'); t.add_argument('--md')
    for p in (r, t):
        p.add_argument('--gate', type=int, metavar='MIN',
                       help='exit 1 unless at least MIN experiments ran, every one e2fsck -fn '
                            'flags is rejected and recon-check never exits 2')
    a = ap.parse_args()
    if a.cmd == 'run':
        cmd_run(a); a.csv = a.out
    with open(a.csv) as f:
        rows = list(csv.DictReader(f))
    stats, fsck_only = table(rows, a.md)
    if a.gate is not None:
        n = sum(s['n'] for s in stats.values()); bad = sum(s['bad'] for s in stats.values())
        if n < a.gate or fsck_only or bad:
            print('GATE FAILED: %d experiments (need %d), %d e2fsck-only, %d checker exit 2'
                  % (n, a.gate, len(fsck_only), bad))
            sys.exit(1)
        print('gate passed: %d experiments, every e2fsck-flagged edit rejected' % n)


if __name__ == '__main__':
    main()
