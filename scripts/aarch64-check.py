#!/usr/bin/env python3
"""Compile-checks flashkv's host code for aarch64 (GH200, DGX Spark) with Debian's cross compiler.

Usage: scripts/aarch64-check.py BUILD_DIR [--jobs N]

Every translation unit under src/ that BUILD_DIR's compile_commands.json lists (the CUDA
kernels excepted: nvcc builds those per GPU architecture, docs/CUDA.md) is compiled again
with aarch64-linux-gnu-g++ -fsyntax-only and the same defines, include paths and warnings,
without -march. The AVX2 kernels fall back to the portable ones there
(src/tensor/simd_avx2.h), which CI's sanitizer build runs on x86 as well.

OpenSSL's configuration header is the one per-architecture header the build needs that
Debian keeps under the x86-64 multiarch directory only (libssl-dev:arm64 would need a
foreign architecture); both are LP64 builds of the same OpenSSL, so the check reads the
x86-64 copy of those two files and nothing else from that directory.

Exits 0 when every unit compiles without an error or a warning; prints each failure.
"""
import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

CROSS = "aarch64-linux-gnu-g++"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    if shutil.which(CROSS) is None:
        print(f"aarch64-check: {CROSS} not found (apt-get install g++-aarch64-linux-gnu)")
        return 1
    db = os.path.join(args.build_dir, "compile_commands.json")
    try:
        with open(db) as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        print(f"aarch64-check: cannot read {db}: {e}")
        return 1
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = os.path.join(root, "src") + os.sep

    shim = tempfile.mkdtemp(prefix="flashkv-aarch64-")
    os.makedirs(os.path.join(shim, "openssl"))
    for h in ("opensslconf.h", "configuration.h"):
        p = os.path.join("/usr/include/x86_64-linux-gnu/openssl", h)
        if os.path.exists(p):
            os.symlink(p, os.path.join(shim, "openssl", h))

    jobs = []
    for e in entries:
        path = os.path.abspath(os.path.join(e["directory"], e["file"]))
        if not path.startswith(src) or not path.endswith((".cpp", ".cc")):
            continue
        if os.sep + "backend" + os.sep + "cuda" + os.sep in path:
            continue
        argv = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        out = [CROSS]
        skip = False
        for a in argv[1:]:
            if skip:
                skip = False
                continue
            if a == "-o":
                skip = True
                continue
            if a.startswith("-march=") or a.startswith("-mtune=") or a == "-c":
                continue
            out.append(a)
        out[1:1] = ["-fsyntax-only", "-idirafter", shim]
        jobs.append((path, out, e["directory"]))
    if not jobs:
        print(f"aarch64-check: no translation units under {src} in {db}")
        return 1

    def run(job):
        path, argv, cwd = job
        p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
        return path, p.returncode, p.stderr

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        for path, rc, err in ex.map(run, jobs):
            if rc != 0 or "warning:" in err:
                failed += 1
                print(f"== {os.path.relpath(path, root)}: {'error' if rc else 'warning'}")
                print(err.rstrip()[:4000])
    shutil.rmtree(shim, ignore_errors=True)
    print(f"aarch64-check: {len(jobs) - failed} of {len(jobs)} translation units compile "
          f"for aarch64 without a warning")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
