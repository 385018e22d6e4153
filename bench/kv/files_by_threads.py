# 14 files of 27.5 MB read cold by T threads at once (each thread whole files, in turn) vs one file.
import os, time, sys, threading
D = sys.argv[1]; os.makedirs(D, exist_ok=True)
MB = 1 << 20; CH = int(27.5 * MB); N = 14
data = os.urandom(CH)
paths = [f"{D}/c{i}" for i in range(N)]
for p in paths:
    with open(p, "wb") as f: f.write(data); f.flush(); os.fsync(f.fileno())
one = f"{D}/one"
with open(one, "wb") as f:
    for i in range(N): f.write(data)
    f.flush(); os.fsync(f.fileno())
def drop(ps):
    for p in ps:
        fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
def readfile(p, rs):
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    while os.read(fd, rs): pass
    os.close(fd)
def run(T, rs=32 * MB):
    drop(paths); t = time.time(); nxt = [0]; lk = threading.Lock()
    def w():
        while True:
            with lk:
                i = nxt[0]; nxt[0] += 1
            if i >= N: return
            readfile(paths[i], rs)
    th = [threading.Thread(target=w) for _ in range(T)]
    [x.start() for x in th]; [x.join() for x in th]
    return N * CH / (time.time() - t) / 1e6
for r in range(2):
    drop([one]); t = time.time(); readfile(one, 16 * MB); o = N * CH / (time.time() - t) / 1e6
    print(f"round {r}: one file {o:.0f} MB/s | 14 files, threads 1: {run(1):.0f}, 2: {run(2):.0f}, 3: {run(3):.0f}, 4: {run(4):.0f}, 8: {run(8):.0f}", flush=True)
for p in paths + [one]: os.remove(p)
