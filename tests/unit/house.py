#!/usr/bin/env python3
"""tests/unit/house.py - the house drawn from the code: three rooms, fuse/ on
top of io/ on top of checker/, and every arrow pointing down.

    house.py SRCDIR [CHECKER_LIB RIO_LIB RECON_FUSE]

Draws three graphs and fails (exit 1, one line per wrong arrow) on an arrow
from a lower room to a higher one, or into another room's private rooms:

  includes  every #include "..." of fuse/, io/ and checker/, resolved to the
            file it names.  A file may include its own folder's headers and
            the public header of a room below (checker/checker.h, io/io.h;
            fuse/ has none for others): any other header of another folder
            is private to it.
  links     what each folder's meson.build hands its targets: a name is the
            room's whose meson.build defines it (checker_dep, rio_lib, ...),
            and libfuse belongs to fuse/, liburing to io/.  checker's library
            links neither io nor fuse; io's links no fuse.
  calls     with the built libraries and daemon: the symbols the checker's
            library leaves undefined must not be defined by io or by the
            daemon's own objects, nor be libfuse's or liburing's; io's must
            not be the daemon's or libfuse's.  This is what the code calls,
            whatever its headers say.
"""
import os
import re
import subprocess
import sys

ROOMS = ['checker', 'io', 'fuse']          # bottom to top
PUBLIC = {'checker': 'checker.h', 'io': 'io.h', 'fuse': None}
# external libraries that belong to one room: nothing below it may link them
EXTERNAL = {'fuse_dep': 'fuse', 'uring_dep': 'io'}
EXTERNAL_SYMBOLS = [(re.compile(r'^fuse_'), 'fuse'),
                    (re.compile(r'^(__)?io_uring_'), 'io')]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def level(room):
    return ROOMS.index(room)


def room_of(src, path):
    rel = os.path.relpath(os.path.normpath(path), src)
    top = rel.split(os.sep)[0]
    return top if top in ROOMS else None


def resolve(src, including, name):
    """The path an #include "name" of `including` reaches: its own folder
    first, then the rooms' folders (the build puts each on the path of the
    rooms above it)."""
    here = os.path.join(os.path.dirname(including), name)
    if os.path.exists(here):
        return here
    found = [os.path.join(src, r, name) for r in ROOMS
             if os.path.exists(os.path.join(src, r, name))]
    return found[0] if len(found) == 1 else (found or None)


def include_arrows(src):
    wrong = []
    for room in ROOMS:
        folder = os.path.join(src, room)
        for name in sorted(os.listdir(folder)):
            if not name.endswith(('.c', '.h', '.def')):
                continue
            path = os.path.join(folder, name)
            with open(path, errors='replace') as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    where = '%s/%s:%d' % (room, name, n)
                    target = resolve(src, path, m.group(1))
                    if isinstance(target, list):
                        wrong.append('%s: "%s" is in more than one room: %s' % (
                            where, m.group(1), ', '.join(os.path.relpath(t, src) for t in target)))
                        continue
                    if target is None:
                        continue    # generated or outside the house
                    to = room_of(src, target)
                    if to is None or to == room:
                        continue
                    header = os.path.basename(target)
                    if level(to) > level(room):
                        wrong.append('%s: %s/ includes %s/%s: an arrow upward' % (
                            where, room, to, header))
                    elif header != PUBLIC[to]:
                        wrong.append('%s: %s/ includes %s/%s, a header private to %s/ (%s)' % (
                            where, room, to, header, to,
                            'its public header is %s' % PUBLIC[to] if PUBLIC[to] else 'it has no public header'))
    return wrong


def meson_names(text):
    """(names defined, names used) in a meson.build, comments and strings left out."""
    text = re.sub(r"'(?:[^'\\]|\\.)*'", "''", text)
    text = re.sub(r'#[^\n]*', '', text)
    defined = set(re.findall(r'^\s*([A-Za-z_]\w*)\s*\+?=', text, re.M))
    used = set(re.findall(r'[A-Za-z_]\w*', text))
    return defined, used


def link_arrows(src):
    owner = dict(EXTERNAL)
    uses = {}
    for room in ROOMS:
        with open(os.path.join(src, room, 'meson.build')) as f:
            defined, used = meson_names(f.read())
        for name in defined:
            owner.setdefault(name, room)
        uses[room] = used
    wrong = []
    for room in ROOMS:
        for name in sorted(uses[room]):
            to = owner.get(name)
            if to and level(to) > level(room):
                wrong.append('%s/meson.build: %s/ links %s, which belongs to %s/: an arrow upward' % (
                    room, room, name, to))
    return wrong


def symbols(path):
    """(defined, undefined) global symbols of an object, archive or executable."""
    out = subprocess.run(['nm', '-g', path], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[-2] == 'U':
            undefined.add(parts[-1])
        elif len(parts) == 3 and parts[1] not in 'Uwv':
            defined.add(parts[2])
    return defined, undefined - defined


def call_arrows(checker_lib, rio_lib, daemon):
    chk_def, chk_undef = symbols(checker_lib)
    rio_def, rio_undef = symbols(rio_lib)
    exe_def, _ = symbols(daemon)
    # what the daemon's own objects define; names with a leading underscore
    # are the toolchain's (a sanitizer's runtime links some into the binary)
    daemon_own = {s for s in exe_def - rio_def - chk_def if not s.startswith('_')}
    wrong = []
    for room, undef, above in (('checker', chk_undef, [('io', rio_def), ('fuse', daemon_own)]),
                               ('io', rio_undef, [('fuse', daemon_own)])):
        for sym in sorted(undef):
            for to, defs in above:
                if sym in defs:
                    wrong.append('%s/ calls %s, defined in %s/: an arrow upward' % (room, sym, to))
            for pattern, to in EXTERNAL_SYMBOLS:
                if pattern.match(sym) and level(to) > level(room):
                    wrong.append('%s/ calls %s, a library of %s/: an arrow upward' % (room, sym, to))
    return wrong


def main(argv):
    if len(argv) not in (2, 5):
        sys.stderr.write('usage: house.py SRCDIR [CHECKER_LIB RIO_LIB RECON_FUSE]\n')
        return 2
    src = os.path.abspath(argv[1])
    wrong = include_arrows(src) + link_arrows(src)
    if len(argv) == 5:
        wrong += call_arrows(*argv[2:])
    for w in wrong:
        print(w)
    if wrong:
        print('%d wrong arrow(s): the house is fuse/ -> io/ -> checker/, each room reached through '
              'its public header only' % len(wrong))
        return 1
    print('house: %s, arrows only downward (includes, links%s)' % (
        ' -> '.join(r + '/' for r in reversed(ROOMS)), ', calls' if len(argv) == 5 else ''))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
