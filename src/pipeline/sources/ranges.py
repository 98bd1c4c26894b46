"""Byte ranges of line-oriented files, so that tasks can read one big JSONL file in parallel.

A plain file is cut at newline boundaries found by seeking (the driver reads a few bytes per cut,
never the file): every range starts right after a b"\\n" (or at 0) and ends right after one (or
at the end of the file). A newline byte never occurs inside a multi-byte UTF-8 character, so a
cut can never split one. A compressed file (.gz, .zst) is one stream that cannot be entered in
the middle: it is one range, read whole by one task (files are still read in parallel).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import DataError
from pipeline.sources.files import _raw_lines, strip_bom

READ_BYTES = 1 << 20  # block size when reading a range and when seeking for a newline


@dataclass(frozen=True)
class ByteRange:
    path: str
    start: int
    end: int | None  # None: the whole (compressed) stream

    @property
    def first(self) -> bool:
        """The range holds the file's first line (where a byte-order mark may sit)."""
        return self.start == 0


def splittable(path: Path) -> bool:
    return path.suffix not in (".gz", ".zst")


def plan_ranges(paths: list[Path], target_bytes: int) -> list[ByteRange]:
    """The files cut into ranges of about `target_bytes` (compressed files: one range each), in
    file order. An empty file gives no range."""
    out: list[ByteRange] = []
    for path in paths:
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise DataError(str(path), f"cannot open ({exc.strerror or exc})") from None
        if not splittable(path):
            out.append(ByteRange(str(path), 0, None))
            continue
        cuts = newline_cuts(path, size, target_bytes)
        out.extend(ByteRange(str(path), a, b) for a, b in zip(cuts, cuts[1:], strict=False))
    return out


def newline_cuts(path: Path, size: int, target_bytes: int) -> list[int]:
    """0, the offsets right after the first newline at or after each multiple of `target_bytes`,
    and `size`; strictly increasing (so [0] alone for an empty file)."""
    cuts = [0]
    try:
        with open(path, "rb") as f:
            for want in range(target_bytes, size, max(1, target_bytes)):
                if want <= cuts[-1]:
                    continue  # the previous line ran past this cut
                cut = _next_line_start(f, want, size)
                if cut < size:
                    cuts.append(cut)
    except OSError as exc:
        raise DataError(str(path), f"cannot open ({exc.strerror or exc})") from None
    if size > 0:
        cuts.append(size)
    return cuts


def _next_line_start(f, pos: int, size: int) -> int:
    """The smallest offset >= pos that follows a newline (or `size`)."""
    f.seek(pos - 1)  # the byte before pos: a cut exactly on a line start is kept
    at = pos - 1
    while block := f.read(READ_BYTES):
        i = block.find(b"\n")
        if i >= 0:
            return at + i + 1
        at += len(block)
    return size


def range_lines(rng: ByteRange) -> Iterator[bytes]:
    """The range's lines without their newline, as the serial reader yields them (the file's
    first line without its UTF-8 byte-order mark; DataError for a UTF-16/32 one)."""
    lines = _raw_lines(Path(rng.path)) if rng.end is None else _plain_lines(rng)
    if rng.first:
        for line in lines:
            yield strip_bom(rng.path, line)
            break
    yield from lines


def _plain_lines(rng: ByteRange) -> Iterator[bytes]:
    assert rng.end is not None
    try:
        f = open(rng.path, "rb")
    except OSError as exc:
        raise DataError(rng.path, f"cannot open ({exc.strerror or exc})") from None
    with f:
        f.seek(rng.start)
        left = rng.end - rng.start
        buf = b""
        while left > 0:
            chunk = f.read(min(READ_BYTES, left))
            if not chunk:
                raise DataError(rng.path, "cannot read (the file shrank while it was read)")
            left -= len(chunk)
            buf += chunk
            *lines, buf = buf.split(b"\n")
            yield from lines
        if buf:  # the file's last line, without a newline
            yield buf
