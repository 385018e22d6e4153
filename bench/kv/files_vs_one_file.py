# Cold read rate of one 385 MB file vs 14 files of 27.5 MB (the v2 chunk pattern at 25k tokens),
# written sequentially, interleaved (640 KiB pieces round-robin, as a streamed save), and
# interleaved after fallocate; 16 MiB reads with FADV_SEQUENTIAL, page cache dropped by
# fsync + FADV_DONTNEED, as flashkv_bench_kv does.
import os, time, sys
D = sys.argv[1]; os.makedirs(D, exist_ok=True)
MB = 1 << 20; CH = int(27.5 * MB); N = 14; PIECE = 640 * 1024
data = os.urandom(CH)
def drop(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
def read(paths, willneed=False):
    drop(paths); t = time.time(); n = 0
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    for i, fd in enumerate(fds):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        if willneed and i + 1 < len(fds): os.posix_fadvise(fds[i + 1], 0, 0, os.POSIX_FADV_WILLNEED)
        while True:
            b = os.read(fd, 16 * MB)
            if not b: break
            n += len(b)
    for fd in fds: os.close(fd)
    return n / (time.time() - t) / 1e6
one = f"{D}/one"
with open(one, "wb") as f:
    for i in range(N): f.write(data)
    f.flush(); os.fsync(f.fileno())
seq = [f"{D}/seq{i}" for i in range(N)]
for p in seq:
    with open(p, "wb") as f: f.write(data); f.flush(); os.fsync(f.fileno())
def interleaved(prefix, falloc):
    ps = [f"{D}/{prefix}{i}" for i in range(N)]
    fs = [open(p, "wb") for p in ps]
    if falloc:
        for f in fs: os.posix_fallocate(f.fileno(), 0, CH)
    for at in range(0, CH, PIECE):
        for f in fs: f.write(data[at:at + PIECE])
    for f in fs: f.flush(); os.fsync(f.fileno()); f.close()
    return ps
il = interleaved("il", False); fa = interleaved("fa", True)
for r in range(2):
    print(f"round {r}: one file {read([one]):.0f} MB/s | 14 sequential {read(seq):.0f} (+willneed {read(seq, True):.0f}) "
          f"| 14 interleaved {read(il):.0f} (+willneed {read(il, True):.0f}) | interleaved+fallocate {read(fa):.0f} (+willneed {read(fa, True):.0f})", flush=True)
for p in [one] + seq + il + fa: os.remove(p)
