"""Logs that are not UTF-8 on disk: UTF-16/UTF-32 with a byte-order mark (PowerShell's `>` writes UTF-16),
read as UTF-8 so that every later stage sees one encoding; and NUL runs (what copytruncate leaves where the
old content was) dropped, since they are no text at all."""

from __future__ import annotations

import codecs
from typing import BinaryIO

_BOMS = (  # longest first: the UTF-32 LE mark starts with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def sniff(head: bytes) -> tuple[str, int] | None:
    """The encoding a byte-order mark announces, and the mark's length."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name, len(bom)
    return None


def drop_nuls(data: bytes) -> bytes:
    return data.replace(b"\x00", b"") if b"\x00" in data else data


class Utf8Reader:
    """`read(n)` over a binary file, giving UTF-8 bytes whatever the file's BOM said."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self._decoder: codecs.IncrementalDecoder | None = None
        self._first = True
        self.encoding = "utf-8"

    def read(self, n: int) -> bytes:
        return self.convert(self._f.read(n))

    def convert(self, block: bytes) -> bytes:
        """The next raw block (b"" at the end) as UTF-8."""
        if self._first:
            self._first = False
            found = sniff(block)
            if found is not None:
                self.encoding, skip = found
                self._decoder = codecs.getincrementaldecoder(self.encoding)("replace")
                block = block[skip:]
        if self._decoder is None:
            return block
        text = self._decoder.decode(block, final=not block)
        return text.encode("utf-8")
