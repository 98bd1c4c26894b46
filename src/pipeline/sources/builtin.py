"""Built-in public corpora: where each lives, how big it is, and how it splits into documents.

Every builtin's base URL can be overridden with `PIPELINE_URL_<NAME>` (PIPELINE_URL_SHAKESPEARE),
so tests drive the real download code against a local server. Files are cached under
`$PIPELINE_CACHE_DIR` (default ~/.cache/pipeline).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pipeline.errors import DataError, PipelineError
from pipeline.fetch import Unreachable, cache_dir, cache_record, fetch, head_size
from pipeline.sources.files import split_on_line
from pipeline.sources.records import Record

OFFLINE_HINT = (
    "offline sources need no network: download.source=toy, download.source=python_docs, "
    "or your own file (--source jsonl --jsonl FILE)"
)
UNVERIFIED = "unverified"  # cache status of a file nothing could check (see cache_status)


@dataclass(frozen=True)
class RemoteFile:
    name: str
    size_bytes: int | None = None  # checked after download; None: trust Content-Length
    sha256: str | None = None


@dataclass(frozen=True)
class Builtin:
    name: str
    base_url: str
    files: tuple[RemoteFile, ...]
    split: Callable[[list[Path]], Iterator[str]]
    about: str

    def url(self, file: RemoteFile) -> str:
        base = os.environ.get(f"PIPELINE_URL_{self.name.upper()}", self.base_url).rstrip("/")
        return f"{base}/{file.name}"


def split_tinystories(paths: list[Path]) -> Iterator[str]:
    """Stories are separated by lines holding `<|endoftext|>`."""
    for path in paths:
        with open(path, encoding="utf-8", newline="") as f:
            yield from split_on_line(f, "<|endoftext|>")


_TOP_HEADING = re.compile(r"^ = [^=].* = $")


def split_wikitext(paths: list[Path]) -> Iterator[str]:
    """One article per top-level ` = Title = ` heading; ` = = Section = = ` stays inside it.
    The files are Hugging Face Parquet exports with one line per row in column `text`."""
    cur: list[str] = []
    for path in paths:
        for batch in pq.ParquetFile(path).iter_batches(columns=["text"], batch_size=65536):
            for line in batch.column(0).to_pylist():
                line = line or ""
                if _TOP_HEADING.match(line.rstrip("\n")):
                    if "".join(cur).strip():
                        yield "".join(cur).strip()
                    cur = []
                cur.append(line if line.endswith("\n") or not line else line + "\n")
    if "".join(cur).strip():
        yield "".join(cur).strip()


def split_shakespeare(paths: list[Path], min_chars: int = 2000) -> Iterator[str]:
    """Tiny Shakespeare has no document markers. We cut it into "pages": runs of whole speeches
    (blank-line separated) of at least `min_chars` characters, so no speech is ever split."""
    for path in paths:
        speeches = [s.strip() for s in path.read_text(encoding="utf-8").split("\n\n") if s.strip()]
        page: list[str] = []
        size = 0
        for speech in speeches:
            page.append(speech)
            size += len(speech)
            if size >= min_chars:
                yield "\n\n".join(page)
                page, size = [], 0
        if page:
            yield "\n\n".join(page)


_TS = "https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main"
_WT = "https://huggingface.co/datasets/Salesforce/wikitext/resolve/main"

BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in [
        Builtin(
            "tinystories",
            _TS,
            (RemoteFile("TinyStories-valid.txt"),),
            split_tinystories,
            "TinyStories validation split (~22k stories, ~19 MB)",
        ),
        Builtin(
            "tinystories_train",
            _TS,
            (RemoteFile("TinyStories-train.txt"),),
            split_tinystories,
            "TinyStories train split (~2.1M stories, ~1.9 GB); use download.max_docs",
        ),
        Builtin(
            "wikitext2",
            f"{_WT}/wikitext-2-raw-v1",
            (RemoteFile("train-00000-of-00001.parquet"),),
            split_wikitext,
            "WikiText-2 raw train split (~600 articles, ~11 MB)",
        ),
        Builtin(
            "wikitext103",
            f"{_WT}/wikitext-103-raw-v1",
            (
                RemoteFile("train-00000-of-00002.parquet"),
                RemoteFile("train-00001-of-00002.parquet"),
            ),
            split_wikitext,
            "WikiText-103 raw train split (~28k articles, ~540 MB)",
        ),
        Builtin(
            "shakespeare",
            "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare",
            (
                RemoteFile(
                    "input.txt",
                    1_115_394,
                    "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
                ),
            ),
            split_shakespeare,
            "tiny Shakespeare (1.1 MB), cut into ~2,000-char pages of speeches",
        ),
    ]
}


def download_builtin(name: str, progress: bool = True) -> list[Path]:
    b = BUILTINS[name]
    paths = []
    for f in b.files:
        try:
            paths.append(
                fetch(
                    b.url(f), cache_dir() / name / f.name, f.size_bytes, f.sha256, progress=progress
                )
            )
        except Unreachable as exc:
            dest = cache_dir() / name / f.name
            raise PipelineError(
                f"{name}: {exc}",
                hints=(
                    f"without network: copy {f.name} (the URL above) by hand to {dest} "
                    "(the cache, $PIPELINE_CACHE_DIR) and re-run",
                    f"or {OFFLINE_HINT}",
                ),
            ) from None
    return paths


def cache_status(name: str) -> dict[str, str]:
    """{file: how its cached copy was checked} for builtin `name`, from the pins and the
    records fetch keeps beside each file: `pinned` (size and/or sha256 in BUILTINS),
    `server_size` (equal to the size the server reported when it was downloaded), or
    `unverified: ...` (placed in the cache by hand, or a server that reported no size)."""
    out = {}
    for f in BUILTINS[name].files:
        rec = cache_record(cache_dir() / name / f.name)
        if f.size_bytes is not None or f.sha256 is not None:
            out[f.name] = "pinned"
        elif rec.get("server_size") is not None and rec.get("server_size") == rec.get("size"):
            out[f.name] = "server_size"
        elif rec.get("placed"):
            out[f.name] = (
                f"{UNVERIFIED}: placed in the cache by hand; no pinned size or sha256 and no "
                "size from the server to check it against (delete it to download it)"
            )
        else:
            out[f.name] = f"{UNVERIFIED}: the server reported no size when it was downloaded"
    return out


def read_builtin(name: str, progress: bool = True) -> Iterator[Record]:
    paths = download_builtin(name, progress)
    try:
        for i, text in enumerate(BUILTINS[name].split(paths)):
            yield Record(f"{name}-{i:07d}", text, name)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(
            str(paths[0]),
            f"cannot split the cached file ({exc}); delete it from {cache_dir() / name} and re-run",
        ) from None


def probe() -> list[tuple[str, str, str]]:
    """(name, remote size or 'unreachable (why)', description) for every builtin."""
    rows = []
    for b in BUILTINS.values():
        try:
            sizes = [head_size(b.url(f)) for f in b.files]
            total = sum(s for s in sizes if s is not None)
            size = f"{total / 1e6:,.1f} MB" if all(s is not None for s in sizes) else "unknown size"
        except PipelineError as exc:
            size = f"unreachable ({str(exc).split('(', 1)[-1].rstrip(')')[:60]})"
        rows.append((b.name, size, b.about))
    return rows


def read_source(cfg: Any, seed: int, progress: bool) -> Iterator[Record]:
    """The registered reader of every builtin corpus: `download.source` names which."""
    return read_builtin(cfg.source, progress)
