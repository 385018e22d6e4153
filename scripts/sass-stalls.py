#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's SASS source page.

Reads the CSV that `ncu --import R --page source --csv --print-source sass` prints (plain or
gzipped; scripts/cuda-check.sh `device decode-run` with DECODE_NCU_SOURCE=1 writes it) and,
per profiled kernel, prints the stall samples by runs of 40 instructions (the regions holding
at least 2 % of them, with their most common opcodes) and the 12 instructions with the most.

    python3 scripts/sass-stalls.py ncu-Kernel-sass.csv.gz [name-filter]
"""
import collections
import csv
import gzip
import io
import signal
import sys

REGION = 40


def rows(path):
    raw = open(path, 'rb').read()
    if raw[:2] == b'\x1f\x8b':
        raw = gzip.decompress(raw)
    return csv.reader(io.StringIO(raw.decode('utf-8', 'replace')))


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip())
        return 2
    want = argv[2] if len(argv) > 2 else ''
    kernels = collections.OrderedDict()
    name = None
    header = None
    for r in rows(argv[1]):
        if r and r[0] == 'Kernel Name':
            name = '%s #%d' % (r[1], len(kernels))
            kernels[name] = []
            header = None
        elif r and r[0] == 'Address':
            header = r
        elif header and name and len(r) > 5:
            kernels[name].append(r)
    for k, v in kernels.items():
        if want not in k:
            continue
        samples = [int(x[2]) if x[2].isdigit() else 0 for x in v]
        total = sum(samples) or 1
        print('== %s: %d instructions, %d stall samples' % (k[-90:], len(v), total))
        for start in range(0, len(v), REGION):
            part = sum(samples[start:start + REGION])
            if part * 50 >= total:
                ops = collections.Counter(x[1].split()[0] for x in v[start:start + REGION] if x[1].split())
                print('  %5d-%5d %5.1f %%  %s' % (start, start + REGION - 1, 100.0 * part / total,
                                                ' '.join(o for o, _ in ops.most_common(6))))
        for i in sorted(range(len(v)), key=lambda i: -samples[i])[:12]:
            print('   %5d %6d  %s' % (i, samples[i], v[i][1].strip()[:70]))
    return 0


if __name__ == '__main__':
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # piped into head
    sys.exit(main(sys.argv))
