"""shard above `exact_max_sequences`: subsample, eval split and train shuffle without a global
per-sequence array in the driver.

- Selection: per source, how many sequences each pack part gives is one multivariate
  hypergeometric draw over the parts' counts (exactly the law of choosing that many of the
  source's sequences uniformly without replacement); the eval count is spread over the parts
  the same way. A task per part then picks its rows (seeded by the part) and writes them to
  `<stage temp>/.select/` (int32, sorted: pack order).
- Train order: a keyed Feistel bijection of [0, T) (`permute.FeistelPermutation`, cycle
  walking) maps output position -> rank among the train sequences in pack order; the rank
  gives the part (prefix sums of the per-part train counts) and the row (its rows file).
  Each shard task evaluates it only at its own positions.
- Eval stays in pack order, so an eval shard reads a few consecutive parts.

Driver memory: O(parts x sources) counts + O(shards) results, no term in the sequences.
The bytes differ from the exact path's (other random streams); per-source counts are the same.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.io import save_npy, sha256_file
from pipeline.parts import read_table
from pipeline.permute import FeistelPermutation
from pipeline.shards import FIELDS, save_npz, shard_name, shard_sizes
from pipeline.shuffle import ShuffleStats
from pipeline.stage import StageContext

SELECT_DIR = ".select"


def part_source_counts(seqs_path: str) -> dict[str, int]:
    """Executor task: sequences per source name in one pack part."""
    vc = pc.value_counts(read_table(Path(seqs_path), columns=["source"]).column("source"))
    return {v["values"].as_py(): v["counts"].as_py() for v in vc if v["values"].is_valid}


def allocate(per_part: np.ndarray, wanted: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """[parts, sources] how many of each source each part gives: per source, `wanted[k]` of
    its per_part[:, k] sequences drawn without replacement (multivariate hypergeometric)."""
    out = np.zeros_like(per_part)
    for k in range(per_part.shape[1]):
        if wanted[k]:
            out[:, k] = rng.multivariate_hypergeometric(per_part[:, k], int(wanted[k]))
    return out


def select_part(
    item: tuple[int, str, np.ndarray, int], names: list[str], folder: str, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Executor task: part p's selected rows, `take[k]` of source k, `n_eval` of them held out;
    writes p.train.npy / p.eval.npy (sorted int32 rows) and returns the per-source counts."""
    p, seqs_path, take, n_eval = item
    source = read_table(Path(seqs_path), columns=["source"]).column("source")
    codes = pc.index_in(source, value_set=pa.array(names, pa.string())).to_numpy(
        zero_copy_only=False
    )
    rng = np.random.default_rng([seed, 17, p])
    picked = [
        rng.choice(np.flatnonzero(codes == k), int(n), replace=False)
        for k, n in enumerate(take)
        if n
    ]
    rows = np.sort(np.concatenate(picked)) if picked else np.zeros(0, np.int64)
    held = np.zeros(len(rows), bool)
    held[rng.choice(len(rows), n_eval, replace=False)] = True
    save_npy(Path(folder) / f"{p:06d}.train.npy", rows[~held].astype(np.int32))
    save_npy(Path(folder) / f"{p:06d}.eval.npy", rows[held].astype(np.int32))
    k = len(names)
    return (
        np.bincount(codes[rows[~held]], minlength=k).astype(np.int64),
        np.bincount(codes[rows[held]], minlength=k).astype(np.int64),
    )


def recorded(path: Path, shard: tuple[str, int, str], **extra: Any) -> dict[str, Any]:
    """A write task's result: "outputs" (relative to the stage folder: split/file) makes the
    executor record the finished shard for part-level resume (pipeline.run.resume)."""
    return {"outputs": [f"{path.parent.name}/{path.name}"], "shard": shard, **extra}


def gather_shard(
    part: np.ndarray, rows: np.ndarray, parts: list[dict[str, str]], path: Path
) -> tuple[str, int, str]:
    """Write one shard: output row i is row rows[i] of pack part part[i]."""
    arrays = {}
    for field in FIELDS:
        out = None
        for p in np.unique(part):
            mm = np.load(parts[int(p)][field], mmap_mode="r", allow_pickle=False)
            if out is None:
                out = np.empty((len(rows), mm.shape[1]), mm.dtype)
            sel = np.flatnonzero(part == p)
            out[sel] = mm[rows[sel]]
            del mm
        arrays[field] = out
    save_npz(path, arrays)
    return path.name, len(rows), sha256_file(path)


def _locate(ranks: np.ndarray, starts: np.ndarray, folder: str, kind: str):
    """(part, row) of each rank among the `kind` sequences in pack order."""
    part = np.searchsorted(starts, ranks, side="right") - 1
    rows = np.empty(len(ranks), np.int64)
    for p in np.unique(part):
        sel = np.flatnonzero(part == p)
        mine = np.load(Path(folder) / f"{int(p):06d}.{kind}.npy", mmap_mode="r")
        rows[sel] = mine[ranks[sel] - starts[p]]
        del mine
    return part, rows


def write_train_shard(
    job: tuple[int, int, int],
    starts: np.ndarray,
    perm_seed: int,
    parts: list[dict[str, str]],
    folder: str,
    out_dir: str,
) -> dict[str, Any]:
    """Executor task: train shard j = output positions [a, b) of the Feistel order; returns its
    (file, rows, sha256) and its shuffle statistics (merged in order by the driver), recorded
    for part-level resume."""
    j, a, b = job
    total = int(starts[-1])
    ranks = FeistelPermutation(total, perm_seed)(np.arange(a, b, dtype=np.int64))
    part, rows = _locate(ranks, starts, folder, "train")
    q = ShuffleStats(np.diff(starts))
    q.seek(a)
    q.add(part, ranks)
    path = Path(out_dir) / shard_name(j)
    return recorded(path, gather_shard(part, rows, parts, path), stats=q.state())


def write_eval_shard(
    job: tuple[int, int, int],
    starts: np.ndarray,
    parts: list[dict[str, str]],
    folder: str,
    out_dir: str,
) -> dict[str, Any]:
    """Executor task: eval shard j = eval sequences [a, b) in pack order."""
    j, a, b = job
    part, rows = _locate(np.arange(a, b, dtype=np.int64), starts, folder, "eval")
    path = Path(out_dir) / shard_name(j)
    return recorded(path, gather_shard(part, rows, parts, path))


def _jobs(total: int, shard_size: int) -> list[tuple[int, int, int]]:
    bounds = np.cumsum([0, *shard_sizes(total, shard_size)]).tolist()
    return [(j, bounds[j], bounds[j + 1]) for j in range(len(bounds) - 1)]


def _starts(per_part: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(per_part)]).astype(np.int64)


def run_bounded(
    ctx: StageContext,
    parts: list[dict[str, str]],
    names: list[str],
    per_part: np.ndarray,
    counts: dict[str, int],
    eval_fraction: float,
    shard_size: int,
) -> dict[str, Any]:
    """Select, split and write; returns per split: written shards, per-source counts, and the
    train shuffle statistics."""
    seed, perm_seed = ctx.seed, ctx.seed + 1
    rng = np.random.default_rng([seed, 17])
    wanted = np.array([counts[s] for s in names], np.int64)
    take = allocate(per_part, wanted, rng)
    selected = take.sum(axis=1)
    n_sel = int(selected.sum())
    n_eval = int(round(n_sel * eval_fraction))  # as split_eval
    if eval_fraction > 0 and n_sel >= 2:
        n_eval = max(1, n_eval)
    n_eval = min(n_eval, max(n_sel - 1, 0))
    evals = rng.multivariate_hypergeometric(selected, n_eval) if n_sel else selected * 0
    folder = ctx.out_dir / SELECT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    items = [(p, parts[p]["seqs"], take[p], int(evals[p])) for p in range(len(parts))]
    fn = partial(select_part, names=names, folder=str(folder), seed=seed)
    picked = ctx.executor.map(fn, items, desc="shard select")
    train_src = sum((r[0] for r in picked), np.zeros(len(names), np.int64))
    eval_src = sum((r[1] for r in picked), np.zeros(len(names), np.int64))
    train_starts, eval_starts = _starts(selected - evals), _starts(evals)
    common = {"parts": parts, "folder": str(folder)}
    out: dict[str, Any] = {}
    (ctx.out_dir / "train").mkdir(parents=True, exist_ok=True)
    (ctx.out_dir / "eval").mkdir(parents=True, exist_ok=True)
    fn_train = partial(
        write_train_shard,
        starts=train_starts,
        perm_seed=perm_seed,
        out_dir=str(ctx.out_dir / "train"),
        **common,
    )
    train_total = int(train_starts[-1])
    results = ctx.executor.map(fn_train, _jobs(train_total, shard_size), desc="shard train")
    q = ShuffleStats(selected - evals)
    for r in results:
        q.merge(r["stats"])
    out["train"] = ([r["shard"] for r in results], train_src)
    fn_eval = partial(
        write_eval_shard, starts=eval_starts, out_dir=str(ctx.out_dir / "eval"), **common
    )
    written = ctx.executor.map(fn_eval, _jobs(int(eval_starts[-1]), shard_size), desc="shard eval")
    out["eval"] = ([r["shard"] for r in written], eval_src)
    out["shuffle"] = q.result()
    return out
