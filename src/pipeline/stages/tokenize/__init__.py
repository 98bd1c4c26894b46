"""tokenize: train a byte-level BPE on the input (or load a tokenizer.json, or use a pretrained
Hugging Face tokenizer as is: `pretrained`), then encode every document with EOS appended into
one token array per part.

Per input part i: `part-i.tokens.npy` (1-D, documents concatenated in order, uint16 when the
vocab fits else uint32) and `part-i.docs.parquet` (id, source, num_tokens incl. EOS). Beside
them: `tokenizer.json` (Hugging Face format), `hf_tokenizer/` (what transformers' save_pretrained
writes: AutoTokenizer.from_pretrained loads it) and `meta.json`. Empty documents are dropped.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from pipeline.config import bounded, option, recipe_key, setting
from pipeline.errors import DataError, RecipeError
from pipeline.io import atomic_write_bytes, atomic_write_json, save_npy
from pipeline.parts import part_name, read_table, write_rejected, write_table
from pipeline.stage import DocCounts, Stage, StageContext, StageResult
from pipeline.stages.tokenize.wordcounts import FAN_IN, load_counts, save_counts, tree_reduce
from pipeline.tokenizer import health, hf
from pipeline.tokenizer.bpe import DEFAULT_SPECIALS, EOS, PAD, Tokenizer
from pipeline.tokenizer.encoder import BATCH_CHARS
from pipeline.tokenizer.pretokenize import compile_pattern, special_splitter
from pipeline.tokenizer.pretrained import PretrainedTokenizer
from pipeline.tokenizer.train import train_bpe
from pipeline.tokenizer.wordcount import count_words

NUM_FIRST_MERGES = 20  # merges shown in the report
HF_TOKENIZER_DIR = "hf_tokenizer"  # AutoTokenizer.from_pretrained(<run>/tokenize/hf_tokenizer)
# document length histogram (tokens, EOS excluded): powers of two, longer ones in the last bin
DOC_TOKEN_EDGES = np.array([0] + [2**k for k in range(3, 21)], np.int64)


@dataclass(frozen=True)
class TokenizeConfig:
    vocab_size: int = bounded(
        8192, ge=257, le=1 << 32, doc="tokens in all: 256 bytes+merges+specials"
    )
    min_frequency: int = bounded(2, ge=1, doc="a pair seen fewer times in training is not merged")
    tokenizer_path: str | None = option(None, "a tokenizer.json to use instead of training one")
    max_train_docs: int | None = bounded(
        None, ge=1, doc="train on at most this many docs (part order)"
    )
    max_train_bytes: int | None = bounded(200_000_000, ge=1, doc="and at most this much UTF-8 text")
    heldout_fraction: float = bounded(
        0.01, ge=0.0, lt=1.0, doc="docs kept out of training (seeded)"
    )
    max_word_bytes: int = bounded(256, ge=2, doc="training: longer pieces are cut into such chunks")
    special_tokens: list[str] = option(factory=lambda: list(DEFAULT_SPECIALS), doc="one id each")
    pretrained: str | None = option(
        None,
        "a Hugging Face tokenizer.json (BPE, Unigram, WordPiece; `tokenizers` extra) used as "
        "is: no training; eos / pad are its own, else eos_token / pad_token below",
    )
    eos_token: str | None = option(None, "pretrained: the eos token when the tokenizer names none")
    pad_token: str | None = option(None, "pretrained: the pad token when the tokenizer names none")

    def validate(self, path: str) -> None:
        if self.pretrained is not None:
            _validate_pretrained(self, path)
            return
        specials = self.special_tokens
        for need in (EOS, PAD):
            if need not in specials:
                raise RecipeError(
                    f"{path}.special_tokens", f"must contain {need!r}, got {specials}"
                )
        if len(set(specials)) != len(specials) or not all(specials):
            raise RecipeError(
                f"{path}.special_tokens", f"must be distinct non-empty strings, got {specials}"
            )
        if self.tokenizer_path is not None and not Path(self.tokenizer_path).is_file():
            raise RecipeError(f"{path}.tokenizer_path", f"no file {self.tokenizer_path!r}")
        if self.tokenizer_path is None and self.vocab_size < 256 + len(specials) + 1:
            raise RecipeError(
                f"{path}.vocab_size",
                f"must be at least 256 bytes + "
                f"{len(specials)} special tokens + 1 merge = "
                f"{256 + len(specials) + 1}, got {self.vocab_size}",
            )


def _validate_pretrained(cfg: TokenizeConfig, path: str) -> None:
    if cfg.tokenizer_path is not None:
        raise RecipeError(f"{path}.pretrained", "give pretrained or tokenizer_path, not both")
    if not Path(cfg.pretrained).is_file():
        raise RecipeError(f"{path}.pretrained", f"no file {cfg.pretrained!r}")
    PretrainedTokenizer(Path(cfg.pretrained), cfg.eos_token, cfg.pad_token)  # roles resolve


def _pretrained(cfg: TokenizeConfig, parts: list[Path]) -> tuple[PretrainedTokenizer, list, dict]:
    """The pretrained tokenizer, no training quotas, and its stats."""
    tok = PretrainedTokenizer(Path(cfg.pretrained), cfg.eos_token, cfg.pad_token)
    stats = {
        "pretrained": cfg.pretrained,
        "tokenizer_model": tok.model_type,
        "eos_token": tok.roles["eos"],
        "pad_token": tok.roles["pad"],
        "eos_pad_from": f"{tok.role_source['eos']}/{tok.role_source['pad']}",
    }
    return tok, [0] * len(parts), stats


def _save_pretrained(tok: PretrainedTokenizer, out_dir: Path) -> tuple[str, list[str]]:
    """tokenizer.json copied byte for byte (its sha256 is the file's) and hf_tokenizer/."""
    files = tok.pretrained_files()
    atomic_write_bytes(out_dir / "tokenizer.json", files["tokenizer.json"])
    for name, data in files.items():
        atomic_write_bytes(out_dir / HF_TOKENIZER_DIR / name, data)
    return tok.sha256, [f"{HF_TOKENIZER_DIR}/{n}" for n in files]


def heldout_mask(ids: list[str], seed: int, fraction: float) -> np.ndarray:
    """bool[n]: documents held out of training, a seeded hash of the id (order-independent)."""
    if fraction <= 0:
        return np.zeros(len(ids), dtype=bool)
    cut = int(fraction * 2**32)
    h = xxhash.xxh32_intdigest
    return np.array([h((i or "").encode("utf-8", "surrogatepass"), seed) < cut for i in ids], bool)


def train_quota(sizes: list[np.ndarray], max_docs: int | None, max_bytes: int | None) -> list[int]:
    """How many of each part's trainable docs (sizes[i], bytes, in order) fall within the caps.
    The reference over per-document sizes; the stage uses `quota_from_totals` (same result)."""
    flat = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
    keep = len(flat)
    if max_docs is not None:
        keep = min(keep, max_docs)
    if max_bytes is not None:
        keep = min(keep, int(np.searchsorted(np.cumsum(flat), max_bytes, side="right")))
    quota, start = [], 0
    for s in sizes:
        quota.append(int(min(max(keep - start, 0), len(s))))
        start += len(s)
    return quota


def _read_docs(path: Path, seed: int, fraction: float) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """(table, empty[n], trainable[n]): trainable = non-empty and not held out."""
    table = read_table(path)
    for col in ("id", "text", "source"):
        if col not in table.column_names:
            raise DataError(str(path), f"column {col!r} is missing")
    text = table.column("text")
    empty = pc.fill_null(pc.equal(pc.binary_length(text), 0), True).to_numpy(zero_copy_only=False)
    held = heldout_mask(table.column("id").to_pylist(), seed, fraction)
    return table, empty, ~empty & ~held


def part_train_sizes(path: Path, seed: int, fraction: float) -> np.ndarray:
    """int64[k]: UTF-8 bytes of each trainable document of the part, in order."""
    table, _, trainable = _read_docs(path, seed, fraction)
    return _text_bytes(table)[trainable]


def part_train_totals(path: Path, seed: int, fraction: float) -> tuple[int, int]:
    """(trainable documents, their UTF-8 bytes) of one part: all the driver needs of a part
    that lies wholly inside or outside the training quota."""
    sizes = part_train_sizes(path, seed, fraction)
    return len(sizes), int(sizes.sum())


@dataclass(frozen=True)
class BudgetJob:
    """Task argument of part_docs_within: the part where the byte cap falls."""

    path: str  # the part
    budget: int  # bytes left under max_train_bytes


@dataclass(frozen=True)
class PartJob:
    """Task argument of the word-count and encode tasks: one part and its training quota."""

    index: int  # part number
    path: str  # the part
    quota: int  # its first `quota` trainable documents train the tokenizer


def part_docs_within(job: BudgetJob, seed: int, fraction: float) -> int:
    """Trainable documents of one part whose running byte total stays <= budget (the part
    where the quota's byte cap falls)."""
    sizes = part_train_sizes(Path(job.path), seed, fraction)
    return int(np.searchsorted(np.cumsum(sizes), job.budget, side="right"))


def quota_from_totals(
    totals: list[tuple[int, int]],
    max_docs: int | None,
    max_bytes: int | None,
    docs_within: Callable[[int, int], int],
) -> list[int]:
    """`train_quota` from per-part (documents, bytes) totals: the same quotas, without the
    per-document sizes in the driver. The byte cap falls inside at most one part; only there
    `docs_within(part, budget)` counts the documents that fit (in a task that reads the part).
    """
    counts = [c for c, _ in totals]
    keep = sum(counts) if max_docs is None else min(sum(counts), max_docs)
    if max_bytes is not None:
        used = start = 0
        for i, (c, b) in enumerate(totals):
            if used + b > max_bytes:
                if start < keep:  # the byte cap binds before the document cap
                    keep = min(keep, start + docs_within(i, max_bytes - used))
                break
            used, start = used + b, start + c
    quota, start = [], 0
    for c in counts:
        quota.append(int(min(max(keep - start, 0), c)))
        start += c
    return quota


def _text_bytes(table: pa.Table) -> np.ndarray:
    """int64[n]: UTF-8 bytes of each document's text (0 for null)."""
    lengths = pc.fill_null(pc.binary_length(table.column("text")), 0)
    return np.asarray(lengths.to_numpy(zero_copy_only=False), dtype=np.int64)


def part_word_counts(
    path: str, quota: int, seed: int, fraction: float, specials: tuple[str, ...]
) -> Counter[str]:
    """Piece counts over the first `quota` trainable documents of one part."""
    if quota == 0:
        return Counter()
    table, _, trainable = _read_docs(Path(path), seed, fraction)
    texts = table.column("text").to_pylist()
    chosen = [texts[i] for i in np.flatnonzero(trainable)[:quota]]
    return count_words(chosen, compile_pattern(), special_splitter(specials))


def part_word_counts_file(
    job: PartJob, folder: str, seed: int, fraction: float, specials: tuple[str, ...]
) -> str:
    """Executor task: one part's piece counts written to `folder`; returns the file's path."""
    out = Path(folder) / f"level0-{job.index:05d}.parquet"
    save_counts(out, part_word_counts(job.path, job.quota, seed, fraction, specials))
    return str(out)


@lru_cache(maxsize=2)
def _load_tokenizer(
    path: str, sha256: str, roles: tuple[str, str] | None = None
) -> Tokenizer | PretrainedTokenizer:
    """Ours (hf.load), or with `roles` (eos, pad) a pretrained one through `tokenizers`."""
    if roles is not None:
        return PretrainedTokenizer(Path(path), *roles)
    return hf.load(Path(path))  # sha256 in the key: a new file at the same path reloads


def _groups(rows: list[int], texts: list[str | None]) -> Iterator[list[int]]:
    """`rows` in runs of about BATCH_CHARS characters of text (the encode_batch unit)."""
    group: list[int] = []
    size = 0
    for i in rows:
        group.append(i)
        size += len(texts[i] or "")
        if size >= BATCH_CHARS:
            yield group
            group, size = [], 0
    if group:
        yield group


def encode_part(
    job: PartJob,
    tok_path: str,
    tok_sha: str,
    out_dir: str,
    seed: int,
    fraction: float,
    dtype: str,
    roles: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """Encode one part (EOS after each doc); write its tokens, docs and rejected files."""
    index, path, quota = job.index, job.path, job.quota
    tok = _load_tokenizer(tok_path, tok_sha, roles)
    table, empty, trainable = _read_docs(Path(path), seed, fraction)
    n = table.num_rows
    used = np.zeros(n, dtype=bool)
    used[np.flatnonzero(trainable)[:quota]] = True
    texts = table.column("text").to_pylist()
    keep = np.flatnonzero(~empty)
    ntok = np.zeros(n, dtype=np.int64)  # tokens per doc, EOS excluded
    t0 = time.perf_counter()
    arrays = []  # one per group of ~BATCH_CHARS of text: Python lists never hold a whole part
    for group in _groups(keep.tolist(), texts):
        batch = [texts[i] for i in group]
        if isinstance(tok, Tokenizer):  # numpy ids: no Python int per token
            flat, counts = tok.encode_batch_flat(batch)
            ntok[group] = counts
            arrays.append(np.insert(flat, np.cumsum(counts), tok.eos_id).astype(dtype))
            continue
        ids: list[int] = []
        for i, doc in zip(group, tok.encode_batch(batch), strict=True):
            ntok[i] = len(doc)
            ids += doc
            ids.append(tok.eos_id)
        arrays.append(np.array(ids, dtype=dtype))
    tokens = np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)
    seconds = time.perf_counter() - t0
    out = Path(out_dir)
    outputs = [part_name(index, ".tokens.npy"), part_name(index, ".docs.parquet")]
    save_npy(out / outputs[0], tokens)
    docs = table.drop_columns(["text"]).take(pa.array(keep))
    docs = docs.append_column("num_tokens", pa.array(ntok[keep] + 1, pa.int64()))
    write_table(out / outputs[1], docs)
    if empty.any():
        rej = table.filter(pa.array(empty))
        outputs.append(write_rejected(out, index, rej, [["empty"]] * rej.num_rows))
    nbytes = _text_bytes(table)
    held = ~empty & ~trainable
    counts = DocCounts(n, len(keep), {"empty": int(empty.sum())}, int(nbytes.sum()))
    return {
        "outputs": outputs,
        "counts": counts,
        "tokens_out": len(tokens),
        "encode_seconds": seconds,
        "train_bytes": int(nbytes[used].sum()),
        "train_tokens": int(ntok[used].sum()),
        "heldout_docs": int(held.sum()),
        "heldout_bytes": int(nbytes[held].sum()),
        "heldout_tokens": int(ntok[held].sum()),
        "text_tokens": int(ntok.sum()),
        "max_doc_tokens": int(ntok.max()) if n else 0,
        **script_sums(texts, keep, nbytes, ntok),
        "doc_token_counts": np.histogram(
            np.clip(ntok[keep], 0, DOC_TOKEN_EDGES[-1]), bins=DOC_TOKEN_EDGES
        )[0],
    }


def script_sums(
    texts: list[str | None], keep: np.ndarray, nbytes: np.ndarray, ntok: np.ndarray
) -> dict[str, np.ndarray]:
    """Documents, UTF-8 bytes and tokens (EOS excluded) per dominant script of the encoded
    documents `keep`: `script_docs` / `script_bytes` / `script_tokens`, int64 [scripts + 1]."""
    scripts = np.array([health.dominant_script(texts[i] or "") for i in keep.tolist()], np.int64)
    sums = health.by_script(scripts, nbytes[keep], ntok[keep])
    return {f"script_{k}": v for k, v in sums.items()}


def health_stats(
    cfg: TokenizeConfig, tot: dict[str, Any], vocab_size: int, stats: dict[str, Any], log: Any
) -> dict[str, Any]:
    """Bytes/token per script and a warning (logged and kept in the report) for each script
    outside its healthy range (pipeline.tokenizer.health)."""
    table = health.script_table({k: tot[f"script_{k}"] for k in ("docs", "bytes", "tokens")})
    found = health.warnings(
        table, vocab_size, recipe_key(cfg, "vocab_size"), bool(stats.get("stopped_early"))
    )
    for line in found:
        log.warning("[tokenize] %s", line)
    return {"bytes_per_token_by_script": table, "bytes_per_token_warnings": found}


def _train(
    cfg: TokenizeConfig, ctx: StageContext, parts: list[Path]
) -> tuple[Tokenizer, list[int], dict[str, Any]]:
    specials = tuple(cfg.special_tokens)
    t0 = time.perf_counter()
    # per part (documents, bytes) only: the driver holds O(parts), not a size per document
    seeded = {"seed": ctx.seed, "fraction": cfg.heldout_fraction}
    totals = ctx.executor.map(partial(part_train_totals, **seeded), parts, desc="tokenize: sizes")

    def docs_within(i: int, budget: int) -> int:
        fn = partial(part_docs_within, **seeded)
        return ctx.executor.map(fn, [BudgetJob(str(parts[i]), budget)], desc="tokenize: quota")[0]

    quotas = quota_from_totals(totals, cfg.max_train_docs, cfg.max_train_bytes, docs_within)
    # per-part counts go to files and are merged by a tree of tasks (wordcounts.tree_reduce)
    items = [PartJob(i, str(p), q) for i, (p, q) in enumerate(zip(parts, quotas, strict=False))]
    folder = ctx.out_dir / ".wordcounts"
    fn = partial(
        part_word_counts_file,
        folder=str(folder),
        seed=ctx.seed,
        fraction=cfg.heldout_fraction,
        specials=specials,
    )
    files = ctx.executor.map(fn, items, desc="tokenize: count words")
    shares = max(1, min(ctx.executor.workers, FAN_IN))  # the last merge: one task per worker
    counts: dict[str, int] = {}
    for final in tree_reduce(ctx.executor, files, folder, "tokenize: merge counts", shares):
        counts.update(load_counts(Path(final)))  # disjoint pieces: the union is exact
    shutil.rmtree(folder, ignore_errors=True)
    t1 = time.perf_counter()
    num_merges = cfg.vocab_size - 256 - len(specials)
    res = train_bpe(counts, num_merges, cfg.min_frequency, cfg.max_word_bytes)
    t2 = time.perf_counter()
    tok = Tokenizer(res.merges, specials)
    if res.stop_reason != "vocab_size":
        ctx.log.warning(
            "[tokenize] stopped at %d of %d merges (%s): vocab_size %d instead of %d",
            len(res.merges),
            num_merges,
            res.stop_reason,
            tok.vocab_size,
            cfg.vocab_size,
        )
    first = [
        f"{res.vocab[a].decode('utf-8', 'replace')!r} + {res.vocab[b].decode('utf-8', 'replace')!r}"
        for a, b in res.merges[:NUM_FIRST_MERGES]
    ]
    stats = {
        **setting(cfg, "vocab_size", "vocab_size_requested"),
        "num_merges": len(res.merges),
        "stopped_early": res.stop_reason != "vocab_size",
        "stop_reason": res.stop_reason,
        "train_docs": int(sum(quotas)),
        "train_words_distinct": res.num_words,
        "count_seconds": round(t1 - t0, 3),
        "merge_seconds": round(t2 - t1, 3),
        "train_seconds": round(t2 - t0, 3),
        "first_merges": first,
    }
    return tok, quotas, stats


def _throughput(bytes_in: int, tokens: int, encode_s: float, wall_s: float) -> dict[str, float]:
    """Encoding rates: per core (summed per-part encode time) and of the whole executor map."""
    return {
        "encode_tokens_per_s": round(tokens / max(encode_s, 1e-9), 1),
        "encode_wall_mb_per_s": round(bytes_in / 1e6 / max(wall_s, 1e-9), 3),
        "encode_wall_tokens_per_s": round(tokens / max(wall_s, 1e-9), 1),
    }


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def _save_tokenizer(tok: Tokenizer, out_dir: Path) -> tuple[str, list[str]]:
    """tokenizer.json and the save_pretrained folder (each file atomically); returns the
    tokenizer fingerprint (sha256 of tokenizer.json) and the folder's files."""
    data = hf.dumps(tok)
    atomic_write_bytes(out_dir / "tokenizer.json", data)
    files = hf.pretrained_files(tok, data)
    for name, body in files.items():
        atomic_write_bytes(out_dir / HF_TOKENIZER_DIR / name, body)
    return hashlib.sha256(data).hexdigest(), [f"{HF_TOKENIZER_DIR}/{n}" for n in files]


def run(cfg: TokenizeConfig, ctx: StageContext) -> StageResult:
    parts = [p for p in ctx.input_parts if p.name.endswith(".parquet")]
    if not parts:
        raise DataError(
            ctx.upstream or "tokenize",
            "no input parts: tokenize needs an upstream "
            "stage that writes documents (e.g. download)",
        )
    roles = None
    if cfg.pretrained:
        tok, quotas, stats = _pretrained(cfg, parts)
        roles = (tok.roles["eos"], tok.roles["pad"])
    elif cfg.tokenizer_path:
        tok = hf.load(Path(cfg.tokenizer_path))
        missing = [s for s in (EOS, PAD) if s not in tok.specials]
        if missing:
            raise DataError(
                cfg.tokenizer_path, f"special tokens {missing} are missing from added_tokens"
            )
        quotas, stats = [0] * len(parts), setting(cfg, "tokenizer_path")
    else:
        tok, quotas, stats = _train(cfg, ctx, parts)
    if roles is not None:
        sha, pretrained = _save_pretrained(tok, ctx.out_dir)
    else:
        sha, pretrained = _save_tokenizer(tok, ctx.out_dir)
    dtype = "uint16" if tok.vocab_size <= 65536 else "uint32"  # uint16 holds ids < 65536
    fn = partial(
        encode_part,
        tok_path=str(ctx.out_dir / "tokenizer.json"),
        tok_sha=sha,
        out_dir=str(ctx.out_dir),
        seed=ctx.seed,
        fraction=cfg.heldout_fraction,
        dtype=dtype,
        roles=roles,
    )
    t0 = time.perf_counter()
    results = ctx.executor.map(
        fn,
        [PartJob(i, str(p), q) for i, (p, q) in enumerate(zip(parts, quotas, strict=False))],
        desc="tokenize: encode",
    )
    wall = time.perf_counter() - t0
    meta = {
        "vocab_size": tok.vocab_size,
        "eos_id": tok.eos_id,
        "pad_id": tok.pad_id if roles is not None else tok.specials[PAD],
        "dtype": dtype,
        "tokenizer_sha256": sha,
        "special_tokens": dict(tok.specials),
    }
    atomic_write_json(ctx.out_dir / "meta.json", meta)
    tot = {k: sum(r[k] for r in results) for k in results[0] if k not in ("outputs", "counts")}
    counts = [r["counts"] for r in results]
    bytes_in = DocCounts.total(counts).bytes_in or 0
    tot["max_doc_tokens"] = max(r["max_doc_tokens"] for r in results)
    outputs = ["tokenizer.json", *pretrained, "meta.json"]
    outputs += [o for r in results for o in r["outputs"]]
    stats = {
        "tokens_out": tot["tokens_out"],
        "vocab_size": tok.vocab_size,
        "dtype": dtype,
        "eos_id": tok.eos_id,
        **stats,
        "bytes_per_token": _ratio(bytes_in, tot["text_tokens"]),
        "bytes_per_token_train": _ratio(tot["train_bytes"], tot["train_tokens"]),
        **health_stats(cfg, tot, tok.vocab_size, stats, ctx.log),
        "heldout_docs": tot["heldout_docs"],
        "bytes_per_token_heldout": _ratio(tot["heldout_bytes"], tot["heldout_tokens"]),
        "doc_tokens_mean": _ratio(tot["text_tokens"], DocCounts.total(counts).docs_out),
        "doc_tokens_max": tot["max_doc_tokens"],
        "doc_tokens_histogram": {
            "edges": DOC_TOKEN_EDGES.tolist(),
            "counts": [int(c) for c in tot["doc_token_counts"]],
        },
        "encode_seconds": round(tot["encode_seconds"], 3),
        "encode_wall_seconds": round(wall, 3),
        # single-thread rate: text bytes over the summed per-part encode time
        "encode_mb_per_s": round(bytes_in / 1e6 / max(tot["encode_seconds"], 1e-9), 3),
        **_throughput(bytes_in, tot["tokens_out"], tot["encode_seconds"], wall),
        "tokenizer_sha256": sha,
    }
    return StageResult(outputs=outputs, stats=stats, counts=counts)


STAGE = Stage(
    "tokenize", TokenizeConfig, run, version="3", needs=("download",)
)  # 2: writes hf_tokenizer/
