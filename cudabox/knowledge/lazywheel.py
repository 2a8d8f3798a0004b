"""METADATA out of a remote wheel without downloading it: HTTP range requests (like pip's lazy wheel).

Where an index serves no PEP 658 `.metadata` file, the PyPI client reads the
wheel's own METADATA member. A wheel's `.dist-info` files are written last, so
their central-directory entries sit just before the end-of-central-directory
record: one request for the last 64 KiB finds METADATA's entry, a second reads
that member (a few KB; none when the tail already holds it). Wheels that put
`.dist-info` first (torch <= 2.3, TensorFlow <= 2.15) have the entry at the
directory's head: one more 64 KiB request. Only another layout falls back to
zipfile over the whole central directory (1-3 MB of a torch or TensorFlow
wheel, which is what every read cost before: ~170 MB per cold refresh).
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
import zlib

TAIL = 64 * 1024
_NAME = re.compile(r"[^/]+\.dist-info/METADATA")
_EOCD = struct.Struct("<4s4H2LH")  # end of central directory
_LOCATOR = struct.Struct("<4sLQL")  # zip64 end of central directory locator
_EOCD64 = struct.Struct("<4sQ2H2L4Q")  # zip64 end of central directory record (fixed part)
_CENTRAL = struct.Struct("<4s6H3L5H2L")  # a central directory entry's fixed part (46 bytes)
_LOCAL = struct.Struct("<4s5H3L2H")  # a local file header (30 bytes)


class NoRanges(Exception):
    """The server does not answer range requests as asked."""


class RemoteFile(io.RawIOBase):
    """A read-only, seekable view of a remote file; `fetch(start, end)` returns those bytes (end exclusive)."""

    BLOCK = 256 * 1024

    def __init__(self, fetch, size: int):
        super().__init__()
        self.fetch, self.size, self.pos = fetch, size, 0
        self.chunks: list[tuple[int, bytes]] = []
        self.requests = 0

    def span(self, start: int, end: int) -> bytes:
        """Bytes [start, end), from what was fetched already or with one request."""
        start, end = max(0, start), min(self.size, end)
        if end <= start:
            return b""
        for at, data in self.chunks:
            if at <= start and end <= at + len(data):
                return data[start - at:end - at]
        data = self.fetch(start, end)
        self.requests += 1
        if len(data) != end - start:
            raise NoRanges(f"asked for {end - start} bytes, got {len(data)}")
        self.chunks.append((start, data))
        return data

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=io.SEEK_SET):
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence] + offset
        return self.pos

    def read(self, n=-1):
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        if not any(at <= self.pos and end <= at + len(data) for at, data in self.chunks):
            # read ahead a block; near the end read behind instead (EOCD, then the central directory)
            stop = min(self.size, max(end, self.pos + self.BLOCK))
            self.span(max(0, min(self.pos, stop - self.BLOCK)), stop)
        out = self.span(self.pos, end)
        self.pos = end
        return out

    def readinto(self, buffer):
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def metadata(remote: RemoteFile) -> bytes | None:
    """The wheel's `*.dist-info/METADATA`, None when it has none (NoRanges when ranges don't work)."""
    try:
        found = _from_tail(remote)
    except (ValueError, struct.error, zlib.error):
        found = None
    if found is not None:
        return found
    try:
        with zipfile.ZipFile(remote) as wheel:
            names = [n for n in wheel.namelist() if _NAME.fullmatch(n)]
            return wheel.read(names[0]) if names else None
    except zipfile.BadZipFile:
        return None


def _from_tail(remote: RemoteFile) -> bytes | None:
    """METADATA through its central-directory entry in the file's last TAIL bytes; None: not found there."""
    tail_start = max(0, remote.size - TAIL)
    tail = remote.span(tail_start, remote.size)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < _EOCD.size:
        return None
    *_, count, cd_size, cd_offset, _ = _EOCD.unpack_from(tail, at)
    if 0xFFFFFFFF in (cd_size, cd_offset) or count == 0xFFFF:  # zip64: the real figures are in its record
        if at < _LOCATOR.size or tail[at - _LOCATOR.size:at - _LOCATOR.size + 4] != b"PK\x06\x07":
            return None
        record_at = _LOCATOR.unpack_from(tail, at - _LOCATOR.size)[2]
        record = remote.span(record_at, record_at + _EOCD64.size)
        if record[:4] != b"PK\x06\x06":
            return None
        *_, cd_size, cd_offset = _EOCD64.unpack(record)
    cd_end = cd_offset + cd_size
    if cd_end > remote.size or cd_end < tail_start:
        return None
    entry = _entry(remote.span(max(cd_offset, tail_start), cd_end))
    if entry is None and cd_offset < tail_start:  # some wheels put .dist-info first: the directory's head
        entry = _entry(remote.span(cd_offset, min(cd_offset + TAIL, tail_start)))
    if entry is None:
        return None
    method, crc, csize, usize, offset, name_len = entry
    guess = offset + _LOCAL.size + name_len + csize + 1024  # the local extra field is short or absent
    head = remote.span(offset, min(guess, remote.size))
    sig, _, _, _, _, _, _, _, _, local_name, local_extra = _LOCAL.unpack_from(head)
    if sig != b"PK\x03\x04":
        return None
    start = offset + _LOCAL.size + local_name + local_extra
    data = remote.span(start, start + csize)
    if method == zipfile.ZIP_STORED:
        text = data
    elif method == zipfile.ZIP_DEFLATED:
        inflate = zlib.decompressobj(-15)
        text = inflate.decompress(data) + inflate.flush()
    else:
        return None
    return text if len(text) == usize and zlib.crc32(text) == crc else None


def _entry(directory: bytes) -> tuple | None:
    """(method, crc, compressed size, size, local header offset, name length) of METADATA's entry in
    (a tail of) a central directory; None when it isn't there or needs zip64 figures."""
    at = directory.find(b"PK\x01\x02")
    while 0 <= at <= len(directory) - _CENTRAL.size:
        fields = _CENTRAL.unpack_from(directory, at)
        method, crc, csize, usize, name_len = fields[4], fields[7], fields[8], fields[9], fields[10]
        name = directory[at + _CENTRAL.size:at + _CENTRAL.size + name_len].decode("utf-8", "replace")
        if _NAME.fullmatch(name) and at + _CENTRAL.size + name_len <= len(directory):
            offset = fields[16]
            if 0xFFFFFFFF in (csize, usize, offset):
                return None
            return method, crc, csize, usize, offset, name_len
        at = directory.find(b"PK\x01\x02", at + 4)
    return None
