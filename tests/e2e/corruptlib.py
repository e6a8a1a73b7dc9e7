"""Damaged images for the hardening tests: real images (sqar create, mksquashfs) cut at every table
boundary and with bits flipped in the superblock, every table, metadata blocks and data blocks.

Each damage is a Damage(name, data, must_fail): must_fail means the damage hits data or
metadata that some file uses, so `sqar verify` has to notice (the codec's checksum or the
manifest catches it); otherwise the damage may be harmless (an unused superblock field, the
padding after bytes_used) and exit 0 is fine.
"""
import collections
import os
import struct

from sqartest import make_full_tree, run, write

Damage = collections.namedtuple("Damage", "name data must_fail")

ABSENT = 0xFFFFFFFFFFFFFFFF
SB_FIELDS = ["inode_count", "mod_time", "block_size", "fragment_count", "compressor", "block_log", "flags",
             "id_count", "version_major", "version_minor", "root_inode_ref", "bytes_used", "id_table_start",
             "xattr_id_table_start", "inode_table_start", "directory_table_start", "fragment_table_start",
             "export_table_start"]
SB_FORMAT = "<IIIIIHHHHHHQQQQQQQQ"  # magic first, then SB_FIELDS


def superblock(data):
    values = struct.unpack_from(SB_FORMAT, data, 0)
    return dict(zip(["magic"] + SB_FIELDS, values))


def field_offset(name):
    names = ["magic"] + SB_FIELDS
    return struct.calcsize(SB_FORMAT[:1 + names.index(name)]) if name != "magic" else 0


def make_source(root):
    """Every kind of entry (make_full_tree) plus a directory large enough to get a directory index."""
    make_full_tree(root)
    for i in range(700):
        write(f"{root}/big-dir/entry-with-a-long-name-{i:04d}", b"%d" % i)
    return root


def boundaries(sb):
    """Sorted table starts inside the image, and bytes_used."""
    starts = [sb[k] for k in ("inode_table_start", "directory_table_start", "fragment_table_start",
                              "export_table_start", "id_table_start", "xattr_id_table_start")]
    return sorted({s for s in starts if s != ABSENT and s < sb["bytes_used"]} | {sb["bytes_used"]})


def flip(data, pos, mask):
    b = bytearray(data)
    b[pos] ^= mask
    return bytes(b)


def damages(data, strong, data_flips=6):
    """Every damage of one image: truncations, superblock flips, flips in each table and data block."""
    sb = superblock(data)
    out = []
    cuts = boundaries(sb)
    # Truncations: at each boundary and halfway to the next one; anything short of bytes_used
    # loses a table some file needs. Cutting at bytes_used only drops the padding / manifest.
    points = [0, 50, 96] + cuts + [(a + b) // 2 for a, b in zip([96] + cuts, cuts)]
    for p in sorted(set(points)):
        if p < len(data):
            harmless = p >= sb["bytes_used"] and data[p:p + 8] != b"SQARMNF1"
            out.append(Damage(f"truncated at {p:#x}", data[:p], must_fail=not harmless))
    # Superblock: every field once. Flipping bit 31 (or a high bit of small fields) of anything
    # that locates or decodes data must be caught; time stamps and counts may go unnoticed.
    for name in ["magic"] + SB_FIELDS:
        off = field_offset(name)
        size = struct.calcsize("<" + SB_FORMAT[1 + (["magic"] + SB_FIELDS).index(name)])
        must = name in ("magic", "block_size", "compressor", "block_log", "version_major", "version_minor",
                        "root_inode_ref", "bytes_used", "id_table_start", "inode_table_start",
                        "directory_table_start")
        if name in ("fragment_table_start", "export_table_start", "xattr_id_table_start"):
            must = sb[name] != ABSENT
        byte = off + min(size, 4) - 1  # the top byte of the low 32 bits: far out of range
        out.append(Damage(f"superblock {name} bit flipped", flip(data, byte, 0x80), must))
    # Every metadata block (header, then its first, middle and last payload byte) and every pointer
    # array. A flipped payload byte of a compressed block is caught by gzip's checksum (strong
    # images); headers, pointers and blocks stored raw can change without a checksum noticing.
    for kind, start, end, compressed in layout(data, sb):
        if kind == "pointers":
            out.append(Damage(f"pointer byte {start:#x} flipped", flip(data, start, 0x10), must_fail=False))
            continue
        out.append(Damage(f"metadata header {start:#x} flipped", flip(data, start, 0x10), must_fail=False))
        for pos in sorted({start + 2, (start + 2 + end) // 2}):
            out.append(Damage(f"metadata block {start:#x} byte {pos:#x} flipped", flip(data, pos, 0x10),
                              must_fail=strong and compressed))
    # Data blocks and fragments: between the superblock (+ compressor options) and the first table.
    first = sb["inode_table_start"]
    options_block = sb["flags"] & 0x400  # compressor options: one raw metadata block after the superblock
    data_start = 96 + (2 + (struct.unpack_from("<H", data, 96)[0] & 0x7FFF) if options_block else 0)
    for i in range(data_flips):
        pos = data_start + (first - data_start) * (2 * i + 1) // (2 * data_flips)
        out.append(Damage(f"data byte {pos:#x} flipped", flip(data, pos, 0x04), must_fail=True))
    # The sqar manifest trailer: only verify reads it.
    trailer = (sb["bytes_used"] + 4095) // 4096 * 4096
    if data[trailer:trailer + 8] == b"SQARMNF1":
        for pos in (trailer + 20, trailer + 60):
            out.append(Damage(f"manifest byte {pos:#x} flipped", flip(data, pos, 0x01), must_fail=True))
    return out


def layout(data, sb):
    """(kind, start, end, compressed) of every metadata block and pointer array after the data:
    the tables are metadata blocks, each table followed by the pointer array its start names."""
    pointer_arrays = {}
    meta_blocks = lambda entries, size: -(-entries * size // 8192)  # noqa: E731 - ceil(entries*size / 8 KiB)
    if sb["fragment_table_start"] != ABSENT:
        pointer_arrays[sb["fragment_table_start"]] = 8 * meta_blocks(sb["fragment_count"], 16)
    if sb["export_table_start"] != ABSENT:
        pointer_arrays[sb["export_table_start"]] = 8 * meta_blocks(sb["inode_count"], 8)
    pointer_arrays[sb["id_table_start"]] = 8 * meta_blocks(sb["id_count"], 4)
    if sb["xattr_id_table_start"] != ABSENT:
        count = struct.unpack_from("<I", data, sb["xattr_id_table_start"] + 8)[0]
        pointer_arrays[sb["xattr_id_table_start"]] = 16 + 8 * meta_blocks(count, 16)
    out, pos = [], sb["inode_table_start"]
    while pos < sb["bytes_used"]:
        if pos in pointer_arrays:
            out.append(("pointers", pos, pos + pointer_arrays[pos], False))
            pos += pointer_arrays[pos]
            continue
        header = struct.unpack_from("<H", data, pos)[0]
        end = pos + 2 + (header & 0x7FFF)
        assert header & 0x7FFF and end <= sb["bytes_used"], f"unexpected layout at {pos:#x}"
        out.append(("metadata", pos, end, not header & 0x8000))
        pos = end
    return out


def build_images(src, d, sqar):
    """(label, path, strong) for a sqar image and a mksquashfs image of src. strong: every block is
    checksummed by the codec (gzip) or the manifest, so any flipped byte in a used block must fail."""
    images = []
    sqar_gz = f"{d}/sqar-gzip.sqfs"
    run([sqar, "create", "-q", "-c", "gzip", src, sqar_gz])
    images.append(("sqar-gzip", sqar_gz, True))
    sqar_zstd = f"{d}/sqar-zstd.sqfs"
    run([sqar, "create", "-q", src, sqar_zstd])
    images.append(("sqar-zstd", sqar_zstd, False))
    mk = f"{d}/mksquashfs-gzip.sqfs"
    # mksquashfs stores incompressible blocks raw, where no checksum would see a flipped bit: leave
    # the random files out so every data block is gzip-checked.
    run(["mksquashfs", src, mk, "-noappend", "-quiet", "-no-progress", "-comp", "gzip", "-e", "random.bin",
         "exact-blocks.bin", "dup/tail-a", "dup/tail-b"])
    images.append(("mksquashfs-gzip", mk, True))
    for _, p, _ in images:
        assert os.path.getsize(p) > 4096
    return images
