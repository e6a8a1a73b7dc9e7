"""A 64 GiB sparse file extracts with several threads (each 8 MiB range of it written by a
different thread) identical to the source: same size, the same data at the same offsets, and
holes kept as holes (few allocated blocks). unsquashfs extracts the same image as the
reference. The timing comparison lives in bench/extract_sparse.sh."""
import os

from sqartest import SQAR, data_regions, log, main, need_tool, run, skip, sqar_create, tempdir, unsquashfs_extract

SIZE = 64 << 30
# Data islands: at the start, inside, across an 8 MiB range boundary, and at the very end.
ISLANDS = [(0, b"head" * 1024), (5 << 30, b"middle" * 5000), ((8 << 20) * 3000 - 100, b"straddle" * 100),
           (SIZE - 4096, b"T" * 4096)]


def data_of_regions(path):
    """[(offset, bytes)] of every data region SEEK_DATA / SEEK_HOLE report (a few MiB here)."""
    with open(path, "rb") as f:
        return [(start, os.pread(f.fileno(), end - start, start)) for start, end in data_regions(path)]


def nonzero(regions):
    return [(off + i, b) for off, data in regions for i, b in enumerate(data) if b]


def check(path, what):
    st = os.stat(path)
    if st.st_size != SIZE:
        raise AssertionError(f"{what}: size {st.st_size}, expected {SIZE}")
    if st.st_blocks * 512 > 64 << 20:
        raise AssertionError(f"{what}: {st.st_blocks * 512} bytes allocated: holes were written out")
    with open(path, "rb") as f:
        for off, data in ISLANDS:
            f.seek(off)
            if f.read(len(data)) != data:
                raise AssertionError(f"{what}: wrong data at offset {off}")
    return data_of_regions(path)


def test_sparse_64g_parallel():
    need_tool("unsquashfs")
    with tempdir() as d:
        src = f"{d}/src"
        os.makedirs(src)
        with open(f"{src}/big", "wb") as f:
            f.truncate(SIZE)
            for off, data in ISLANDS:
                f.seek(off)
                f.write(data)
        probe = os.stat(f"{src}/big")
        if probe.st_blocks * 512 > 64 << 20:
            skip(f"{d} does not keep holes")
        img = f"{d}/sparse.sqfs"
        sqar_create(src, img)
        ref = f"{d}/ref"
        unsquashfs_extract(img, ref)
        expected = check(f"{ref}/big", "unsquashfs")
        for jobs in ("2", "3"):
            out = f"{d}/out{jobs}"
            run([SQAR, "extract", "-q", "-j", jobs, img, "-C", out])
            got = check(f"{out}/big", f"extract -j{jobs}")
            # Where holes start may differ from unsquashfs's by block granularity: compare every
            # non-zero byte and its offset.
            if nonzero(got) != nonzero(expected):
                raise AssertionError(f"extract -j{jobs}: data regions differ from unsquashfs's")
            log(f"ok: -j{jobs}: 64 GiB sparse file identical, {os.stat(f'{out}/big').st_blocks * 512} bytes allocated")


if __name__ == "__main__":
    main([test_sparse_64g_parallel])
