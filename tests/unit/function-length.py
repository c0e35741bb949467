#!/usr/bin/env python3
"""tests/unit/function-length.py - the house's size rule for fuse/, io/ and
checker/: no function over MAX_FUNCTION lines, no file over MAX_FILE.

A function is counted from the first line of its definition (the line at
column 0 that the declarator starts on) to its closing brace: the house
style opens a function body with a "{" alone at column 0 and closes it with
a "}" at column 0, and nothing else does.  Prints every function and file
over its limit; exit 1 when there is one not in ALLOWED, 0 otherwise.
`function-length.py --list N` prints every function over N lines instead.
"""
import os
import re
import sys

MAX_FUNCTION = 100
MAX_FILE = 1200
FOLDERS = ['fuse', 'io', 'checker']
# Over a limit for now, each with the work that removes it.
ALLOWED = set()


def functions(path):
    """(name, first line, length) of each function definition in path."""
    with open(path) as f:
        text = f.read().split('\n')
    out = []
    i = 0
    while i < len(text):
        if text[i] != '{':
            i += 1
            continue
        start = i - 1
        while start > 0 and text[start][:1] in (' ', '\t'):
            start -= 1          # continuation lines of the declarator
        m = re.search(r'(\w+)\s*\(', text[start])
        end = i + 1
        while end < len(text) and not text[end].startswith('}'):
            end += 1
        out.append((m.group(1) if m else '?', start + 1, end - start + 1))
        i = end + 1
    return out, len(text) - (1 if text and text[-1] == '' else 0)


def main():
    src = os.environ.get('RECON_SRC') or os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
    limit = MAX_FUNCTION
    listing = len(sys.argv) == 3 and sys.argv[1] == '--list'
    if listing:
        limit = int(sys.argv[2])
    bad = 0
    for folder in FOLDERS:
        for name in sorted(os.listdir(os.path.join(src, folder))):
            if not name.endswith(('.c', '.h')):
                continue
            rel = folder + '/' + name
            funcs, nlines = functions(os.path.join(src, rel))
            allowed = rel in ALLOWED
            if nlines > MAX_FILE and not listing:
                print('%s: %d lines (at most %d)%s' % (rel, nlines, MAX_FILE, ' [allowed]' if allowed else ''))
                bad += not allowed
            for fname, line, length in funcs:
                if length > limit:
                    print('%s:%d: %s: %d lines%s' % (rel, line, fname, length,
                          '' if listing else ' (at most %d)%s' % (MAX_FUNCTION, ' [allowed]' if allowed else '')))
                    bad += not allowed and not listing
    if bad:
        print('%d over the limits: split functions by step, files by concern' % bad)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
