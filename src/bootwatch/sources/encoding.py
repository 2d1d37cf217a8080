"""Logs that are not UTF-8 on disk: UTF-16/UTF-32 with a byte-order mark (PowerShell's `>` writes UTF-16),
read as UTF-8 so that every later stage sees one encoding; lines in a legacy 8-bit encoding (GBK from a
Chinese Windows console, Latin-1/cp1252 from a Western one), decoded line by line as what they are; and NUL
runs (what copytruncate leaves where the old content was) dropped, since they are no text at all."""

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

    def source_size(self, held: bytes, size: int) -> int:
        """How many bytes of the file `size` bytes of UTF-8 output stand for (`held`: those bytes, or their head),
        counting what the decoder holds of a character not complete yet."""
        if self._decoder is None:
            return size
        ratio = len(held.decode("utf-8", "replace").encode(self.encoding)) / len(held) if held else 1.0
        waiting = self._decoder.getstate()[0]
        return round(size * ratio) + len(waiting if isinstance(waiting, bytes) else b"")

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


def _gbk(raw: bytes) -> str | None:
    """`raw` as GB18030 (GBK's superset), if it is that: every byte decodes, and no ASCII byte was taken as the
    second byte of a character. Chinese text in GB2312's range uses bytes 0xA1-0xFE only, while Latin-1 text
    read as GBK pairs an accented letter with the ASCII letter after it."""
    try:
        text = raw.decode("gb18030")
    except UnicodeDecodeError:
        return None
    ascii_chars = sum(1 for c in text if c < "\x80")
    return text if ascii_chars == sum(1 for b in raw if b < 0x80) else None


def _western(raw: bytes) -> str:
    """`raw` as cp1252 (what Windows writes for Latin-1), or Latin-1 itself for its five unmapped bytes."""
    try:
        return raw.decode("cp1252")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def decode_line(raw: bytes) -> str:
    """A line's bytes as text. UTF-8 first; a line that is not UTF-8 is in a legacy encoding (GBK if it reads as
    one, else cp1252) unless it is mostly good UTF-8: a UTF-8 line with a damaged character (cut at a block
    edge, a stray byte) keeps UTF-8 with U+FFFD there, not a mojibake of the whole line. (GBK's byte pairs are
    now and then valid UTF-8 by chance, so a few good characters among many bad ones say nothing.)"""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    text = raw.decode("utf-8", "replace")
    bad = text.count("\ufffd")
    good = sum(1 for c in text if c > "\x7f") - bad
    if good > 2 * bad:
        return text
    return _gbk(raw) or _western(raw)


def legacy_text(sample: bytes) -> bool:
    """Is `sample` (not UTF-8) text in a legacy encoding rather than binary data? GBK text decodes as GB18030
    throughout, which random bytes never do over a few kilobytes; Western text is mostly ASCII, with an accented
    letter here and there (binary data is about half high bytes)."""
    whole = sample[: sample.rfind(b"\n") + 1] or sample  # the last line may be cut inside a character
    if _gbk(whole) is not None:
        return True
    high = sum(1 for b in whole if b >= 0x80)
    return high * 4 < len(whole)
