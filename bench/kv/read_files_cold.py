# Cold read of the files given (in order) by T threads; prints MB/s.
import os, sys, time, threading
T = int(sys.argv[1]); paths = sys.argv[2:]; MB = 1 << 20
for p in paths:
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
nxt = [0]; lk = threading.Lock(); tot = [0]
def w():
    while True:
        with lk:
            i = nxt[0]; nxt[0] += 1
        if i >= len(paths): return
        fd = os.open(paths[i], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        while True:
            b = os.read(fd, 32 * MB)
            if not b: break
            with lk: tot[0] += len(b)
        os.close(fd)
t = time.time(); th = [threading.Thread(target=w) for _ in range(T)]
[x.start() for x in th]; [x.join() for x in th]
print(f"{len(paths)} files, {tot[0]/1e6:.0f} MB, threads {T}: {tot[0]/1e6/(time.time()-t):.0f} MB/s")
