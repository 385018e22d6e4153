#!/usr/bin/env python3
"""Prints the IQ codebooks of a GGML checkout's ggml-common.h as C++ initializer rows, with the
FNV-1a 64 checksum of each table's little-endian bytes (the one tests/tensor/iq2_tables_test.cpp
pins). Usage: gen_iq_grids.py path/to/ggml-common.h
[iq2xxs_grid|iq2xs_grid|iq1s_grid|iq2s_grid|iq3xxs_grid|iq3s_grid]"""
import re
import sys


def table(src, name):
    m = re.search(r'GGML_TABLE_BEGIN\(uint(64|32)_t, %s, \w+\)(.*?)GGML_TABLE_END\(\)' % name, src,
                  re.S)
    return int(m.group(1)) // 8, [int(v, 16) for v in re.findall(r'0x[0-9a-fA-F]+', m.group(2))]


def fnv1a64(vals, width):
    h = 0xcbf29ce484222325
    for v in vals:
        for b in v.to_bytes(width, 'little'):
            h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def main():
    src = open(sys.argv[1]).read()
    names = sys.argv[2:] or ['iq2xxs_grid', 'iq2xs_grid', 'iq1s_grid', 'iq2s_grid', 'iq3xxs_grid',
                             'iq3s_grid']
    for name in names:
        width, t = table(src, name)
        print('// %s: %d entries, fnv1a64 0x%016x' % (name, len(t), fnv1a64(t, width)))
        per_row, fmt = (4, '0x%016xull,') if width == 8 else (8, '0x%08xu,')
        for i in range(0, len(t), per_row):
            print('    ' + ' '.join(fmt % v for v in t[i:i + per_row]))


if __name__ == '__main__':
    main()
