# Cold reads of one large file vs the same bytes as chunk-sized files, through the page
# cache and through O_DIRECT, by 1..8 threads: which read pattern gets a file-per-chunk
# restore to the rate of one file on this disk (docs/PERFORMANCE.md, "v2 restores on the
# device host's disk"). Usage: direct_vs_buffered.py DIR [FILES [FILE_MB [ROUNDS]]]
import mmap, os, sys, threading, time

d = sys.argv[1]
nfiles = int(sys.argv[2]) if len(sys.argv) > 2 else 14
file_mb = float(sys.argv[3]) if len(sys.argv) > 3 else 27.5
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 2
MB = 1 << 20
fbytes = int(file_mb * MB) // 4096 * 4096 + 448  # a chunk file is not a multiple of 4 KiB
os.makedirs(d, exist_ok=True)
big = os.path.join(d, "one.bin")
files = [os.path.join(d, f"c{i:03d}.kvc") for i in range(nfiles)]


def write(path, n):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.posix_fallocate(fd, 0, n)
    block = os.urandom(4 * MB)
    done = 0
    while done < n:
        done += os.write(fd, block[: min(len(block), n - done)])
    os.fdatasync(fd)
    os.close(fd)


write(big, fbytes * nfiles)
for p in files:
    write(p, fbytes)


def drop(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def read_file(path, direct, piece):
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags)
    if not direct:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    buf = mmap.mmap(-1, piece)
    got, off = 0, 0
    while True:
        n = os.preadv(fd, [buf], off)
        got += n
        off += n
        if n < piece:
            break
    os.close(fd)
    buf.close()
    return got


def by_threads(paths, threads, direct, piece, header_pass=False):
    drop(paths)
    t = time.time()
    if header_pass:  # what a restore that checks every header first does
        for p in paths:
            fd = os.open(p, os.O_RDONLY)
            os.pread(fd, 4096, 0)
            os.close(fd)
    nxt, lk, tot = [0], threading.Lock(), [0]

    def worker():
        while True:
            with lk:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(paths):
                return
            n = read_file(paths[i], direct, piece)
            with lk:
                tot[0] += n

    th = [threading.Thread(target=worker) for _ in range(threads)]
    [x.start() for x in th]
    [x.join() for x in th]
    return tot[0] / 1e6 / (time.time() - t)


def big_striped(threads, piece):
    """One file, O_DIRECT, `threads` reads of `piece` in flight (striped offsets)."""
    drop([big])
    size = os.path.getsize(big)
    t = time.time()
    nxt, lk = [0], threading.Lock()

    def worker():
        fd = os.open(big, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, piece)
        while True:
            with lk:
                off = nxt[0]
                nxt[0] += piece
            if off >= size:
                break
            os.preadv(fd, [buf], off)
        os.close(fd)

    th = [threading.Thread(target=worker) for _ in range(threads)]
    [x.start() for x in th]
    [x.join() for x in th]
    return size / 1e6 / (time.time() - t)


print(f"{nfiles} files of {fbytes/1e6:.1f} MB vs one file of {nfiles*fbytes/1e6:.0f} MB")
for r in range(rounds):
    rows = []
    rows.append(("one file, buffered 16 MiB reads (dd)", by_threads([big], 1, False, 16 * MB)))
    rows.append(("one file, O_DIRECT 16 MiB, 1 in flight", big_striped(1, 16 * MB)))
    rows.append(("one file, O_DIRECT 4 MiB, 4 in flight", big_striped(4, 4 * MB)))
    rows.append(("one file, O_DIRECT 8 MiB, 4 in flight", big_striped(4, 8 * MB)))
    for T in (1, 2, 4):
        rows.append((f"files, buffered 32 MiB reads, {T} thr", by_threads(files, T, False, 32 * MB)))
    rows.append(("files, buffered, 4 thr, header pass first", by_threads(files, 4, False, 32 * MB, True)))
    rows.append(("files, buffered, 1 thr, header pass first", by_threads(files, 1, False, 32 * MB, True)))
    for T in (1, 2, 4, 8):
        rows.append((f"files, O_DIRECT whole file, {T} thr", by_threads(files, T, True, 32 * MB)))
    for T in (1, 2, 4, 8):
        rows.append((f"files, O_DIRECT 4 MiB reads, {T} thr", by_threads(files, T, True, 4 * MB)))
    for T in (2, 4):
        rows.append((f"files, O_DIRECT 8 MiB reads, {T} thr", by_threads(files, T, True, 8 * MB)))
        rows.append((f"files, O_DIRECT 1 MiB reads, {T} thr", by_threads(files, T, True, 1 * MB)))
    ref = rows[0][1]
    print(f"round {r + 1}")
    for name, v in rows:
        print(f"  {name:44s} {v:7.0f} MB/s  {v / ref:5.2f} of dd")
