"""A small SquashFS 4.0 writer for crafted test images.

Builds images entry by entry so a test can state exactly what the image claims, including
things no real writer produces (a fragment index out of range, 65536 xattrs sharing one value,
a file of 2^25 sparse blocks, a directory entry whose type disagrees with its inode). Data
blocks and fragments are stored uncompressed (size word bit 24) unless compress_data=True;
metadata blocks are stored uncompressed (header bit 15) or, with compress_meta=True, compressed
by `codec` (zlib, the "gzip" codec, by default), which keeps images of huge block lists small.
A Codec with `options` writes them as the compressor options block after the superblock;
xz_codec() makes blocks whose dictionary and integrity check the test chooses.

    img = Image(block_size=4096)
    f = img.file(b"hello\\n")
    root = img.dir({"hello": f, "link": img.symlink("hello")})
    data = img.build(root)

Inodes are plain objects; set attributes before build() to craft damage (for example
`f.fragment = (999, 0)`, `f.size = 1 << 45`, `d.index_count = 65535`, `a.number = b.number`
to give two inodes one inode number, `d.per_header = 1` to start a listing header at every
entry, or `d.listing_of = (other, k)` to point d at other's listing from its k-th header on,
where other is written first). Layout follows mksquashfs: superblock, data,
fragments, inode table, directory table, fragment table, export table, id table, xattrs.
"""
import lzma
import struct
import zlib

META = 8192
NO_INDEX = 0xFFFFFFFF
ABSENT = 0xFFFFFFFFFFFFFFFF
UNCOMPRESSED_DATA = 1 << 24
# Basic inode types; the extended form of each is basic + 7.
DIR, FILE, SYMLINK, BLKDEV, CHRDEV, FIFO, SOCKET = range(1, 8)
PREFIXES = {"user.": 0, "trusted.": 1, "security.": 2}


class Codec:
    """A superblock compressor id, how blocks are compressed, and the options block (or None)."""

    def __init__(self, ident, compress, options=None):
        self.id, self.compress, self.options = ident, compress, options


GZIP = Codec(1, lambda data: zlib.compress(data, 9))


def xz_codec(dict_size, check=lzma.CHECK_CRC32, declared=None):
    """xz blocks made with an LZMA2 dictionary of dict_size and the given check; `declared`
    writes an options block claiming that dictionary size instead of the block size."""
    filters = [{"id": lzma.FILTER_LZMA2, "dict_size": dict_size}]
    options = None if declared is None else struct.pack("<II", declared, 0)
    return Codec(4, lambda data: lzma.compress(data, format=lzma.FORMAT_XZ, check=check, filters=filters), options)


class MetaWriter:
    """A table of metadata blocks; ref() is where the next byte will land."""

    def __init__(self, compress):
        self.compress = compress  # a function of the block's bytes, or None
        self.out = bytearray()
        self.buf = bytearray()
        self.blocks = 0

    def ref(self):
        return len(self.out) << 16 | len(self.buf)

    def block(self):
        return len(self.out)

    def decompressed(self):
        """Bytes written so far as the reader sees them (every full block holds META)."""
        return self.blocks * META + len(self.buf)

    def write(self, data):
        data = memoryview(bytes(data))
        while data:
            take = min(META - len(self.buf), len(data))
            self.buf += data[:take]
            data = data[take:]
            if len(self.buf) == META:
                self.flush()

    def flush(self):
        if not self.buf:
            return
        packed = self.compress(bytes(self.buf)) if self.compress else None
        if packed is not None and len(packed) < len(self.buf):
            self.out += struct.pack("<H", len(packed)) + packed
        else:
            self.out += struct.pack("<H", 0x8000 | len(self.buf)) + self.buf
        self.buf = bytearray()
        self.blocks += 1

    def finish(self):
        self.flush()
        return bytes(self.out)


class Inode:
    """Fields common to every inode; `extended` picks the extended on-disk form."""

    def __init__(self, kind, mode, uid=0, gid=0, mtime=0, extended=False):
        self.kind, self.mode, self.uid, self.gid, self.mtime = kind, mode, uid, gid, mtime
        self.extended = extended
        self.xattrs = []       # [(full name, value bytes)]; needs an extended inode
        self.number = None     # assigned by build() unless set
        self.nlink = None      # computed by build() unless set
        self.ref = None

    def set_xattrs(self, pairs):
        self.xattrs = list(pairs)
        self.extended = True
        return self


class Image:
    def __init__(self, block_size=131072, compress_meta=False, export=False, mtime=0, codec=GZIP,
                 compress_data=False):
        assert block_size & (block_size - 1) == 0 and 4096 <= block_size <= 1 << 20
        self.block_size = block_size
        self.compress_meta = compress_meta
        self.codec = codec
        self.compress_data = compress_data
        self.export = export
        self.mtime = mtime

    # ---- entries ----
    def dir(self, entries, mode=0o755, index=False, **kw):
        """entries: {name: inode} or {name: (inode, entry type)} to give the directory entry
        a basic type of its own. index=True writes an extended inode with a directory index."""
        ino = Inode(DIR, mode, extended=index or kw.pop("extended", False), **kw)
        ino.entries, ino.index = dict(entries), index
        return ino

    def file(self, data=b"", mode=0o644, blocks=None, tail=None, **kw):
        """Content data is cut into full blocks and a tail fragment. Or give blocks explicitly:
        a list of bytes (a block, stored raw) and None (a sparse block), or an int n for n sparse
        blocks; tail is then the fragment's bytes. size, fragment=(index, offset),
        blocks_start and sparse can be overridden afterwards."""
        ino = Inode(FILE, mode, **kw)
        if blocks is None:
            n = len(data) // self.block_size
            blocks = [data[i * self.block_size:(i + 1) * self.block_size] for i in range(n)]
            tail = data[n * self.block_size:]
        ino.blocks, ino.tail = blocks, tail or b""
        nblocks = blocks if isinstance(blocks, int) else len(blocks)
        ino.size = nblocks * self.block_size + len(ino.tail)
        ino.fragment = None    # (index, offset) overrides the packed position
        ino.blocks_start = None
        ino.sparse = None
        return ino

    def symlink(self, target, mode=0o777, **kw):
        ino = Inode(SYMLINK, mode, **kw)
        ino.target = target.encode() if isinstance(target, str) else target
        return ino

    def device(self, kind, major, minor, mode=0o600, **kw):
        ino = Inode(kind, mode, **kw)
        ino.rdev = (minor & 0xFF) | (major & 0xFFF) << 8 | (minor & ~0xFF) << 12
        return ino

    def fifo(self, mode=0o644, **kw):
        return Inode(FIFO, mode, **kw)

    def socket(self, mode=0o755, **kw):
        return Inode(SOCKET, mode, **kw)

    # ---- building ----
    def build(self, root):
        inodes = self._number(root)
        body = bytearray(96)
        if self.codec.options:
            body += struct.pack("<H", 0x8000 | len(self.codec.options)) + self.codec.options
        self._write_data(body, inodes)
        itab, dtab = self._meta_writer(), self._meta_writer()
        ids = {}
        xattr_sets = {}
        for ino in inodes:
            if ino.xattrs:
                xattr_sets.setdefault(tuple(ino.xattrs), len(xattr_sets))
            if ino.kind == DIR:
                self._write_listing(ino, dtab)
            self._write_inode(ino, itab, ids, xattr_sets)
        sb = {"inode_table_start": len(body)}
        body += itab.finish()
        sb["directory_table_start"] = len(body)
        body += dtab.finish()
        sb["fragment_table_start"] = self._table(body, [struct.pack("<QII", p, w, 0) for p, w in self.fragments])
        sb["export_table_start"] = (self._table(body, [struct.pack("<Q", i.ref) for i in inodes])
                                    if self.export else ABSENT)
        id_list = sorted(ids, key=ids.get)
        sb["id_table_start"] = self._table(body, [struct.pack("<I", i) for i in id_list])
        sb["xattr_id_table_start"] = self._xattr_table(body, xattr_sets)
        # Uncompressed inodes, xattrs and ids; uncompressed data, and fragments with both.
        flags = 0 if self.compress_meta else 0x1 | 0x100 | 0x800
        flags |= 0 if self.compress_data else 0x2 | (0 if self.compress_meta else 0x8)
        flags |= (0 if xattr_sets else 0x200) | (0x80 if self.export else 0) | (0x400 if self.codec.options else 0)
        struct.pack_into("<IIIIIHHHHHHQQQQQQQQ", body, 0, 0x73717368, len(inodes), self.mtime, self.block_size,
                         len(self.fragments), self.codec.id, self.block_size.bit_length() - 1, flags, len(id_list), 4, 0,
                         root.ref, len(body), sb["id_table_start"], sb["xattr_id_table_start"],
                         sb["inode_table_start"], sb["directory_table_start"], sb["fragment_table_start"],
                         sb["export_table_start"])
        return bytes(body) + bytes(-len(body) % 4096)

    def _meta_writer(self):
        return MetaWriter(self.codec.compress if self.compress_meta else None)

    def _number(self, root):
        """Children before parents (the order inodes are written in); hard links count once."""
        order, seen, parents = [], set(), {id(root): None}
        stack = [(root, False)]
        while stack:
            ino, done = stack.pop()
            if done:
                order.append(ino)
                continue
            if id(ino) in seen:
                continue
            seen.add(id(ino))
            stack.append((ino, True))
            if ino.kind == DIR:
                for child in reversed([c[0] if isinstance(c, tuple) else c for c in ino.entries.values()]):
                    parents.setdefault(id(child), ino)
                    stack.append((child, False))
        links = {}
        for d in order:
            if d.kind == DIR:
                for c in d.entries.values():
                    c = c[0] if isinstance(c, tuple) else c
                    links[id(c)] = links.get(id(c), 0) + 1
        used = {i.number for i in order if i.number is not None}
        free = (n for n in range(1, len(order) + 1) if n not in used)
        for ino in order:
            ino.number = ino.number if ino.number is not None else next(free)
        for ino in order:
            if ino.nlink is None:
                subdirs = sum(1 for c in getattr(ino, "entries", {}).values()
                              if (c[0] if isinstance(c, tuple) else c).kind == DIR)
                ino.nlink = 2 + subdirs if ino.kind == DIR else links.get(id(ino), 1)
            if ino.kind == FILE and ino.nlink > 1:
                ino.extended = True  # a basic file inode has no link count (it reads as 1)
            parent = parents.get(id(ino))
            ino.parent_number = parent.number if parent else len(order) + 1
        return order

    def _write_data(self, body, inodes):
        """Full blocks of each file in order, then the fragment blocks packing the tails."""
        self.fragments, frag = [], bytearray()

        def store(block):
            """Appends one data or fragment block; returns its size word."""
            packed = self.codec.compress(bytes(block)) if self.compress_data else None
            if packed is not None and len(packed) < len(block):
                body.extend(packed)
                return len(packed)
            body.extend(block)
            return UNCOMPRESSED_DATA | len(block)

        def close_fragment():
            if frag:
                self.fragments.append((len(body), store(frag)))
                frag.clear()

        for ino in inodes:
            if ino.kind != FILE:
                continue
            start, words = len(body), []
            if isinstance(ino.blocks, int):
                ino.words = ino.blocks
            else:
                for b in ino.blocks:
                    words.append(0 if b is None else store(b))
                ino.words = words
            if ino.blocks_start is None:
                ino.blocks_start = start
            if ino.tail and ino.fragment is None:
                if len(frag) + len(ino.tail) > self.block_size:
                    close_fragment()
                ino.fragment = (len(self.fragments), len(frag))
                frag.extend(ino.tail)
        close_fragment()

    def _write_listing(self, d, dtab):
        """Headers of up to 256 entries sharing one inode block, and a new header wherever the
        listing enters a new metadata block: that is what the directory index points at."""
        if getattr(d, "listing_of", None):
            other, k = d.listing_of
            d.listing_ref, d.listing_size = other.header_refs[k], other.listing_size - other.header_at[k]
            return
        d.listing_ref = dtab.ref()
        per_header = getattr(d, "per_header", 256)
        groups = []  # [(inode block, base number, [entry bytes])]
        pos = dtab.decompressed()
        first_block = pos // META
        header_pos = None
        for name in sorted(d.entries, key=lambda n: n.encode()):
            child = d.entries[name]
            child, etype = child if isinstance(child, tuple) else (child, child.kind)
            raw = name.encode()
            block = child.ref >> 16
            g = groups[-1] if groups else None
            if (g is None or g[0] != block or len(g[2]) == per_header or not -32768 <= child.number - g[1] < 32768
                    or pos // META != header_pos // META):
                g = (block, child.number, [])
                groups.append(g)
                header_pos = pos
                pos += 12
            entry = struct.pack("<HhHH", child.ref & 0xFFFF, child.number - g[1], etype, len(raw) - 1) + raw
            g[2].append(entry)
            pos += len(entry)
        d.index_entries, d.header_refs, d.header_at = [], [], []
        consumed = 0
        for block, base, entries in groups:
            d.header_refs.append(dtab.ref())
            d.header_at.append(consumed)
            if dtab.decompressed() // META != first_block:
                d.index_entries.append((consumed, dtab.block(), self._first_name(entries[0])))
            data = struct.pack("<III", len(entries) - 1, block, base) + b"".join(entries)
            dtab.write(data)
            consumed += len(data)
        d.listing_size = consumed + 3

    @staticmethod
    def _first_name(entry):
        return entry[8:]

    def _write_inode(self, ino, itab, ids, xattr_sets):
        ino.ref = itab.ref()
        ext = ino.extended
        itype = ino.kind + (7 if ext else 0)
        for v in (ino.uid, ino.gid):
            ids.setdefault(v, len(ids))
        head = struct.pack("<HHHHII", itype, ino.mode & 0o7777, ids[ino.uid], ids[ino.gid], ino.mtime, ino.number)
        xattr = xattr_sets[tuple(ino.xattrs)] if ino.xattrs else NO_INDEX
        if ino.kind == DIR:
            dblock, doff = ino.listing_ref >> 16, ino.listing_ref & 0xFFFF
            if not ext:
                body = struct.pack("<IIHHI", dblock, ino.nlink, ino.listing_size, doff, ino.parent_number)
            else:
                index = ino.index_entries if ino.index else []
                count = getattr(ino, "index_count", None)  # a claimed count may be crafted
                body = struct.pack("<IIIIHHI", ino.nlink, ino.listing_size, dblock, ino.parent_number,
                                   len(index) if count is None else count, doff, xattr)
                for index, start, name in index:
                    body += struct.pack("<III", index, start, len(name) - 1) + name
        elif ino.kind == FILE:
            frag_index, frag_off = ino.fragment if ino.fragment else (NO_INDEX, 0)
            if not ext:
                body = struct.pack("<IIII", ino.blocks_start, frag_index, frag_off, ino.size)
            else:
                sparse = ino.sparse if ino.sparse is not None else self.block_size * (
                    ino.words if isinstance(ino.words, int) else sum(1 for w in ino.words if w == 0))
                body = struct.pack("<QQQIIII", ino.blocks_start, ino.size, sparse, ino.nlink, frag_index,
                                   frag_off, xattr)
            itab.write(head + body)
            if isinstance(ino.words, int):
                zeros = bytes(4 * 65536)
                for done in range(0, ino.words, 65536):
                    itab.write(zeros[:4 * min(65536, ino.words - done)])
            else:
                itab.write(struct.pack(f"<{len(ino.words)}I", *ino.words))
            return
        elif ino.kind == SYMLINK:
            body = struct.pack("<II", ino.nlink, len(ino.target)) + ino.target
            body += struct.pack("<I", xattr) if ext else b""
        elif ino.kind in (BLKDEV, CHRDEV):
            body = struct.pack("<II", ino.nlink, ino.rdev) + (struct.pack("<I", xattr) if ext else b"")
        else:
            body = struct.pack("<I", ino.nlink) + (struct.pack("<I", xattr) if ext else b"")
        itab.write(head + body)

    def _table(self, body, entries, header=b""):
        """Entries in metadata blocks, then `header` and the u64 array locating each block;
        returns where the header starts (what the superblock stores)."""
        if not entries:
            return ABSENT
        t = self._meta_writer()
        starts = []
        for e in entries:
            if len(t.buf) == 0:
                starts.append(len(body) + t.block())
            t.write(e)
        body += t.finish()
        pos = len(body)
        body += header + struct.pack(f"<{len(starts)}Q", *starts)
        return pos

    def _xattr_table(self, body, xattr_sets):
        """Key/value pairs of each distinct set; a value already written is stored once more
        only as an out-of-line reference to the first copy."""
        if not xattr_sets:
            return ABSENT
        kv_start = len(body)
        kv = self._meta_writer()
        values = {}
        ids = []
        for pairs in sorted(xattr_sets, key=xattr_sets.get):
            ref, size = kv.ref(), 0
            for full, value in pairs:
                prefix = next(p for p in PREFIXES if full.startswith(p))
                name = full[len(prefix):].encode()
                if value in values:
                    kv.write(struct.pack("<HH", PREFIXES[prefix] | 0x100, len(name)) + name)
                    kv.write(struct.pack("<IQ", 8, values[value]))
                else:
                    kv.write(struct.pack("<HH", PREFIXES[prefix], len(name)) + name)
                    values[value] = kv.ref()
                    kv.write(struct.pack("<I", len(value)) + value)
                size += len(full) + 1 + len(value)
            ids.append(struct.pack("<QII", ref, len(pairs), min(size, 0xFFFFFFFF)))
        body += kv.finish()
        return self._table(body, ids, header=struct.pack("<QII", kv_start, len(ids), 0))
