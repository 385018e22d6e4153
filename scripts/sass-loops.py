#!/usr/bin/env python3
"""Instructions per MMA in the loops of an sm_90 cubin's kernels, without cuobjdump.

The development machine has nvcc and ptxas but no cuobjdump or nvdisasm, and the number of
instructions a kernel's main loop issues per tensor-core MMA is what bounds the int8 prefill
kernels (docs/CUDA.md). This reads the cubin's ELF `.text.<kernel>` sections directly: every
SASS instruction is 16 bytes, its opcode the low 12 bits; a backward BRA closes a loop. For
each loop that holds an IMMA it prints the loop's instruction count (NOPs left out), the count
per IMMA and the commonest opcodes (hex: 237 IMMA, 220 FMUL, 221 FADD, 984 LDS, 83b LDSM,
fae LDGSTS, 816 PRMT, 812 LOP3, 819 SHF, 224 IMAD).

  nvcc -I src -O3 -DNDEBUG --expt-relaxed-constexpr -std=c++17 -x cu -arch=sm_90 -cubin \\
      -Xptxas -v src/backend/cuda/products/matmul_imma.cu -o /tmp/k.cubin
  scripts/sass-loops.py /tmp/k.cubin [KERNEL_NAME_REGEX]
"""
import collections
import re
import struct
import sys

OP_IMMA, OP_NOP, OP_BRA = 0x237, 0x918, 0x947


def text_sections(path):
    d = open(path, "rb").read()
    if d[:4] != b"\x7fELF" or d[4] != 2:
        sys.exit(f"{path}: not a 64-bit ELF cubin")
    shoff = struct.unpack_from("<Q", d, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
    names = hdrs[shstrndx][4]
    for h in hdrs:
        name = d[names + h[0]:d.index(b"\0", names + h[0])].decode()
        if name.startswith(".text."):
            yield name[6:], d[h[4]:h[4] + h[5]]


def branch_target(i, lo):
    # The offset, in 4-byte units from the next instruction: bits 16-23 and 34-63 of the low
    # word (signed).
    up = lo >> 34
    if up >= 1 << 29:
        up -= 1 << 30
    return i + 1 + (up * 256 + ((lo >> 16) & 0xFF)) * 4 // 16


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    pattern = re.compile(sys.argv[2]) if len(sys.argv) > 2 else None
    for name, text in text_sections(sys.argv[1]):
        if pattern and not pattern.search(name):
            continue
        ops = [int.from_bytes(text[i:i + 8], "little") for i in range(0, len(text), 16)]
        n = sum(1 for lo in ops if lo & 0xFFF != OP_NOP)
        imma = sum(1 for lo in ops if lo & 0xFFF == OP_IMMA)
        print(f"{name}: {n} instructions, {imma} IMMA")
        for i, lo in enumerate(ops):
            if lo & 0xFFF != OP_BRA or branch_target(i, lo) > i:
                continue
            body = [x & 0xFFF for x in ops[branch_target(i, lo):i + 1] if x & 0xFFF != OP_NOP]
            k = body.count(OP_IMMA)
            if k == 0:
                continue
            top = " ".join(f"{op:03x}:{c}" for op, c in collections.Counter(body).most_common(12))
            print(f"  loop of {len(body)} instructions, {k} IMMA, {len(body) / k:.2f} per IMMA; {top}")


if __name__ == "__main__":
    main()
