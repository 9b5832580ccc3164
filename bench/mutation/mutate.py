#!/usr/bin/env python3
"""mutate.py FILE LINE COL TYPE: apply one gremlins v0.6.0 mutation at LINE:COL (1-based, bytes)."""
import sys
f, line, col, typ = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
maps = {
 'CONDITIONALS_BOUNDARY': {'>=': '>', '>': '>=', '<=': '<', '<': '<='},
 'CONDITIONALS_NEGATION': {'==': '!=', '!=': '==', '>=': '<', '>': '<=', '<=': '>', '<': '>='},
 'ARITHMETIC_BASE': {'+': '-', '-': '+', '*': '/', '/': '*', '%': '*'},
 'INCREMENT_DECREMENT': {'++': '--', '--': '++'},
 'INVERT_NEGATIVES': {'-': '+'},
}[typ]
lines = open(f, 'rb').read().decode().split('\n')
s = lines[line-1].encode()
i = col - 1
for op in sorted(maps, key=len, reverse=True):
    if s[i:i+len(op)].decode() == op:
        s = s[:i] + maps[op].encode() + s[i+len(op):]
        break
else:
    sys.exit('no operator of %s at %d:%d: %r' % (typ, line, col, s[i:i+3]))
print('%s:%d: %s' % (f, line, s.decode().strip()))
lines[line-1] = s.decode()
open(f, 'w').write('\n'.join(lines))
