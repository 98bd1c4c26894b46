"""pack: token arrays of documents -> fixed-length sequences with segment ids (naive|concat|bfd).

Reads tokenize's `part-N.tokens.npy` + `part-N.docs.parquet`; lengths are packed globally (the
reduce), then each output part gathers its tokens from the memory-mapped inputs (the map).
Writes `part-N.input_ids.npy` [n, seq_len], `part-N.segment_ids.npy` [n, seq_len] (0 = padding,
k = k-th document piece), `part-N.seqs.parquet` (source, num_segments, num_tokens per sequence)
and `meta.json`. Algorithms live in pipeline.packing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from pipeline.config import bounded, setting
from pipeline.errors import DataError
from pipeline.io import (
    atomic_write_json,
    part_name,
    read_json_file,
    read_table,
    save_npy,
    write_table,
)
from pipeline.io import group_parts as io_group_parts
from pipeline.packing import (
    Packing,
    concat_docs_split,
    lower_bound,
    pack_bfd,
    pack_concat,
    pack_naive,
)
from pipeline.stage import DocCounts, Stage, StageContext, StageResult


@dataclass(frozen=True)
class PackConfig:
    strategy: Literal["bfd", "concat", "naive"] = "bfd"  # see docs/packing.md; bfd cuts fewest
    seq_len: int = bounded(2048, ge=2, le=1 << 20)  # tokens per sequence (EOS included)
    by_source: bool = True  # pack each source apart: every sequence has one source (shard weights)
    sequences_per_part: int = bounded(8192, ge=1)  # sequences per output part (parallel unit)


# ---------------------------------------------------------------- pure core


def pack_lengths(lengths: np.ndarray, seq_len: int, strategy: str, seed: int) -> Packing:
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


def group_parts(paths: list[Path]) -> list[tuple[Path, Path]]:
    """tokenize's top-level parts -> [(tokens.npy, docs.parquet)] in part order."""
    kinds = {"tokens.npy": "tokens.npy", "docs.parquet": "docs.parquet"}
    return [(g["tokens.npy"], g["docs.parquet"]) for g in io_group_parts(paths, kinds, "tokenize")]


def read_meta(path: Path) -> dict[str, Any]:
    """tokenize's meta.json: eos_id, pad_id, dtype (+ vocab and tokenizer facts passed on)."""
    meta = read_json_file(path, "tokenize meta.json")
    for key in ("eos_id", "dtype"):
        if key not in meta:
            raise DataError(str(path), f"field '{key}' is missing")
    return meta


def read_lengths(pair: tuple[Path, Path], dtype: str) -> tuple[np.ndarray, list[str], np.ndarray]:
    """One part's num_tokens (int64) and sources (names + int32 code per document), checked
    against its token array. Codes keep driver memory at ~12 B per document."""
    tokens_path, docs_path = pair
    table = read_table(docs_path, columns=["num_tokens", "source"])
    lengths = table.column("num_tokens").to_numpy().astype(np.int64)
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


def write_part(job: dict[str, Any], out_dir: str, seq_len: int, pad_id: int) -> list[str]:
    """Build and write output part `job['index']`; returns the relative paths written. Only
    the token arrays this part takes items from are opened (`job['token_paths']`)."""
    tokens = [np.load(p, mmap_mode="r", allow_pickle=False) for p in job["token_paths"]]
    seg_dtype = np.uint16 if seq_len < 1 << 16 else np.uint32
    ids, seg = fill_sequences(tokens, job["items"], job["num_seqs"], seq_len, pad_id, seg_dtype)
    stem = part_name(job["index"], "")
    names = [f"{stem}.input_ids.npy", f"{stem}.segment_ids.npy", f"{stem}.seqs.parquet"]
    save_npy(Path(out_dir) / names[0], ids)
    save_npy(Path(out_dir) / names[1], seg)
    table = pa.table(
        {
            "source": pa.array(job["sources"], pa.string()),
            "num_segments": pa.array(seg.max(axis=1).astype(np.int32)),
            "num_tokens": pa.array((seg > 0).sum(axis=1).astype(np.int32)),
        }
    )
    write_table(Path(out_dir) / names[2], table)
    return names


def _jobs(
    items: dict[str, np.ndarray], bin_source: list[str], num_bins: int, seq_len: int, per_part: int
) -> list[dict[str, Any]]:
    """Split bins into output parts of `per_part` sequences; items are sorted by bin."""
    jobs = []
    for j, lo in enumerate(range(0, num_bins, per_part)):
        hi = min(lo + per_part, num_bins)
        a, b = np.searchsorted(items["bin"], [lo, hi])
        sl = {k: v[a:b] for k, v in items.items() if k != "bin"}
        sl["dest"] = (items["bin"][a:b] - lo) * seq_len + items["pos"][a:b]
        del sl["pos"]
        jobs.append({"index": j, "num_seqs": hi - lo, "items": sl, "sources": bin_source[lo:hi]})
    return jobs


def _attach_token_paths(jobs: list[dict[str, Any]], token_paths: list[str]) -> None:
    """Give each job the token files it reads, and its items' `part` as an index into them:
    the cost of opening inputs is then linear in parts, not input parts x output parts."""
    for job in jobs:
        parts = job["items"]["part"]
        used, local = np.unique(parts, return_inverse=True)
        job["items"]["part"] = local.astype(np.int64).reshape(parts.shape)
        job["token_paths"] = [token_paths[i] for i in used.tolist()]


# ---------------------------------------------------------------- run


def _pack_all(cfg: PackConfig, lengths: np.ndarray, codes: np.ndarray, names: list[str], seed: int):
    """Pack each source group (or all documents); returns global item arrays and bin sources."""
    groups = list(range(len(names))) if cfg.by_source else [None]
    cols: dict[str, list[np.ndarray]] = {
        k: [] for k in ("doc", "offset", "len", "bin", "pos", "seg")
    }
    bin_source: list[str] = []
    num_bins = docs_split = concat_split = 0
    for g, name in enumerate(groups):
        idx = np.flatnonzero(codes == name) if name is not None else np.arange(len(lengths))
        pk = pack_lengths(lengths[idx], cfg.seq_len, cfg.strategy, seed + g)
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
        order = np.random.default_rng(seed + g).permutation(len(idx))  # concat's own order
        concat_split += concat_docs_split(lengths[idx], cfg.seq_len, order)
    items = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in cols.items()}
    return items, bin_source, num_bins, docs_split, concat_split


def _read_inputs(ctx: StageContext, pairs: list[tuple[Path, Path]], dtype: str):
    """Map over tokenize parts -> lengths, source codes into sorted names, and for each document
    its part and token offset there."""
    read = ctx.executor.map(partial(read_lengths, dtype=dtype), pairs, desc="pack lengths")
    lengths = np.concatenate([r[0] for r in read]) if read else np.zeros(0, np.int64)
    names = sorted({n for r in read for n in r[1]})
    rank = {n: i for i, n in enumerate(names)}
    # part-local dictionary codes -> codes into the sorted `names`
    local = [np.array([rank[n] for n in r[1]], np.int32)[r[2]] for r in read]
    codes = np.concatenate(local) if read else np.zeros(0, np.int32)
    doc_part = np.repeat(np.arange(len(read)), [len(r[0]) for r in read])
    doc_start = np.concatenate([np.cumsum(r[0]) - r[0] for r in read]) if read else lengths
    return lengths, codes, names, doc_part, doc_start


def run(cfg: PackConfig, ctx: StageContext) -> StageResult:
    tokenize = ctx.inputs["tokenize"]
    meta = read_meta(tokenize.file("meta.json"))
    pairs = group_parts(tokenize.parts)
    lengths, codes, names, doc_part, doc_start = _read_inputs(ctx, pairs, meta["dtype"])
    items, bin_source, num_bins, docs_split, concat_split = _pack_all(
        cfg, lengths, codes, names, ctx.seed
    )
    # per item: where its tokens are (part, start) and where they go
    items["part"] = doc_part[items["doc"]]
    items["start"] = doc_start[items["doc"]] + items.pop("offset")
    del items["doc"]
    fill = np.bincount(items["bin"], weights=items["len"], minlength=num_bins) / cfg.seq_len
    jobs = _jobs(items, bin_source, num_bins, cfg.seq_len, cfg.sequences_per_part)
    pad_id = meta.get("pad_id")
    pad_id = int(meta["eos_id"] if pad_id is None else pad_id)
    _attach_token_paths(jobs, [str(p[0]) for p in pairs])
    fn = partial(write_part, out_dir=str(ctx.out_dir), seq_len=cfg.seq_len, pad_id=pad_id)
    outputs = [f for written in ctx.executor.map(fn, jobs, desc="pack write") for f in written]
    out_meta = {
        k: meta.get(k)
        for k in ("vocab_size", "eos_id", "dtype", "tokenizer_sha256", "special_tokens")
    }
    out_meta.update(
        pad_id=pad_id,
        seq_len=cfg.seq_len,
        strategy=cfg.strategy,
        segment_dtype="uint16" if cfg.seq_len < 1 << 16 else "uint32",
        num_sequences=num_bins,
    )
    atomic_write_json(ctx.out_dir / "meta.json", out_meta)
    outputs.append("meta.json")
    stats = _stats(cfg, lengths, bin_source, num_bins, docs_split, concat_split)
    empty = int((lengths == 0).sum())  # documents with no token at all: nothing to pack
    counts = DocCounts(len(lengths), len(lengths) - empty, {"empty": empty} if empty else {})
    stats["fill_histogram"] = fill_histogram(fill)
    return StageResult(outputs=outputs, stats=stats, counts=[counts])


FILL_EDGES = np.linspace(0.0, 1.0, 21)


def fill_histogram(fill: np.ndarray) -> dict[str, Any]:
    """Sequences by filled share of seq_len (float [num_sequences] in [0, 1]); 20 bins of 5%,
    a full sequence counts in the last bin."""
    counts, _ = np.histogram(np.clip(fill, 0.0, 1.0), bins=FILL_EDGES)
    return {"edges": [round(float(e), 2) for e in FILL_EDGES], "counts": counts.tolist()}


def _stats(
    cfg: PackConfig,
    lengths: np.ndarray,
    bin_source: list[str],
    num_bins: int,
    docs_split: int,
    concat_split: int,
) -> dict[str, Any]:
    tokens = int(lengths.sum())
    slots = num_bins * cfg.seq_len
    lb = lower_bound(lengths, cfg.seq_len)
    empty = int((lengths == 0).sum())
    per_source: dict[str, int] = {}
    for s in bin_source:
        per_source[s] = per_source.get(s, 0) + 1
    stats: dict[str, Any] = {**setting(cfg, "strategy"), **setting(cfg, "seq_len")}
    stats.update(
        {
            "tokens_in": tokens,
            "tokens_out": tokens,
            "sequences": num_bins,
            "padding_tokens": slots - tokens,
            "padding_pct": round(100 * (slots - tokens) / slots, 4) if slots else 0.0,
            "lower_bound_sequences": lb,
            "fill_vs_lower_bound": round(lb / num_bins, 6) if num_bins else 1.0,
            "docs_longer_than_seq_len": int((lengths > cfg.seq_len).sum()),
            "docs_split": docs_split,
            "docs_split_concat": concat_split,
            "truncations_avoided_vs_concat": concat_split - docs_split,
            "docs_per_sequence_mean": round((len(lengths) - empty) / num_bins, 3)
            if num_bins
            else 0.0,
            "sequences_per_source": dict(sorted(per_source.items())),
        }
    )
    return stats


STAGE = Stage("pack", PackConfig, run, version="1", needs=("tokenize",))
