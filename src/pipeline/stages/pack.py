"""pack: token arrays of documents -> fixed-length sequences with segment ids (naive|concat|bfd).

Reads tokenize's `part-N.tokens.npy` + `part-N.docs.parquet`; lengths are packed per window of
whole parts (`window_docs`; one window, i.e. globally, for most corpora: the reduce), then each
output part gathers its tokens from the memory-mapped inputs (the map).
Writes `part-N.input_ids.npy` [n, seq_len], `part-N.segment_ids.npy` [n, seq_len] (0 = padding,
k = k-th document piece), `part-N.seqs.parquet` (source, num_segments, num_tokens per sequence)
and `meta.json`. Algorithms live in pipeline.packing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from pipeline.config import bounded, option, setting
from pipeline.errors import DataError
from pipeline.io import atomic_write_json, save_npy
from pipeline.packing import (
    Packing,
    concat_docs_split,
    pack_bfd,
    pack_concat,
    pack_naive,
)
from pipeline.parts import group_parts as io_group_parts
from pipeline.parts import numeric_column, part_name, read_table, write_table
from pipeline.stage import DocCounts, Stage, StageContext, StageResult
from pipeline.text_files import read_json_file


@dataclass(frozen=True)
class PackConfig:
    strategy: Literal["bfd", "concat", "naive"] = option(
        "bfd", "see docs/packing.md; bfd cuts fewest"
    )
    seq_len: int = bounded(2048, ge=2, le=1 << 20, doc="tokens per sequence (EOS included)")
    by_source: bool = option(
        True, "pack each source apart: every sequence has one source (shard weights)"
    )
    sequences_per_part: int = bounded(8192, ge=1, doc="sequences per output part (parallel unit)")
    # ~180 B per document of one window in the driver; fewer documents: one window, global packing
    window_docs: int = bounded(
        1_000_000, ge=1, doc="pack whole parts in windows of <= this many docs"
    )


# ---------------------------------------------------------------- pure core


def pack_lengths(
    lengths: np.ndarray, seq_len: int, strategy: str, seed: int | list[int]
) -> Packing:
    """Pack one group of documents; concat's document order is a permutation from `seed`."""
    if strategy == "naive":
        return pack_naive(lengths, seq_len)
    if strategy == "concat":
        order = np.random.default_rng(seed).permutation(len(lengths))
        return pack_concat(lengths, seq_len, order)
    return pack_bfd(lengths, seq_len)


def fill_sequences(
    tokens_by_part: list[np.ndarray],
    items: dict[str, np.ndarray],
    num_seqs: int,
    seq_len: int,
    pad_id: int,
    seg_dtype: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """Copy item tokens into [num_seqs, seq_len] arrays; untouched cells stay pad / segment 0.

    items: part, start (offset in that part's tokens), len, dest (flat offset in the output),
    seg (segment id); all int64 arrays of one length.
    """
    dtype = tokens_by_part[0].dtype if tokens_by_part else np.uint16
    ids = np.full(num_seqs * seq_len, pad_id, dtype=dtype)
    seg = np.zeros(num_seqs * seq_len, dtype=seg_dtype)
    # one memcpy per item: items average hundreds of tokens, so a slice per item beats a
    # vectorised gather that would build 3-4 int64 index arrays per token (~32 B/token)
    cols = (items[c].tolist() for c in ("part", "start", "len", "dest", "seg"))
    for p, start, n, dest, k in zip(*cols, strict=True):
        ids[dest : dest + n] = tokens_by_part[p][start : start + n]
        seg[dest : dest + n] = k
    return ids.reshape(num_seqs, seq_len), seg.reshape(num_seqs, seq_len)


# ---------------------------------------------------------------- input


@dataclass(frozen=True, slots=True)
class TokenPart:
    """One tokenize part: its token array and its documents file (a read task's input)."""

    tokens: Path
    docs: Path


def group_parts(paths: list[Path]) -> list[TokenPart]:
    """tokenize's top-level parts -> [(tokens.npy, docs.parquet)] in part order."""
    kinds = {"tokens.npy": "tokens.npy", "docs.parquet": "docs.parquet"}
    groups = io_group_parts(paths, kinds, "tokenize")
    return [TokenPart(g["tokens.npy"], g["docs.parquet"]) for g in groups]


def read_meta(path: Path) -> dict[str, Any]:
    """tokenize's meta.json: eos_id, pad_id, dtype (+ vocab and tokenizer facts passed on)."""
    meta = read_json_file(path, "tokenize meta.json")
    for key in ("eos_id", "dtype"):
        if key not in meta:
            raise DataError(str(path), f"field '{key}' is missing")
    return meta


def read_lengths(pair: TokenPart, dtype: str) -> tuple[np.ndarray, list[str], np.ndarray]:
    """One part's num_tokens (int64) and sources (names + int32 code per document), checked
    against its token array. Codes keep driver memory at ~12 B per document."""
    tokens_path, docs_path = pair.tokens, pair.docs
    table = read_table(docs_path, columns=["num_tokens", "source"])
    lengths = numeric_column(table.column("num_tokens"), np.int64)
    tokens = np.load(tokens_path, mmap_mode="r", allow_pickle=False)
    if tokens.ndim != 1 or tokens.dtype != np.dtype(dtype):
        raise DataError(
            str(tokens_path), f"expected a 1-D {dtype} array, got {tokens.ndim}-D {tokens.dtype}"
        )
    if len(lengths) and lengths.min() < 0:
        raise DataError(str(docs_path), "num_tokens has negative values")
    if int(lengths.sum()) != len(tokens):
        raise DataError(
            str(docs_path),
            f"sum(num_tokens) = {int(lengths.sum())} but "
            f"{tokens_path.name} holds {len(tokens)} tokens",
        )
    enc = table.column("source").combine_chunks().dictionary_encode()
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    return lengths, enc.dictionary.to_pylist(), codes


# ---------------------------------------------------------------- output


@dataclass(frozen=True, slots=True)
class PackJob:
    """One output part: its index, sequences, items (by bin, `part` into `token_paths`), sources."""

    index: int
    num_seqs: int
    items: dict[str, np.ndarray]
    sources: list[str]
    token_paths: list[str]


def write_part(job: PackJob, out_dir: str, seq_len: int, pad_id: int) -> list[str]:
    """Build and write output part `job.index`; returns the relative paths written. Only
    the token arrays this part takes items from are opened (`job.token_paths`)."""
    tokens = [np.load(p, mmap_mode="r", allow_pickle=False) for p in job.token_paths]
    seg_dtype = np.uint16 if seq_len < 1 << 16 else np.uint32
    ids, seg = fill_sequences(tokens, job.items, job.num_seqs, seq_len, pad_id, seg_dtype)
    stem = part_name(job.index, "")
    names = [f"{stem}.input_ids.npy", f"{stem}.segment_ids.npy", f"{stem}.seqs.parquet"]
    save_npy(Path(out_dir) / names[0], ids)
    save_npy(Path(out_dir) / names[1], seg)
    table = pa.table(
        {
            "source": pa.array(job.sources, pa.string()),
            "num_segments": pa.array(seg.max(axis=1).astype(np.int32)),
            "num_tokens": pa.array((seg > 0).sum(axis=1).astype(np.int32)),
        }
    )
    write_table(Path(out_dir) / names[2], table)
    return names


def _jobs(
    items: dict[str, np.ndarray], bin_source: list[str], num_bins: int, seq_len: int, per_part: int
) -> list[PackJob]:
    """Split bins into output parts of `per_part` sequences; items are sorted by bin (no
    token paths yet: `_attach_token_paths`)."""
    jobs = []
    for j, lo in enumerate(range(0, num_bins, per_part)):
        hi = min(lo + per_part, num_bins)
        a, b = np.searchsorted(items["bin"], [lo, hi])
        sl = {k: v[a:b] for k, v in items.items() if k != "bin"}
        sl["dest"] = (items["bin"][a:b] - lo) * seq_len + items["pos"][a:b]
        del sl["pos"]
        jobs.append(PackJob(j, hi - lo, sl, bin_source[lo:hi], []))
    return jobs


def _attach_token_paths(jobs: list[PackJob], token_paths: list[str]) -> list[PackJob]:
    """Each job with the token files it reads, and its items' `part` as an index into them:
    the cost of opening inputs is then linear in parts, not input parts x output parts."""
    out = []
    for job in jobs:
        parts = job.items["part"]
        used, local = np.unique(parts, return_inverse=True)
        items = {**job.items, "part": local.astype(np.int64).reshape(parts.shape)}
        out.append(replace(job, items=items, token_paths=[token_paths[i] for i in used.tolist()]))
    return out


# ---------------------------------------------------------------- run


def group_seed(seed: int, group: int, window: int) -> int | list[int]:
    """Seed of one source group in one window: `seed + group` in the first window (the bytes
    of a corpus packed in one window do not depend on windows existing), then a seed sequence."""
    return seed + group if window == 0 else [seed, group, window]


def _pack_all(
    cfg: PackConfig,
    lengths: np.ndarray,
    codes: np.ndarray,
    names: list[str],
    seed: int,
    window: int = 0,
):
    """Pack each source group (or all documents) of one window; returns its item arrays (bins
    from 0) and bin sources."""
    groups = list(range(len(names))) if cfg.by_source else [None]
    cols: dict[str, list[np.ndarray]] = {
        k: [] for k in ("doc", "offset", "len", "bin", "pos", "seg")
    }
    bin_source: list[str] = []
    num_bins = docs_split = concat_split = 0
    for g, name in enumerate(groups):
        idx = np.flatnonzero(codes == name) if name is not None else np.arange(len(lengths))
        gseed = group_seed(seed, g, window)
        pk = pack_lengths(lengths[idx], cfg.seq_len, cfg.strategy, gseed)
        for key, arr in (
            ("doc", idx[pk.item_doc]),
            ("offset", pk.item_offset),
            ("len", pk.item_len),
            ("bin", pk.item_bin + num_bins),
            ("pos", pk.item_pos),
            ("seg", pk.item_seg),
        ):
            cols[key].append(arr)
        first = np.searchsorted(pk.item_bin, np.arange(pk.num_bins))
        bin_source += [names[c] for c in codes[idx[pk.item_doc[first]]].tolist()]
        num_bins += pk.num_bins
        docs_split += pk.docs_split()
        order = np.random.default_rng(gseed).permutation(len(idx))  # concat's own order
        concat_split += concat_docs_split(lengths[idx], cfg.seq_len, order)
    items = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in cols.items()}
    return items, bin_source, num_bins, docs_split, concat_split


def part_summary(pair: TokenPart) -> tuple[int, list[str]]:
    """Executor task: (documents, source names) of one part, from its docs file alone (the
    token file is checked when its window is read)."""
    source = read_table(pair.docs, columns=["source"]).column("source")
    return len(source), [n for n in source.unique().to_pylist() if n is not None]


def windows(docs_per_part: list[int], window_docs: int) -> list[list[int]]:
    """Consecutive input parts grouped into windows of at most `window_docs` documents (a part
    larger than that is a window of its own)."""
    out: list[list[int]] = []
    size = 0
    for i, n in enumerate(docs_per_part):
        if not out or size + n > window_docs:
            out.append([])
            size = 0
        out[-1].append(i)
        size += n
    return out


def _read_window(ctx: StageContext, pairs: list[TokenPart], part_ids: list[int], dtype: str, rank):
    """Map over one window's tokenize parts -> lengths, source codes into the sorted names, and
    for each document its (global) part and token offset there."""
    sub = [pairs[i] for i in part_ids]
    read = ctx.executor.map(partial(read_lengths, dtype=dtype), sub, desc="pack lengths")
    lengths = np.concatenate([r[0] for r in read]) if read else np.zeros(0, np.int64)
    # part-local dictionary codes -> codes into the sorted names
    local = [np.array([rank[n] for n in r[1]], np.int32)[r[2]] for r in read]
    codes = np.concatenate(local) if read else np.zeros(0, np.int32)
    doc_part = np.repeat(np.asarray(part_ids, np.int64), [len(r[0]) for r in read])
    doc_start = np.concatenate([np.cumsum(r[0]) - r[0] for r in read]) if read else lengths
    return lengths, codes, doc_part, doc_start


@dataclass
class _Totals:
    """What the report needs, summed over windows: O(sources + histogram bins)."""

    docs: int = 0
    empty: int = 0
    tokens: int = 0
    longer: int = 0
    num_bins: int = 0
    docs_split: int = 0
    concat_split: int = 0
    fill_counts: Any = None
    per_source: dict[str, int] | None = None

    def add(self, cfg: PackConfig, lengths, bin_source, num_bins, docs_split, concat_split, fill):
        self.docs += len(lengths)
        self.empty += int((lengths == 0).sum())
        self.tokens += int(lengths.sum())
        self.longer += int((lengths > cfg.seq_len).sum())
        self.num_bins += num_bins
        self.docs_split += docs_split
        self.concat_split += concat_split
        counts = np.asarray(fill_histogram(fill)["counts"], np.int64)
        self.fill_counts = counts if self.fill_counts is None else self.fill_counts + counts
        self.per_source = self.per_source or {}
        for s in bin_source:
            self.per_source[s] = self.per_source.get(s, 0) + 1


class _Writer:
    """Output parts of `sequences_per_part` sequences across windows: a window's bins are
    appended to the few left over from the last one, every full part is written at once, so
    the driver holds less than one part's items between windows."""

    def __init__(self, ctx: StageContext, cfg: PackConfig, token_paths: list[str], pad_id: int):
        self.ctx, self.cfg, self.token_paths = ctx, cfg, token_paths
        self.fn = partial(write_part, out_dir=str(ctx.out_dir), seq_len=cfg.seq_len, pad_id=pad_id)
        self.items: dict[str, np.ndarray] | None = None  # pending, bins from 0
        self.sources: list[str] = []
        self.next_index = 0
        self.outputs: list[str] = []

    def add(self, items: dict[str, np.ndarray], bin_source: list[str], last: bool) -> None:
        if self.items is not None:  # the carried bins come first
            shift = len(self.sources)
            items = {k: np.concatenate([self.items[k], v]) for k, v in items.items()}
            items["bin"][len(self.items["bin"]) :] += shift
            bin_source = self.sources + bin_source
        per = self.cfg.sequences_per_part
        done = len(bin_source) if last else len(bin_source) // per * per
        cut = int(np.searchsorted(items["bin"], done))
        jobs = _jobs(
            {k: v[:cut] for k, v in items.items()}, bin_source[:done], done, self.cfg.seq_len, per
        )
        jobs = [replace(job, index=job.index + self.next_index) for job in jobs]
        self.next_index += len(jobs)
        self.items = {k: v[cut:] for k, v in items.items()}
        self.items["bin"] = self.items["bin"] - done
        self.sources = bin_source[done:]
        if jobs:
            jobs = _attach_token_paths(jobs, self.token_paths)
            written = self.ctx.executor.map(self.fn, jobs, desc="pack write")
            self.outputs += [f for w in written for f in w]


def run(cfg: PackConfig, ctx: StageContext) -> StageResult:
    tokenize = ctx.inputs["tokenize"]
    meta = read_meta(tokenize.file("meta.json"))
    pairs = group_parts(tokenize.parts)
    summaries = ctx.executor.map(part_summary, pairs, desc="pack sources")
    names = sorted({n for s in summaries for n in s[1]})
    rank = {n: i for i, n in enumerate(names)}
    pad_id = meta.get("pad_id")
    pad_id = int(meta["eos_id"] if pad_id is None else pad_id)
    writer = _Writer(ctx, cfg, [str(p.tokens) for p in pairs], pad_id)
    totals = _Totals()
    wins = windows([s[0] for s in summaries], cfg.window_docs)
    for w, part_ids in enumerate(wins):
        lengths, codes, doc_part, doc_start = _read_window(
            ctx, pairs, part_ids, meta["dtype"], rank
        )
        items, bin_source, num_bins, docs_split, concat_split = _pack_all(
            cfg, lengths, codes, names, ctx.seed, w
        )
        # per item: where its tokens are (part, start) and where they go
        items["part"] = doc_part[items["doc"]]
        items["start"] = doc_start[items["doc"]] + items.pop("offset")
        del items["doc"], doc_part, doc_start
        fill = np.bincount(items["bin"], weights=items["len"], minlength=num_bins) / cfg.seq_len
        totals.add(cfg, lengths, bin_source, num_bins, docs_split, concat_split, fill)
        del lengths, codes, fill
        writer.add(items, bin_source, last=w == len(wins) - 1)
    out_meta = {
        k: meta.get(k)
        for k in ("vocab_size", "eos_id", "dtype", "tokenizer_sha256", "special_tokens")
    }
    out_meta.update(
        pad_id=pad_id,
        seq_len=cfg.seq_len,
        strategy=cfg.strategy,
        segment_dtype="uint16" if cfg.seq_len < 1 << 16 else "uint32",
        num_sequences=totals.num_bins,
    )
    atomic_write_json(ctx.out_dir / "meta.json", out_meta)
    outputs = [*writer.outputs, "meta.json"]
    stats = _stats(cfg, totals)
    stats["windows"] = len(wins)
    empty = totals.empty  # documents with no token at all: nothing to pack
    counts = DocCounts(totals.docs, totals.docs - empty, {"empty": empty} if empty else {})
    stats["fill_histogram"] = fill_histogram_counts(totals.fill_counts)
    return StageResult(outputs=outputs, stats=stats, counts=[counts])


FILL_EDGES = np.linspace(0.0, 1.0, 21)


def fill_histogram(fill: np.ndarray) -> dict[str, Any]:
    """Sequences by filled share of seq_len (float [num_sequences] in [0, 1]); 20 bins of 5%,
    a full sequence counts in the last bin."""
    return fill_histogram_counts(np.histogram(np.clip(fill, 0.0, 1.0), bins=FILL_EDGES)[0])


def fill_histogram_counts(counts: np.ndarray | None) -> dict[str, Any]:
    """`fill_histogram` from counts already binned on FILL_EDGES (summed over windows)."""
    counts = np.zeros(len(FILL_EDGES) - 1, np.int64) if counts is None else counts
    return {"edges": [round(float(e), 2) for e in FILL_EDGES], "counts": counts.tolist()}


def _stats(cfg: PackConfig, t: _Totals) -> dict[str, Any]:
    num_bins = t.num_bins
    slots = num_bins * cfg.seq_len
    lb = -(-t.tokens // cfg.seq_len)  # lower_bound: ceil(total tokens / seq_len)
    stats: dict[str, Any] = {**setting(cfg, "strategy"), **setting(cfg, "seq_len")}
    stats.update(
        {
            "tokens_in": t.tokens,
            "tokens_out": t.tokens,
            "sequences": num_bins,
            "padding_tokens": slots - t.tokens,
            "padding_pct": round(100 * (slots - t.tokens) / slots, 4) if slots else 0.0,
            "lower_bound_sequences": lb,
            "fill_vs_lower_bound": round(lb / num_bins, 6) if num_bins else 1.0,
            "docs_longer_than_seq_len": t.longer,
            "docs_split": t.docs_split,
            "docs_split_concat": t.concat_split,
            "truncations_avoided_vs_concat": t.concat_split - t.docs_split,
            "docs_per_sequence_mean": round((t.docs - t.empty) / num_bins, 3) if num_bins else 0.0,
            "sequences_per_source": dict(sorted((t.per_source or {}).items())),
        }
    )
    return stats


STAGE = Stage("pack", PackConfig, run, version="2", needs=("tokenize",))
