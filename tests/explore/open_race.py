"""tests/explore/open_race.py DIR SECONDS: an open racing the removal of the
name it looked up.  One process keeps replacing DIR/f (create g, rename g
over f, and a mkdir/rmdir that takes free inodes); the other keeps opening
DIR/f read-write, truncating and writing it.  On ext3 the open either finds
the old file (kept alive by the open) or the new one; every call succeeds.
Exit 0 when every open/ftruncate/pwrite/close succeeded, else 1."""
import os, sys, time

d, secs = sys.argv[1], float(sys.argv[2])
os.chdir(d)
end = time.time() + secs
child = os.fork()
if child == 0:
    i = 0
    while time.time() < end:
        i += 1
        n = 'g%d' % (i % 2)
        try:
            with open(n, 'w') as f:
                f.write('z' * 3000)
            os.rename(n, 'f')
            if i % 3 == 0:
                os.mkdir('dd%d' % i)
                os.rmdir('dd%d' % i)
        except OSError as e:
            print('open_race: replacer: %s' % e, file=sys.stderr)
            os._exit(1)
    os._exit(0)
errors, opens = [], 0
while time.time() < end and len(errors) < 5:
    try:
        fd = os.open('f', os.O_RDWR)
    except FileNotFoundError:
        continue
    opens += 1
    for what, call in (('ftruncate', lambda: os.ftruncate(fd, 0)),
                       ('pwrite', lambda: os.pwrite(fd, b'y' * 5000, 0)),
                       ('close', lambda: os.close(fd))):
        try:
            call()
        except OSError as e:
            errors.append('%s after open %d: %s' % (what, opens, e))
            if what != 'close':
                try:
                    os.close(fd)
                except OSError:
                    pass
            break
_, st = os.waitpid(child, 0)
for e in errors:
    print('open_race: ' + e)
print('open_race: %d opens, %d errors, replacer exit %d' % (opens, len(errors), st >> 8))
sys.exit(1 if errors or st else 0)
